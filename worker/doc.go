// Package worker runs Sluice's workers: asynq servers whose tasks ask the
// limiter (package throttle) before they reach their provider.
//
// The rules come from package policies (policies.Open, Policies.For),
// reloaded on SIGHUP; the providers from package provider.
//
// The pieces, one file each:
//
//   - throttle.go: the middleware (NewThrottle, Throttle.Middleware): every
//     rule of a task checked in one atomic call; a denied task takes a
//     place in line and waits in the worker or goes back through asynq's
//     retry set as a provider.ThrottledError, never spending its retry
//     budget; providers' 429s held back in every worker; fail-closed or
//     fail-open when Redis cannot decide within DecisionTimeout.
//   - server.go: a ready-made worker (NewServer, Server.Run) with the
//     middleware, the providers and asynq set up for Sluice.
//   - handler.go: Handler, which sends each task through its provider
//     (package provider: Webhook, SMTP, LogProvider).
//   - observer.go: Observer, told of each decision (DecisionEvent, in
//     event.go), provider's answer (ProviderEvent) and throttled return
//     (ThrottledEvent); a Server tells each of Config.Observers. Package
//     status holds the metrics, the status page and the /healthz, /readyz
//     and /metrics endpoints, fed by its Observers.
//   - synchook.go: SyncHook, which makes asynq's writes after a Redis
//     outage succeed.
//
// Everything is safe for concurrent use unless its documentation says
// otherwise.
package worker
