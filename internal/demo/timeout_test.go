package demo

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/policies"
)

// TestDrainTime: the drain time is, over every window key of every
// enforced rule, the longest of ceil(n/L)-1 windows widened by the margin;
// the timeout is 1.2 times that plus 10 s.
func TestDrainTime(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		policies string // "" for the built-in ones
		tasks    int
		drain    time.Duration
		timeout  time.Duration
	}{
		// acme 30 at 4/1.1s: 7 windows; globex 20 at 2: 9; initech 10 at 1:
		// 9; the provider, 60 at 5: 11 windows of 1.1 s.
		{"built-in, default tasks", "", DefaultTasks, 12100 * time.Millisecond, 24520 * time.Millisecond},
		// One each: the provider's 5 take them at once.
		{"built-in, fewest tasks", "", MinTasks, 0, TimeoutSlack},
		// acme 5 at 4, globex 3 at 2, the provider 9 at 5: one window.
		{"built-in, 9 tasks", "", 9, 1100 * time.Millisecond, 11320 * time.Millisecond},
		// acme 201, globex 133, initech 66; the provider, 400 at 5: 79 windows.
		{"built-in, 400 tasks", "", 400, 86900 * time.Millisecond, 114280 * time.Millisecond},
		// acme 501, globex 333 (166 windows at 2), initech 166; the provider,
		// 1,000 at 5: 199 windows.
		{"built-in, most tasks", "", MaxTasks, 218900 * time.Millisecond, 272680 * time.Millisecond},
		// No margin set: 50 ms. initech's 10 at 1 a second bind: 9 windows.
		{"tenant rule, default margin", `
tasks:
  sms:send:
    - {name: t, scope: tenant, limit: 3, window: 1s, tenants: {initech: {limit: 1}}}
`, 60, 9 * 1050 * time.Millisecond, 21340 * time.Millisecond},
		// A shadow rule holds nothing back: only the 10/s global rule counts.
		{"shadow rule", `
margin: 0s
tasks:
  sms:send:
    - {name: strict, scope: tenant, limit: 1, window: 1s, mode: shadow}
    - {name: provider, scope: global, limit: 10, window: 1s}
`, 60, 5 * time.Second, 16 * time.Second},
		{"no rules for SMS", `
tasks:
  email:send:
    - {name: e, scope: global, limit: 1, window: 1h}
`, MaxTasks, 0, TimeoutSlack},
		// 999 windows of 10 years do not fit in a time.Duration.
		{"longer than a Duration", `
margin: 0s
tasks:
  sms:send:
    - {name: decade, scope: global, limit: 1, window: 87840h}
`, MaxTasks, math.MaxInt64, math.MaxInt64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data := builtinPolicies
			if tc.policies != "" {
				data = []byte(tc.policies)
			}
			p, err := policies.Parse(tc.name, data)
			if err != nil {
				t.Fatal(err)
			}
			tenants := []string{"acme", "globex", "initech"}
			drain := drainTime(p, tenants, split(tc.tasks))
			if got, want := drain, tc.drain; got != want {
				t.Errorf("drainTime = %v, want %v", got, want)
			}
			if got, want := timeoutFor(drain), tc.timeout; got != want {
				t.Errorf("timeoutFor(%v) = %v, want %v", drain, got, want)
			}
		})
	}
}

// TestTimeLine: the start line says how long the tasks take at the limits
// and when the demo stops, in seconds to a tenth.
func TestTimeLine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		n              int
		drain, timeout time.Duration
		want           string
	}{
		{60, 12100 * time.Millisecond, 24520 * time.Millisecond,
			"time: 60 SMS at the limits take about 12.1s; the demo stops after 24.5s unless all are sent"},
		{3, 0, TimeoutSlack,
			"time: the limits let the 3 SMS go at once; the demo stops after 10.0s unless all are sent"},
		{6, 120100 * time.Millisecond, 500 * time.Millisecond,
			"time: 6 SMS at the limits take about 120.1s; the demo stops after 0.5s unless all are sent"},
		{1000, 218900 * time.Millisecond, 272680 * time.Millisecond,
			"time: 1000 SMS at the limits take about 218.9s; the demo stops after 272.7s unless all are sent"},
	}
	for _, tc := range cases {
		if got := timeLine(tc.n, tc.drain, tc.timeout); got != tc.want {
			t.Errorf("timeLine(%d, %v, %v) = %q, want %q", tc.n, tc.drain, tc.timeout, got, tc.want)
		}
	}
}
