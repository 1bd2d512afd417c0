package worker_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// decisionRecorder collects the events of ThrottleConfig.OnDecision.
type decisionRecorder chan worker.DecisionEvent

func (r decisionRecorder) record(e worker.DecisionEvent) { r <- e }

// TestMiddlewareOnDecision: the hook sees every limiter call, allowed or
// denied, with the task's type and tenant, the rules checked and the
// limiter's answer; a task whose type has no rules makes no call and no
// event.
func TestMiddlewareOnDecision(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	cases := []struct {
		name     string
		policies string
		tenants  []string          // one SMS task each
		email    bool              // and an email task, whose type has no rules
		want     []decisionSummary // in any order
	}{
		{"allowed then denied", perHour, []string{"acme", "acme"}, false, []decisionSummary{
			{Tenant: "acme", Rules: []string{"per-hour"}, Allowed: true, Denied: -1},
			{Tenant: "acme", Rules: []string{"per-hour"}, Denied: 0},
		}},
		{"denied by the second rule", `
tasks:
  sms:send:
    - {name: per-hour, scope: tenant, limit: 5, window: 1h}
    - {name: provider, scope: global, limit: 1, window: 1h}
`, []string{"a", "b"}, false, []decisionSummary{
			{Tenant: "a", Rules: []string{"per-hour", "provider"}, Allowed: true, Denied: -1},
			{Tenant: "b", Rules: []string{"per-hour", "provider"}, Denied: 1},
		}},
		{"no rules, no event", perHour, nil, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := policies.Parse(t.Name(), []byte(tc.policies))
			if err != nil {
				t.Fatal(err)
			}
			prefix := redistest.Prefix(t)
			t.Cleanup(func() { rdb.Del(context.Background(), redistest.Keys(t, rdb, prefix)...) })
			events := make(decisionRecorder, 10)
			tr := newRecordingThrottle(t, throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)), p, 0, events)
			rec := newRecorder(nil)
			s := startServer(t, rdb, tr.Middleware(rec))
			// One task at a time, so that the first is the one allowed.
			var runs int
			for i, tenant := range tc.tenants {
				s.enqueue(t, smsTask(t, tenant, asynq.MaxRetry(0)))
				if tc.want[i].Allowed {
					testwait.Receive(t, rec.calls, "handler call")
					runs++
				} else {
					testwait.Receive(t, s.failures, "ErrorHandler call")
				}
			}
			if tc.email {
				s.enqueue(t, emailTask(t, "acme", asynq.MaxRetry(0)))
				testwait.Receive(t, rec.calls, "handler call")
			}
			s.stop() // every handler has returned: every event is in
			gotEvents := checkDecisionEvents(t, testwait.Drain(events))
			if diff := cmp.Diff(tc.want, gotEvents); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if calls := testwait.Drain(rec.calls); len(calls) > 0 {
				t.Errorf("handler ran %d more times", len(calls))
			}
		})
	}
}

// decisionSummary holds the fields of a DecisionEvent that a case of
// TestMiddlewareOnDecision decides.
type decisionSummary struct {
	Tenant  string
	Rules   []string
	Allowed bool
	Denied  int
}

