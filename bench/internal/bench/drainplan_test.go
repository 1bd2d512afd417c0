package bench

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/arrivals"
	"github.com/sluicehq/sluice/internal/sink"
)

func TestTenantSizes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                string
		tasks, tenants      int
		skew                float64
		wantFirst, wantLast int
	}{
		// 10,000 / Σ 1/√k for k = 1..50 (12.752...) = 784.2, and the 50th
		// a seventh of it.
		{"full", 10_000, 50, 0.5, 784, 111},
		{"short", 600, 10, 0.5, 120, 38},
		{"no skew: equal shares", 100, 4, 0, 25, 25},
		{"remainders go to the largest fractions", 10, 3, 0, 4, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sizes := tenantSizes(tc.tasks, tc.tenants, tc.skew)
			sum := 0
			for i, n := range sizes {
				sum += n
				if i > 0 && n > sizes[i-1] {
					t.Errorf("tenant %d has %d tasks, more than tenant %d's %d", i, n, i-1, sizes[i-1])
				}
			}
			if sum != tc.tasks || len(sizes) != tc.tenants {
				t.Errorf("%d tenants, %d tasks in all; want %d, %d", len(sizes), sum, tc.tenants, tc.tasks)
			}
			if got := [2]int{sizes[0], sizes[len(sizes)-1]}; got != [2]int{tc.wantFirst, tc.wantLast} {
				t.Errorf("largest and smallest %v, want %d and %d", got, tc.wantFirst, tc.wantLast)
			}
		})
	}
}

func TestIdealSchedule(t *testing.T) {
	t.Parallel()
	s := func(secs ...float64) []time.Duration {
		out := make([]time.Duration, len(secs))
		for i, x := range secs {
			out[i] = time.Duration(x * float64(time.Second))
		}
		return out
	}
	cases := []struct {
		name                        string
		order                       []int // tenant of each task
		tenants, tenantLim, provLim int
		pace                        time.Duration
		want                        []time.Duration
	}{
		{"the provider limit binds", []int{0, 1, 0, 1, 0, 1}, 2, 10, 2, 0, s(0, 0, 1, 1, 2, 2)},
		{"a tenant at its limit does not hold back the others", []int{0, 0, 0, 1}, 2, 1, 10, 0, s(0, 1, 2, 0)},
		{"the earliest enqueued first", []int{0, 1, 1, 0}, 2, 2, 3, 0, s(0, 0, 0, 1)},
		{"both limits", []int{0, 0, 1, 1, 2}, 3, 1, 2, 0, s(0, 1, 0, 1, 2)},
		{"nothing", nil, 1, 1, 1, 0, s()},
		// The first window full at once, then a slot interval apart: the
		// drain ends a window less a slot interval later than unpaced.
		{"paced after the first full window", []int{0, 1, 0, 1, 0, 1}, 2, 10, 2, 500 * time.Millisecond, s(0, 0, 1, 1.5, 2, 2.5)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := idealSchedule(tc.order, tc.tenants, tc.tenantLim, tc.provLim, time.Second, tc.pace)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("idealSchedule (-want +got):\n%s", diff)
			}
		})
	}
}

// TestIdealScheduleScenarios: the schedules of both scenarios keep every
// limit in every window and drain as fast as the provider limit allows.
func TestIdealScheduleScenarios(t *testing.T) {
	t.Parallel()
	cases := []struct {
		sc                    drainScenario
		wantDrain, wantMargin time.Duration
	}{
		// 10,000 tasks at 200 a window: 50 windows, the last starting 49
		// after the first; with 1.05 s windows, at 49 × 1.05 s.
		{drainFull, 49 * time.Second, 51450 * time.Millisecond},
		{drainShort, 6 * time.Second, 6300 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.sc.mode, func(t *testing.T) {
			t.Parallel()
			p := newDrainPlan(tc.sc, 50*time.Millisecond)
			if got, want := p.ideal.drain, tc.wantDrain; got != want {
				t.Errorf("ideal drain %v, want %v", got, want)
			}
			if got, want := p.withMargin.drain, tc.wantMargin; got != want {
				t.Errorf("ideal drain with margin %v, want %v", got, want)
			}
			base := time.Unix(0, 0)
			var all []time.Time
			for tenant, slots := range p.ideal.byTenant {
				if got, want := len(slots), p.tenantTasks[tenant]; got != want {
					t.Errorf("tenant %d: %d slots for %d tasks", tenant, got, want)
				}
				var times []time.Time
				for _, d := range slots {
					times = append(times, base.Add(d))
				}
				if !slices.IsSortedFunc(times, time.Time.Compare) {
					t.Errorf("tenant %d's slots are out of order", tenant)
				}
				if m := arrivals.MaxInWindow(times, tc.sc.window); m > tc.sc.tenantLimit {
					t.Errorf("tenant %d: %d in a window, limit %d", tenant, m, tc.sc.tenantLimit)
				}
				all = append(all, times...)
			}
			if m := arrivals.MaxInWindow(all, tc.sc.window); m != tc.sc.providerLimit {
				t.Errorf("%d in the fullest window, want the provider limit %d", m, tc.sc.providerLimit)
			}
		})
	}
}

