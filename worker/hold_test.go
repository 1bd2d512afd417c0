package worker_test

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// TestMiddlewareHoldsShortWaits: a denied task whose place is within
// MaxHold waits for it in the worker and never goes through the retry set;
// with holding turned off, the same tasks do.
func TestMiddlewareHoldsShortWaits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		maxHold   time.Duration
		throttled bool // whether tasks went through the retry set
	}{
		{"default hold of 2s", 0, false},
		{"no holding", -1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb := redistest.Client(t)
			prefix := redistest.Prefix(t)
			p, err := policies.Parse(t.Name(), []byte(`
tasks:
  sms:send:
    - {name: per-second, scope: tenant, limit: 2, window: 1s}
`))
			if err != nil {
				t.Fatal(err)
			}
			tr, err := worker.NewThrottle(throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)), policies.Static(p),
				&worker.ThrottleConfig{MaxHold: tc.maxHold, DelayedTaskCheckInterval: serverCheckInterval, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rdb.Del(t.Context(), redistest.Keys(t, rdb, prefix)...) })
			rec := newRecorder(nil)
			s := startServer(t, rdb, tr.Middleware(rec))
			// Places at 0, 0, 1s and 1s: the last two wait under 1.1s.
			const n = 4
			for range n {
				s.enqueue(t, smsTask(t, "acme"))
			}
			for range n {
				testwait.Receive(t, rec.calls, "handler call")
			}
			s.stop()
			throttled := 0
			for _, f := range testwait.Drain(s.failures) {
				if !provider.IsThrottled(f.Err) {
					t.Errorf("task %s failed: %v", f.ID, f.Err)
				}
				throttled++
			}
			if got, want := throttled > 0, tc.throttled; got != want {
				t.Errorf("%d tasks went through the retry set; want some: %v", throttled, want)
			}
		})
	}
}

// TestMiddlewareProviderHold: after a provider's 429, other tasks of the
// account wait until its Retry-After, in this worker and, through Redis, in
// any other sharing the limiter's prefix.
func TestMiddlewareProviderHold(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	p, err := policies.Parse(t.Name(), []byte("tasks: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	limiter := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	tr, err := worker.NewThrottle(limiter, policies.Static(p),
		&worker.ThrottleConfig{DelayedTaskCheckInterval: serverCheckInterval, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(t.Context(), redistest.Keys(t, rdb, prefix)...) })
	const hold = 1500 * time.Millisecond
	var answered atomic.Bool
	rec := newRecorder(func(c call) error {
		if !answered.Swap(true) {
			return &provider.ThrottledError{RetryAfter: hold, By: "provider 429", FromProvider: true}
		}
		return nil
	})
	s := startServer(t, rdb, tr.Middleware(rec))
	s.enqueue(t, smsTask(t, "acme"))
	c429 := testwait.Receive(t, rec.calls, "the call answered 429")
	// The hold is in Redis for every worker.
	testwait.Eventually(t, func() (bool, string) {
		d, err := limiter.HeldFor(t.Context(), "provider/sms:send")
		return err == nil && d > 0, "no hold in Redis"
	})
	s.enqueue(t, smsTask(t, "other-tenant"))
	next := testwait.Receive(t, rec.calls, "a task of another tenant")
	if waited := next.At.Sub(c429.At); waited < hold-100*time.Millisecond {
		t.Errorf("a task of another tenant ran %v after the 429, within its hold of %v", waited, hold)
	}
}

// TestMiddlewareWaitsWithinTheDeadline: a task whose deadline is nearer
// than its place in line does not wait in the worker, where asynq would
// count the deadline as a failure and spend the retry budget: it goes back
// through the retry set, its retry count untouched, and is sent later.
func TestMiddlewareWaitsWithinTheDeadline(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	p, err := policies.Parse(t.Name(), []byte(`
tasks:
  sms:send:
    - {name: slow, scope: tenant, limit: 1, window: 1500ms}
`))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := worker.NewThrottle(throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)), policies.Static(p),
		&worker.ThrottleConfig{DelayedTaskCheckInterval: serverCheckInterval, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(t.Context(), redistest.Keys(t, rdb, prefix)...) })
	rec := newRecorder(nil)
	s := startServer(t, rdb, tr.Middleware(rec))
	// The second task's place is 1.5 s after the first; its deadline is
	// 1 s after it starts.
	for range 2 {
		s.enqueue(t, smsTask(t, "acme", asynq.MaxRetry(0), asynq.Timeout(time.Second)))
	}
	for range 2 {
		if c := testwait.Receive(t, rec.calls, "handler call"); c.Retried != 0 {
			t.Errorf("task %s ran with Retried = %d, want 0", c.ID, c.Retried)
		}
	}
	s.stop()
	for _, f := range testwait.Drain(s.failures) {
		if !provider.IsThrottled(f.Err) {
			t.Errorf("task %s failed: %v", f.ID, f.Err)
		}
	}
	if archived := s.archived(t); len(archived) > 0 {
		t.Errorf("%d tasks archived, the first with %q", len(archived), archived[0].LastErr)
	}
}

// TestMiddlewareProviderUnhold: a hold ended in Redis (admin unhold) ends
// in the worker that set it too, at its next read of the hold: tasks of
// another tenant, enqueued once the hold is gone, run at once, not at
// the end of the hour the provider asked for.
func TestMiddlewareProviderUnhold(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	p, err := policies.Parse(t.Name(), []byte("tasks: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	limiter := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	tr, err := worker.NewThrottle(limiter, policies.Static(p),
		&worker.ThrottleConfig{DelayedTaskCheckInterval: serverCheckInterval, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(t.Context(), redistest.Keys(t, rdb, prefix)...) })
	var answered atomic.Bool
	rec := newRecorder(func(c call) error {
		if !answered.Swap(true) {
			return &provider.ThrottledError{RetryAfter: time.Hour, By: "provider 429", FromProvider: true}
		}
		return nil
	})
	s := startServer(t, rdb, tr.Middleware(rec))
	s.enqueue(t, smsTask(t, "acme"))
	testwait.Receive(t, rec.calls, "the call answered 429")
	testwait.Eventually(t, func() (bool, string) {
		d, err := limiter.HeldFor(t.Context(), "provider/sms:send")
		return err == nil && d > 0, "no hold in Redis"
	})
	if ended, err := limiter.Unhold(t.Context(), "provider/sms:send"); err != nil || !ended {
		t.Fatalf("Unhold: %v, %v", ended, err)
	}
	// Past the 250 ms a worker trusts what it read of a hold (holdRefresh):
	// the next task reads Redis again.
	time.Sleep(300 * time.Millisecond)
	// Five: those that come within 250 ms of the first's read take what it
	// read from the worker's cache, which must not be the old hold.
	for range 5 {
		s.enqueue(t, smsTask(t, "other-tenant"))
	}
	for range 5 {
		if c := testwait.Receive(t, rec.calls, "a task of another tenant, the hold ended"); c.Tenant != "other-tenant" {
			t.Errorf("ran a task of %s, want other-tenant's", c.Tenant)
		}
	}
}
