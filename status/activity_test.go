package status_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/status"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// fakeClock is a clock that tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// decision returns the event of a limiter call for tenant's task of type
// sms:send, whose rules are "tenant" and "provider": allowed when denied is
// -1, else denied by that rule.
func decision(tenant string, denied int) worker.DecisionEvent {
	d := throttle.MultiDecision{Decision: throttle.Decision{Allowed: denied < 0}, Denied: denied}
	return worker.DecisionEvent{TaskType: "sms:send", Tenant: tenant, Rules: []string{"tenant", "provider"}, Decision: d}
}

// activityStep is a decision an Activity observes, at a time after its
// clock's start.
type activityStep struct {
	at time.Duration
	e  worker.DecisionEvent
}

// activityRate names a denial rate: tenant "" for every tenant.
type activityRate struct{ rule, tenant string }

// activityCase is a case of TestActivity.
type activityCase struct {
	name        string
	cfg         status.ActivityConfig
	steps       []activityStep
	at          time.Duration // when it is read
	wantTenants []string
	wantRates   map[activityRate]float64
}

// activityCases returns the cases of TestActivity.
func activityCases() []activityCase {
	early := decision("acme", 0)
	early.Decision.Early = true
	failed := decision("acme", -1)
	failed.Err, failed.Decision = errors.New("dial tcp: connection refused"), throttle.MultiDecision{}
	return []activityCase{
		{
			name:        "denials a second: the rule that set the wait, per tenant and in all",
			steps:       []activityStep{{0, decision("acme", 0)}, {0, decision("acme", 0)}, {5 * time.Second, decision("globex", 1)}, {6 * time.Second, decision("globex", -1)}},
			at:          9 * time.Second,
			wantTenants: []string{"acme", "globex"},
			wantRates: map[activityRate]float64{
				{"tenant", "acme"}: 0.2, {"tenant", "globex"}: 0, {"tenant", ""}: 0.2,
				{"provider", "acme"}: 0, {"provider", "globex"}: 0.1, {"provider", ""}: 0.1,
			},
		},
		{
			name:        "denials older than 10 s no longer count",
			steps:       []activityStep{{0, decision("acme", 0)}, {5 * time.Second, decision("acme", 0)}},
			at:          10 * time.Second,
			wantTenants: []string{"acme"},
			wantRates:   map[activityRate]float64{{"tenant", "acme"}: 0.1, {"tenant", ""}: 0.1},
		},
		{
			name:        "early returns, failed calls and admissions are not denials",
			steps:       []activityStep{{0, early}, {0, failed}, {0, decision("acme", -1)}},
			at:          time.Second,
			wantTenants: []string{"acme"},
			wantRates:   map[activityRate]float64{{"tenant", "acme"}: 0, {"provider", ""}: 0},
		},
		{
			name:        "at most Tenants: the one seen least recently goes",
			cfg:         status.ActivityConfig{Tenants: 2},
			steps:       []activityStep{{0, decision("acme", 0)}, {time.Second, decision("globex", -1)}, {2 * time.Second, decision("acme", -1)}, {3 * time.Second, decision("initech", -1)}},
			at:          3 * time.Second,
			wantTenants: []string{"acme", "initech"},
			wantRates:   map[activityRate]float64{{"tenant", "acme"}: 0.1, {"tenant", "globex"}: 0},
		},
		{
			name:        "forgotten after Forget",
			cfg:         status.ActivityConfig{Forget: time.Minute},
			steps:       []activityStep{{0, decision("acme", -1)}, {30 * time.Second, decision("globex", -1)}},
			at:          61 * time.Second,
			wantTenants: []string{"globex"},
		},
		{
			name:        "a task without a tenant is not a tenant",
			steps:       []activityStep{{0, decision("", 0)}},
			wantTenants: []string{},
		},
	}
}

// TestActivity: which tenants an Activity keeps, and the denials a second
// it counts, over the last 10 s.
func TestActivity(t *testing.T) {
	t.Parallel()
	for _, tc := range activityCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			start := clock.Now()
			cfg := tc.cfg
			cfg.Now = clock.Now
			a := status.NewActivity(&cfg)
			for _, s := range tc.steps {
				clock.Set(start.Add(s.at))
				a.ObserveDecision(s.e)
			}
			clock.Set(start.Add(tc.at))
			got := []string{}
			for _, st := range a.Tenants() {
				got = append(got, st.Tenant)
				if diff := cmp.Diff([]string{"sms:send"}, st.TaskTypes); diff != "" {
					t.Errorf("task types of %s (-want +got):\n%s", st.Tenant, diff)
				}
			}
			if diff := cmp.Diff(tc.wantTenants, got); diff != "" {
				t.Errorf("Tenants (-want +got):\n%s", diff)
			}
			for r, want := range tc.wantRates {
				if got := a.DenialRate("sms:send", r.rule, r.tenant); got != want {
					t.Errorf("DenialRate(sms:send, %s, %q) = %v, want %v", r.rule, r.tenant, got, want)
				}
			}
		})
	}
}

// TestActivityProviders: the provider's answers and 429s, in the last
// minute and in all.
func TestActivityProviders(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	start := clock.Now()
	a := status.NewActivity(&status.ActivityConfig{Now: clock.Now})
	a.ObserveProvider(worker.ProviderEvent{Provider: "sms"})
	a.ObserveProvider(worker.ProviderEvent{Provider: "sms", Err: &provider.StatusError{Code: 429, Status: "429 Too Many Requests"}})
	clock.Set(start.Add(30 * time.Second))
	a.ObserveProvider(worker.ProviderEvent{Provider: "sms", Err: &provider.ThrottledError{FromProvider: true, RetryAfter: time.Second}})
	a.ObserveProvider(worker.ProviderEvent{Provider: "email", Err: errors.New("dial tcp: connection refused")})
	clock.Set(start.Add(70 * time.Second))
	want := []status.ProviderActivity{
		{Provider: "email", Answers: 1, AnswersTotal: 1},
		{Provider: "sms", Answers: 1, TooMany: 1, AnswersTotal: 3, TooManyTotal: 2, LastTooMany: start.Add(30 * time.Second)},
	}
	if diff := cmp.Diff(want, a.Providers()); diff != "" {
		t.Errorf("Providers 70 s in (-want +got):\n%s", diff)
	}
}
