package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// TestMiddlewareDecisionTimeout: when Redis stops answering (a partition:
// the connection stays open and nothing comes back), the decision fails
// when DecisionTimeout passes, not when the client's own read timeout
// (here an hour) does, and the task waits (fail-closed).
func TestMiddlewareDecisionTimeout(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	proxy, err := faultproxy.Start(rdb.Options().Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	opt := *rdb.Options()
	opt.Addr = proxy.Addr()
	opt.ReadTimeout, opt.WriteTimeout, opt.ContextTimeoutEnabled = time.Hour, time.Hour, true
	cut := redis.NewClient(&opt)
	t.Cleanup(func() { _ = cut.Close() })
	if err := cut.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	proxy.Set(faultproxy.Blackhole) // the open connection goes quiet

	p, err := policies.Parse(t.Name(), []byte(perHour))
	if err != nil {
		t.Fatal(err)
	}
	events := make(decisionRecorder, 10)
	tr, err := worker.NewThrottle(throttle.NewLimiter(cut, throttle.WithPrefix(redistest.Prefix(t))), policies.Static(p), &worker.ThrottleConfig{
		DecisionTimeout:          200 * time.Millisecond,
		LimiterRetry:             time.Hour, // one call, not one a second
		DelayedTaskCheckInterval: serverCheckInterval,
		Logger:                   slog.New(slog.DiscardHandler),
		OnDecision:               events.record,
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(nil)
	s := startServer(t, rdb, tr.Middleware(rec))
	s.enqueue(t, smsTask(t, "acme", asynq.MaxRetry(0)))
	f := testwait.Receive(t, s.failures, "ErrorHandler call")
	s.stop()
	te, ok := errors.AsType[*provider.ThrottledError](f.Err)
	if !ok || te.By != "limiter unavailable" {
		t.Fatalf("task ended with %v, want throttled by the limiter unavailable", f.Err)
	}
	if !errors.Is(te.Err, context.DeadlineExceeded) {
		t.Errorf("Err = %v, want the decision timeout (context.DeadlineExceeded)", te.Err)
	}
	if calls := testwait.Drain(rec.calls); len(calls) > 0 {
		t.Errorf("the handler ran %d times without a decision", len(calls))
	}
	for _, e := range testwait.Drain(events) {
		t.Logf("decision failed after %v: %v", e.Latency, e.Err)
	}
}

// TestSyncHook: a command whose context is already done runs as if it had
// none, and one whose context is live keeps its deadline.
func TestSyncHook(t *testing.T) {
	t.Parallel()
	opt := *redistest.Client(t).Options()
	opt.ContextTimeoutEnabled = true
	key := redistest.Prefix(t) + "k"

	cases := []struct {
		name    string
		hook    bool
		wantErr error // of a SET with a cancelled context
	}{
		{"without the hook", false, context.Canceled},
		{"with the hook", true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb := redis.NewClient(&opt)
			t.Cleanup(func() { _ = rdb.Close() })
			if tc.hook {
				rdb.AddHook(worker.SyncHook{})
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := rdb.Set(ctx, key+tc.name, "v", time.Minute).Err()
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("SET with a cancelled context: %v, want %v", err, tc.wantErr)
			}
			t.Cleanup(func() { rdb.Del(context.Background(), key+tc.name) })

			// BLPOP waits 5 s for a list that stays empty, then answers
			// nil; the context's deadline ends it first, hook or not, as
			// a timeout of the read.
			ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			err = rdb.BLPop(ctx, 5*time.Second, key+tc.name+":empty").Err()
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("BLPOP with a live context of 100 ms: %v, want its deadline exceeded", err)
			}
		})
	}
}