func TestNewDrainPlanIsFixed(t *testing.T) {
	t.Parallel()
	a, b := newDrainPlan(drainShort, 0), newDrainPlan(drainShort, 0)
	if !slices.Equal(a.order, b.order) {
		t.Error("two plans of one scenario have different orders: the seed does not fix it")
	}
	if slices.IsSorted(a.order) {
		t.Error("the order is not shuffled")
	}
}

// TestWindowPeaks compares windowPeaks with the count of every window
// ending at each millisecond of each span, on random arrivals.
func TestWindowPeaks(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	rng := rand.New(rand.NewPCG(7, 7))
	var times []time.Time
	for range 300 {
		// Milliseconds, in bursts: many share an instant.
		times = append(times, start.Add(time.Duration(rng.IntN(40)*rng.IntN(100))*time.Millisecond))
	}
	const window, step, end = time.Second, 100 * time.Millisecond, 5 * time.Second
	got := windowPeaks(times, start, window, step, end)
	if len(got) != int(end/step)+1 {
		t.Fatalf("%d samples, want %d", len(got), end/step+1)
	}
	count := func(at time.Time) int { // arrivals in (at-window, at]
		n := 0
		for _, x := range times {
			if !x.After(at) && at.Sub(x) < window {
				n++
			}
		}
		return n
	}
	for k := range got {
		want := count(start.Add(time.Duration(k) * step))
		for ms := 1; k > 0 && ms < int(step/time.Millisecond); ms++ {
			want = max(want, count(start.Add(time.Duration(k)*step-time.Duration(ms)*time.Millisecond)))
		}
		if got[k] != want {
			t.Errorf("span ending at %v: %d, want %d", time.Duration(k)*step, got[k], want)
		}
	}
}

func TestTrailingCounts(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	at := func(ms ...int) []time.Time {
		out := make([]time.Time, len(ms))
		for i, m := range ms {
			out[i] = start.Add(time.Duration(m) * time.Millisecond)
		}
		return out
	}
	// Samples at 0, 500, 1000, 1500 ms of windows of 1 s: (t-1s, t].
	got := trailingCounts(at(0, 0, 400, 1000, 1499), start, time.Second, 500*time.Millisecond, 1500*time.Millisecond)
	if want := []int{2, 3, 2, 2}; !slices.Equal(got, want) {
		t.Errorf("trailingCounts = %v, want %v", got, want)
	}
}

func TestLargestTenants(t *testing.T) {
	t.Parallel()
	if got, want := largestTenants([]int{5, 9, 9, 1}, 3), []int{1, 2, 0}; !slices.Equal(got, want) {
		t.Errorf("largestTenants = %v, want %v", got, want)
	}
	if got := largestTenants([]int{5}, 3); !slices.Equal(got, []int{0}) {
		t.Errorf("largestTenants of one = %v", got)
	}
}

