package main

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	asynqmetrics "github.com/hibiken/asynq/x/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/status"
	"github.com/sluicehq/sluice/worker"
)

// The operations server's timeouts: a client has opsReadHeaderTimeout to send
// a request's headers, and a keep-alive connection idle for opsIdleTimeout
// is closed, so idle clients cannot hold connections without limit.
const (
	opsReadHeaderTimeout = 5 * time.Second
	opsIdleTimeout       = 10 * time.Second
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
	var activity *status.Activity
	if ops != nil {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			asynqmetrics.NewQueueMetricsCollector(asynq.NewInspectorFromRedisClient(rdb)))
		metrics, err := status.NewMetrics(reg, &status.MetricsConfig{TenantLabel: tenants})
		if err != nil {
			return nil, err
		}
		activity = status.NewActivity(nil)
		cfg.Observers = append(slices.Clip(cfg.Observers), metrics, activity)
	}
	srv, err := worker.NewServer(rdb, cfg)
	if err != nil {
		return nil, err
	}
	r := &running{srv: srv, ops: ops}
	if ops == nil {
		return r, nil
	}
	page, err := status.Page(rdb, status.PageConfig{
		Policies: cfg.Policies,
		Activity: activity,
		Queues:   srv.Queues(),
		Prefix:   cfg.Prefix,
		Lines:    srv.AllLines(),
		Refused:  srv.Refused,
	})
	if err != nil {
		return nil, err
	}
	reg.MustRegister(status.NewState(status.StateConfig{Ready: srv.Ready, Holds: srv.Holds, Lines: srv.AllLines(), TenantLabel: tenants}))
	h, err := status.OpsHandler(status.OpsConfig{Gatherer: reg, Ready: srv.Ready, Status: page})
	if err != nil {
		return nil, err
	}
	r.hs = &http.Server{Handler: h, ReadHeaderTimeout: opsReadHeaderTimeout, IdleTimeout: opsIdleTimeout}
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