// newRecordingThrottle returns the middleware for p on limiter, holding a
// denied task for at most maxHold (0 for the default), that passes every
// decision to events.
func newRecordingThrottle(t *testing.T, limiter *throttle.Limiter, p *policies.Policies, maxHold time.Duration, events decisionRecorder) *worker.Throttle {
	t.Helper()
	tr, err := worker.NewThrottle(limiter, policies.Static(p), &worker.ThrottleConfig{
		MaxHold:                  maxHold,
		DelayedTaskCheckInterval: serverCheckInterval,
		Logger:                   slog.New(slog.DiscardHandler),
		OnDecision:               events.record,
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// checkDecisionEvents checks the fields of events that every SMS decision
// of a one-hour window shares, and returns the others.
func checkDecisionEvents(t *testing.T, events []worker.DecisionEvent) []decisionSummary {
	t.Helper()
	var out []decisionSummary
	for _, e := range events {
		if e.TaskType != producer.TypeSMS || e.Err != nil || e.Latency <= 0 || e.Latency > testwait.For {
			t.Errorf("event %+v: want type %s, no error, a latency", e, producer.TypeSMS)
		}
		if len(e.Decision.Checks) != len(e.Rules) {
			t.Errorf("event %+v: %d checks for %d rules", e, len(e.Decision.Checks), len(e.Rules))
		}
		if !e.Decision.Allowed && e.Decision.RetryAfter < 30*time.Minute {
			t.Errorf("denied event %+v: RetryAfter %v, want the 1h window's", e, e.Decision.RetryAfter)
		}
		out = append(out, decisionSummary{Tenant: e.Tenant, Rules: e.Rules, Allowed: e.Decision.Allowed, Denied: e.Decision.Denied})
	}
	return out
}

// TestMiddlewareOnDecisionError: a limiter call that fails is an event too,
// with the error and no decision.
func TestMiddlewareOnDecisionError(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	_, down := unreachableRedis(t)
	p, err := policies.Parse(t.Name(), []byte(perHour))
	if err != nil {
		t.Fatal(err)
	}
	events := make(decisionRecorder, 10)
	tr, err := worker.NewThrottle(throttle.NewLimiter(down), policies.Static(p), &worker.ThrottleConfig{
		LimiterRetry:             time.Hour, // one call, not one a second
		DelayedTaskCheckInterval: serverCheckInterval,
		Logger:                   slog.New(slog.DiscardHandler),
		OnDecision:               events.record,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, rdb, tr.Middleware(newRecorder(nil)))
	s.enqueue(t, smsTask(t, "acme", asynq.MaxRetry(0)))
	f := testwait.Receive(t, s.failures, "ErrorHandler call")
	s.stop()
	if !provider.IsThrottled(f.Err) {
		t.Errorf("task ended with %v, want throttled", f.Err)
	}
	got := testwait.Drain(events)
	if len(got) != 1 {
		t.Fatalf("%d events, want 1: %+v", len(got), got)
	}
	e := got[0]
	if e.Err == nil || e.Decision.Allowed || e.Decision.Checks != nil || e.Tenant != "acme" || !slices.Equal(e.Rules, []string{"per-hour"}) {
		t.Errorf("event %+v: want the Redis error, a zero decision, tenant acme, rule per-hour", e)
	}
}

// TestServerOnDecision: worker.Config.OnDecision reaches the server's
// Throttle.
func TestServerOnDecision(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() { rdb.Del(context.Background(), redistest.Keys(t, rdb, prefix)...) })
	q := redistest.Queue(t, rdb)
	p, err := policies.Parse(t.Name(), []byte(perHour))
	if err != nil {
		t.Fatal(err)
	}
	events := make(decisionRecorder, 10)
	sent := make(smsRecorder, 10)
	srv, err := worker.NewServer(rdb, worker.Config{
		ThrottleConfig: worker.ThrottleConfig{
			DelayedTaskCheckInterval: serverCheckInterval,
			Logger:                   slog.New(slog.DiscardHandler),
			OnDecision:               events.record,
		},
		Policies:        policies.Static(p),
		SMS:             sent,
		Email:           provider.LogProvider{},
		Queues:          map[string]int{q: 1},
		Prefix:          prefix,
		ShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := testwait.RunServer(t, srv)
	if _, err := producer.NewClientFromRedisClient(rdb).EnqueueSMS(ctx, "acme", goodSMS, asynq.Queue(q)); err != nil {
		t.Fatal(err)
	}
	testwait.Receive(t, sent, "SMS")
	stop()
	got := testwait.Drain(events)
	if len(got) != 1 || !got[0].Decision.Allowed || got[0].Tenant != "acme" || got[0].TaskType != producer.TypeSMS {
		t.Errorf("events %+v, want one: acme's SMS allowed", got)
	}
}
