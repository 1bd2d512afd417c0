package status

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// OpsConfig configures OpsHandler.
type OpsConfig struct {
	// Gatherer serves /metrics; required. A *prometheus.Registry with the
	// worker's Metrics (NewMetrics) registered is one.
	Gatherer prometheus.Gatherer

	// Ready answers /readyz: nil means ready. Nil means always ready.
	// worker.Server.Ready is one.
	Ready func(context.Context) error

	// Status serves the page at "/" (Page); nil means a short index of the
	// endpoints.
	Status http.Handler
}

// readyTimeout bounds a /readyz check: a probe must not hang when Redis
// does.
const readyTimeout = time.Second

// OpsHandler returns the handler of a worker's operations address:
//
//   - /metrics: Prometheus metrics, in the text or protobuf format;
//   - /healthz: 200 "ok" while the process serves HTTP (liveness);
//   - /readyz: 200 "ready", or 503 and the reason when cfg.Ready fails
//     within 1 s (readiness: Redis unreachable, no policies);
//   - /: cfg.Status.
func OpsHandler(cfg OpsConfig) (http.Handler, error) {
	if cfg.Gatherer == nil {
		return nil, errors.New("status: OpsHandler: nil Gatherer")
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if cfg.Ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			defer cancel()
			if err := cfg.Ready(ctx); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintln(w, "not ready:", err)
				return
			}
		}
		fmt.Fprintln(w, "ready")
	})
	status := cfg.Status
	if status == nil {
		status = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprintln(w, "Sluice worker: /metrics, /healthz, /readyz")
		})
	}
	mux.Handle("GET /{$}", status)
	return mux, nil
}
