// Package status holds what a Sluice worker shows of itself: Prometheus
// metrics, a status page for people, and the operations endpoints that
// serve them with /healthz and /readyz.
//
// Metrics and Activity are worker.Observers: a worker.Server tells them of
// each decision, each provider's answer and each throttled return when
// they are in its Config.Observers. This package imports worker; worker
// does not import it.
//
// The pieces, one concept a file:
//
//   - metrics.go: Metrics (NewMetrics), the sluice_* series, and
//     ResponseClass, the class of a provider's answer.
//   - activity.go: Activity (NewActivity), what one worker has seen lately:
//     its tenants, the denials of each rule, its providers' answers;
//     counts.go, its counters of the last seconds.
//   - page.go: Page, the handler of the status page, and PageConfig;
//     status.html, its template.
//   - read.go: the Redis reads of one page, bounded in time and number.
//   - view.go, build.go, backlog.go, format.go: what the template shows,
//     built from the reads and the Activity.
//   - ops.go: OpsHandler, which serves /metrics, /healthz, /readyz and the
//     page.
//
// Everything is safe for concurrent use unless its documentation says
// otherwise.
package status
