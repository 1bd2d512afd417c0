package main

import (
	"errors"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	asynqmetrics "github.com/hibiken/asynq/x/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/worker"
)

// running is a worker server and, with --metrics-addr, its operations
// server, not yet serving.
type running struct {
	srv *worker.Server
	ops net.Listener // nil without --metrics-addr
	hs  *http.Server // nil without --metrics-addr
}

// newWorker returns the worker server of cfg on rdb and, when ops is not
// nil, the operations server to serve on it: Prometheus metrics (with a
// tenant label when tenants is set), /healthz, /readyz and the status
// page.
func newWorker(rdb redis.UniversalClient, cfg worker.Config, ops net.Listener, tenants bool) (*running, error) {
	reg := prometheus.NewRegistry()
	if ops != nil {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			asynqmetrics.NewQueueMetricsCollector(asynq.NewInspectorFromRedisClient(rdb)))
		var err error
		if cfg.Metrics, err = worker.NewMetrics(reg, &worker.MetricsConfig{TenantLabel: tenants}); err != nil {
			return nil, err
		}
		cfg.Activity = worker.NewActivity(nil)
	}
	srv, err := worker.NewServer(rdb, cfg)
	if err != nil {
		return nil, err
	}
	r := &running{srv: srv, ops: ops}
	if ops == nil {
		return r, nil
	}
	status, err := worker.StatusPage(rdb, worker.StatusConfig{
		Policies: cfg.Policies,
		Activity: cfg.Activity,
		Queues:   slices.Collect(maps.Keys(cfg.Queues)),
		Prefix:   cfg.Prefix,
	})
	if err != nil {
		return nil, err
	}
	h, err := worker.OpsHandler(worker.OpsConfig{Gatherer: reg, Ready: srv.Ready, Status: status})
	if err != nil {
		return nil, err
	}
	r.hs = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	return r, nil
}

// serveOps starts the operations server, if there is one, and logs where.
func (r *running) serveOps(logger *slog.Logger) {
	if r.hs == nil {
		return
	}
	go func() {
		if err := r.hs.Serve(r.ops); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("operations server stopped", "err", err)
		}
	}()
	logger.Info("operations server listening", "addr", r.ops.Addr().String(), "endpoints", "/metrics /healthz /readyz /")
}

// close stops the operations server, if there is one.
func (r *running) close() {
	if r.hs != nil {
		_ = r.hs.Close()
	}
}
