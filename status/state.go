package status

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/throttle"
)

// stateTimeout bounds what a scrape reads from Redis: a scrape must not
// hang when Redis does.
const stateTimeout = time.Second

// mostHolds bounds the holds a scrape reads (Limiter.Holds).
const mostHolds = 1000

// mostFlows bounds the waiting flows a scrape reads from each group's
// lines (Lines.Waiting, whose Redis time grows with it).
const mostFlows = 1000

// StateConfig configures NewState.
type StateConfig struct {
	// Ready is what /readyz answers (OpsConfig.Ready); nil means ready.
	Ready func(context.Context) error
	// Holds reads the provider holds in force (worker.Server.Holds); nil
	// reports none.
	Holds func(ctx context.Context, most int) ([]throttle.HeldKey, error)
	// Lines are the fair lines whose waiting tasks are counted
	// (worker.Server.AllLines); none reports none.
	Lines []*throttle.Lines
	// TenantLabel counts the waiting tasks by tenant too
	// (--metrics-tenants): a series for each tenant that waits.
	TenantLabel bool
}

// State is a prometheus.Collector of what a worker reads at each scrape,
// for the alerts (deploy/prometheus/alerts.yml, docs/DAYONE.md):
//
//   - sluice_ready: 1 when the worker is ready, as /readyz says, else 0;
//   - sluice_provider_holds: the provider holds in force, shared by every
//     worker of the prefix;
//   - sluice_provider_hold_remaining_seconds: the longest time one of them
//     has left, 0 when none;
//   - sluice_waiting_tasks: the tasks waiting in the fair lines, by task
//     type (and sluice_tenant_waiting_tasks by tenant too, with
//     TenantLabel), of the first 1,000 flows of each group.
//
// Each scrape makes one readiness check, one SCAN of the holds and one
// read of each group's lines, bounded by a second in all; what cannot be
// read is not reported, so a scrape of a worker that cannot reach Redis
// has sluice_ready 0 and none of the others.
type State struct {
	cfg                 StateConfig
	ready, holds, until *prometheus.Desc
	waiting, byTenant   *prometheus.Desc
}

// NewState returns the State of cfg.
func NewState(cfg StateConfig) *State {
	return &State{
		cfg:   cfg,
		ready: prometheus.NewDesc("sluice_ready", "1 when the worker is ready (/readyz answers ready), else 0.", nil, nil),
		holds: prometheus.NewDesc("sluice_provider_holds", "Provider holds in force (a 429's Retry-After), shared by every worker of the prefix.", nil, nil),
		until: prometheus.NewDesc("sluice_provider_hold_remaining_seconds", "The longest time a provider hold in force has left; 0 when none.", nil, nil),
		waiting: prometheus.NewDesc("sluice_waiting_tasks", "Tasks waiting in the fair lines for their turn, by task type.",
			[]string{"task_type"}, nil),
		byTenant: prometheus.NewDesc("sluice_tenant_waiting_tasks", "sluice_waiting_tasks by tenant too; only with --metrics-tenants.",
			[]string{"task_type", "tenant"}, nil),
	}
}

// Describe sends the descriptions of s's metrics.
func (s *State) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.ready
	ch <- s.holds
	ch <- s.until
	ch <- s.waiting
	if s.cfg.TenantLabel {
		ch <- s.byTenant
	}
}

// Collect reads the worker's state and sends s's metrics.
func (s *State) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	ready := 1.0
	if s.cfg.Ready != nil && s.cfg.Ready(ctx) != nil {
		ready = 0
	}
	ch <- prometheus.MustNewConstMetric(s.ready, prometheus.GaugeValue, ready)
	s.collectHolds(ctx, ch)
	s.collectWaiting(ctx, ch)
}

// collectHolds sends the holds' series, when they can be read.
func (s *State) collectHolds(ctx context.Context, ch chan<- prometheus.Metric) {
	if s.cfg.Holds == nil {
		return
	}
	held, err := s.cfg.Holds(ctx, mostHolds)
	if err != nil {
		return
	}
	longest := time.Duration(0)
	for _, h := range held {
		longest = max(longest, h.Left)
	}
	ch <- prometheus.MustNewConstMetric(s.holds, prometheus.GaugeValue, float64(len(held)))
	ch <- prometheus.MustNewConstMetric(s.until, prometheus.GaugeValue, longest.Seconds())
}

// collectWaiting sends the waiting tasks' series, when every group's
// lines can be read.
func (s *State) collectWaiting(ctx context.Context, ch chan<- prometheus.Metric) {
	if len(s.cfg.Lines) == 0 {
		return
	}
	byType := map[string]int{}
	byTenant := map[[2]string]int{}
	for _, ls := range s.cfg.Lines {
		flows, err := ls.Waiting(ctx, mostFlows)
		if err != nil {
			return
		}
		for _, f := range flows {
			byType[f.Class] += f.InLine
			byTenant[[2]string{f.Class, f.Tenant}] += f.InLine
		}
	}
	for typ, n := range byType {
		ch <- prometheus.MustNewConstMetric(s.waiting, prometheus.GaugeValue, float64(n), typ)
	}
	if s.cfg.TenantLabel {
		for k, n := range byTenant {
			ch <- prometheus.MustNewConstMetric(s.byTenant, prometheus.GaugeValue, float64(n), k[0], k[1])
		}
	}
}