// TestDrainDelivery measures made-up arrivals against a small plan whose
// ideal schedule is known.
func TestDrainDelivery(t *testing.T) {
	t.Parallel()
	sc := drainScenario{mode: "test", tasks: 4, tenants: 2, tenantLimit: 1, providerLimit: 2, window: time.Second}
	p := &drainPlan{sc: sc, tenantNames: []string{"a", "b"}, tenantTasks: []int{3, 1}, order: []int{0, 0, 1, 0}}
	p.ideal = p.schedule(sc.window, 0) // a: 0, 1 s, 2 s; b: 0
	p.withMargin = p.schedule(sc.window+100*time.Millisecond, 0)
	start := time.Unix(1_700_000_000, 0)
	ms := func(m int) time.Time { return start.Add(time.Duration(m) * time.Millisecond) }
	receipts := []sink.Receipt{
		{ID: "drain-t0", Tenant: "a", At: ms(100)},  // 100 ms late
		{ID: "drain-t2", Tenant: "b", At: ms(150)},  // 150 ms late
		{ID: "drain-t1", Tenant: "a", At: ms(900)},  // 100 ms ahead, and a's second in a window: over
		{ID: "drain-t1", Tenant: "a", At: ms(950)},  // a duplicate, over for a and, as the third in a window, for all
		{ID: "drain-t3", Tenant: "a", At: ms(2500)}, // 500 ms late
	}
	d := drainDelivery(p, start, receipts)
	if d.delivered != 4 || d.received != 5 || !d.drained {
		t.Errorf("delivered %d, received %d, drained %t; want 4, 5, true", d.delivered, d.received, d.drained)
	}
	if d.first != 100*time.Millisecond || d.last != 2500*time.Millisecond {
		t.Errorf("first %v, last %v; want 100ms, 2.5s", d.first, d.last)
	}
	if d.globalOver != 2 || d.maxGlobal != 4 {
		// (−0.05 s, 0.95 s] holds all of the first four.
		t.Errorf("over the provider limit %d, most in a window %d; want 2, 4", d.globalOver, d.maxGlobal)
	}
	if d.tenantOver != 2 || d.tenantsOver != 1 || d.maxTenant != 3 {
		t.Errorf("over a tenant limit %d (%d tenants), most %d; want 2 (1), 3", d.tenantOver, d.tenantsOver, d.maxTenant)
	}
	// Lateness sorted: -100, 100, 150, 500 ms.
	if want := (latenessStats{p50: 100 * time.Millisecond, p99: 500 * time.Millisecond, max: 500 * time.Millisecond}); d.lateness != want {
		t.Errorf("lateness %+v, want %+v", d.lateness, want)
	}
	// With 1.1 s windows a's slots are 0, 1.1 s, 2.2 s: -200, 100, 150, 300.
	if want := (latenessStats{p50: 100 * time.Millisecond, p99: 300 * time.Millisecond, max: 300 * time.Millisecond}); d.marginLateness != want {
		t.Errorf("lateness with margin %+v, want %+v", d.marginLateness, want)
	}
	if len(d.series.Tenants) != 2 || d.series.Tenants[0].Tenant != "a" || d.series.StepMs != 100 || d.series.WindowMs != 1000 {
		t.Errorf("series %+v", d.series)
	}
	// Up to the last arrival and a window: 2.5 s + 1 s, every 100 ms.
	if got, want := len(d.series.Global), 36; got != want {
		t.Errorf("%d samples, want %d", got, want)
	}
	if got := slices.Max(d.series.Global); got != d.maxGlobal {
		t.Errorf("the series peaks at %d, the most in a window is %d", got, d.maxGlobal)
	}

	// Nothing delivered.
	d = drainDelivery(p, start, nil)
	if d.delivered != 0 || d.drained || d.lateness != (latenessStats{}) || slices.Max(d.series.Global) != 0 {
		t.Errorf("no receipts: %+v", d)
	}
}

func TestDrainTargets(t *testing.T) {
	t.Parallel()
	s := DrainStrategy{Drained: true, Utilization: 0.95, PacedUtilization: 0.97, DenialsPerDelivered: 1, LatenessP99Ms: 1000, Jain: JainResult{Min: 0.95}}
	if n, np := len(drainTargets(&s, time.Second, false)), len(drainTargets(&s, time.Second, true)); np != n+1 {
		t.Errorf("%d targets with the paced one, %d without", np, n)
	}
	for _, tg := range drainTargets(&s, time.Second, true) {
		if !tg.Met {
			t.Errorf("%s: %v against %v not met; a figure at its bound meets it", tg.Name, tg.Got, tg.Want)
		}
	}
	s.TenantViolations = 1
	s.Drained = false
	for _, tg := range drainTargets(&s, time.Second, true) {
		if tg.Met {
			t.Errorf("%s met with a violation and no complete drain", tg.Name)
		}
	}
}
