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

// StateConfig configures NewState.
type StateConfig struct {
	// Ready is what /readyz answers (OpsConfig.Ready); nil means ready.
	Ready func(context.Context) error
	// Holds reads the provider holds in force (worker.Server.Holds); nil
	// reports none.
	Holds func(ctx context.Context, most int) ([]throttle.HeldKey, error)
}

// State is a prometheus.Collector of what a worker reads at each scrape,
// for the alerts (deploy/prometheus/alerts.yml, docs/DAYONE.md):
//
//   - sluice_ready: 1 when the worker is ready, as /readyz says, else 0;
//   - sluice_provider_holds: the provider holds in force, shared by every
//     worker of the prefix;
//   - sluice_provider_hold_remaining_seconds: the longest time one of them
//     has left, 0 when none.
//
// Each scrape makes one readiness check and one SCAN of the holds, bounded
// by a second; holds that cannot be read are not reported, so a scrape of
// a worker that cannot reach Redis has sluice_ready 0 and no hold series.
type State struct {
	cfg                 StateConfig
	ready, holds, until *prometheus.Desc
}

// NewState returns the State of cfg.
func NewState(cfg StateConfig) *State {
	return &State{
		cfg:   cfg,
		ready: prometheus.NewDesc("sluice_ready", "1 when the worker is ready (/readyz answers ready), else 0.", nil, nil),
		holds: prometheus.NewDesc("sluice_provider_holds", "Provider holds in force (a 429's Retry-After), shared by every worker of the prefix.", nil, nil),
		until: prometheus.NewDesc("sluice_provider_hold_remaining_seconds", "The longest time a provider hold in force has left; 0 when none.", nil, nil),
	}
}

// Describe sends the descriptions of s's metrics.
func (s *State) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.ready
	ch <- s.holds
	ch <- s.until
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
