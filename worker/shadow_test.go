package worker_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// TestMiddlewareShadow: a rule in shadow mode never holds a task back; it
// decides for every task that runs, records those it allows, and its
// decisions reach the OnDecision hook. An enforcing rule beside it still
// holds tasks back.
func TestMiddlewareShadow(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		policies    string
		tasks       int
		wantRun     int    // tasks the handler ran
		wantShadow  []bool // the shadow rule's decisions, in order
		wantWindow  int    // units in the shadow rule's window at the end
		enforceRule string // "" when every rule is in shadow mode
	}{
		{"every rule in shadow", `
tasks:
  sms:send:
    - {name: trial, scope: tenant, limit: 2, window: 1h, mode: shadow}
`, 4, 4, []bool{true, true, false, false}, 2, ""},
		{"beside an enforcing rule", `
tasks:
  sms:send:
    - {name: per-hour, scope: tenant, limit: 3, window: 1h}
    - {name: trial, scope: tenant, limit: 1, window: 1h, mode: shadow}
`, 4, 3, []bool{true, false, false}, 1, "per-hour"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb := redistest.Client(t)
			prefix := redistest.Prefix(t)
			p, err := policies.Parse(t.Name(), []byte(tc.policies))
			if err != nil {
				t.Fatal(err)
			}
			limiter := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
			events := make(decisionRecorder, 20)
			// MaxHold -1: a denied task goes back at once.
			tr := newRecordingThrottle(t, limiter, p, -1, events)
			rec := newRecorder(nil)
			s := startServer(t, rdb, tr.Middleware(rec))
			// One at a time, so that the decisions come in order.
			for i := range tc.tasks {
				s.enqueue(t, smsTask(t, "acme"))
				if i < tc.wantRun {
					testwait.Receive(t, rec.calls, "handler call")
				} else {
					testwait.Receive(t, s.failures, "throttled return")
				}
			}
			s.stop()
			if calls := testwait.Drain(rec.calls); len(calls) > 0 {
				t.Errorf("the handler ran %d tasks more than %d", len(calls), tc.wantRun)
			}
			shadow := shadowDecisions(t, testwait.Drain(events), tc.enforceRule)
			if got, want := shadow, tc.wantShadow; !slices.Equal(got, want) {
				t.Errorf("shadow decisions %v, want %v", got, want)
			}
			for _, a := range p.For("sms:send", "acme") {
				if a.Rule != "trial" {
					continue
				}
				d, err := limiter.Peek(context.Background(), a.Check.Key, a.Check.Policy)
				if err != nil {
					t.Fatal(err)
				}
				if d.Count != tc.wantWindow {
					t.Errorf("the shadow rule's window holds %d, want %d: it records the sends it allows", d.Count, tc.wantWindow)
				}
			}
		})
	}
}

// shadowDecisions checks that the shadow rule "trial" never enforces in
// events, and that enforceRule ("" for none) alone does, and returns the
// shadow rule's decisions, in order.
func shadowDecisions(t *testing.T, events []worker.DecisionEvent, enforceRule string) []bool {
	t.Helper()
	var shadow []bool
	for _, e := range events {
		for _, r := range e.Rules {
			if r == "trial" {
				t.Errorf("the shadow rule is among the enforcing rules of an event: %v", e.Rules)
			}
		}
		if enforceRule != "" && (len(e.Rules) != 1 || e.Rules[0] != enforceRule) {
			t.Errorf("event rules %v, want [%s]", e.Rules, enforceRule)
		}
		for _, d := range e.Shadow {
			if d.Err != nil || d.Rule != "trial" {
				t.Errorf("shadow decision %+v, want one of rule trial without error", d)
			}
			shadow = append(shadow, d.Allowed)
		}
	}
	return shadow
}

// TestPoliciesShadowMode: mode: shadow marks the rule and its checks, and
// the summary says so; enforce, or no mode, is the default.
func TestPoliciesShadowMode(t *testing.T) {
	t.Parallel()
	p, err := policies.Parse(t.Name(), []byte(`
tasks:
  sms:send:
    - {name: tenant, scope: tenant, limit: 4, window: 1s, mode: enforce}
    - {name: provider, scope: global, limit: 10, window: 1s}
    - {name: trial, scope: tenant, limit: 2, window: 1s, mode: shadow}
`))
	if err != nil {
		t.Fatal(err)
	}
	var shadow []string
	for _, a := range p.For("sms:send", "acme") {
		if a.Shadow {
			shadow = append(shadow, a.Rule)
		}
	}
	if !slices.Equal(shadow, []string{"trial"}) {
		t.Errorf("shadow checks %v, want [trial]", shadow)
	}
	if got, want := p.Summary(), "sms:send: tenant 4/1s per tenant, provider 10/1s global, trial 2/1s per tenant (shadow)"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
}
