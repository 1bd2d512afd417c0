package bench

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
)

// checkDrain checks the drain section of TestRunSmoke, the short scenario
// run for real: every strategy delivered every task once, and the
// counters of the worker processes agree with each other and with the
// provider. Whether sluice kept the limits is the benchmark's finding, not
// the test's: on a loaded machine (the race detector, two cores) arrivals
// spread more than the margin.
func checkDrain(t *testing.T, dr *DrainResult) {
	t.Helper()
	if dr == nil {
		t.Fatal("no drain results")
	}
	if dr.Mode != "short" || dr.Tasks != drainShort.tasks || dr.Tenants != drainShort.tenants || dr.Processes != drainProcesses ||
		dr.Concurrency != DefaultDrainConcurrency || dr.MarginMs != 50 || dr.IdealSeconds != 6 || dr.IdealMarginSeconds != 6.3 ||
		!strings.Contains(dr.Policies, "limit: 100") {
		t.Errorf("drain settings: %+v", dr)
	}
	var names []string
	for _, s := range dr.Strategies {
		names = append(names, s.Name)
	}
	if want := []string{"sluice", "sluice-fcfs", "naive", "per-process"}; !slices.Equal(names, want) {
		t.Fatalf("strategies %q, want %q", names, want)
	}
	for _, s := range dr.Strategies {
		checkDrainStrategy(t, dr, s)
	}
	// Three processes each at the full limits: the provider gets up to
	// three times the limit in the first window.
	if pp := dr.Strategies[3]; pp.GlobalViolations == 0 || pp.MaxGlobalInWindow <= dr.ProviderLimit {
		t.Errorf("per-process: %d arrivals over the provider limit, at most %d in a window; want the limit broken",
			pp.GlobalViolations, pp.MaxGlobalInWindow)
	}
	if len(dr.Targets) != 5 {
		t.Errorf("targets %+v, want 5 (the paced one is the slow scenario's)", dr.Targets)
	}
}

// checkDrainStrategy checks strategy s of the drain section dr: every task
// delivered once, sane figures, the processes' counters and the series.
func checkDrainStrategy(t *testing.T, dr *DrainResult, s DrainStrategy) {
	t.Helper()
	where := "drain " + s.Name
	if !s.Drained || s.Delivered != dr.Tasks || s.Received != dr.Tasks || s.Duplicates != 0 {
		t.Errorf("%s: drained %t, %d delivered, %d received; want all %d, once each", where, s.Drained, s.Delivered, s.Received, dr.Tasks)
	}
	if s.DrainSeconds <= 0 || s.Utilization <= 0 || s.FirstDeliverySeconds <= 0 || s.EnqueueSeconds <= 0 {
		t.Errorf("%s: drain %v s, utilization %v, first delivery %v s, enqueue %v s", where, s.DrainSeconds, s.Utilization,
			s.FirstDeliverySeconds, s.EnqueueSeconds)
	}
	if s.Name != "per-process" && s.MarginUtilization > 1 {
		// The limiter admits at most the limit per window plus margin:
		// no drain beats that schedule.
		t.Errorf("%s: drained in %v s, faster than the ideal with margin, %v s", where, s.DrainSeconds, dr.IdealMarginSeconds)
	}
	if !(s.LatenessP50Ms <= s.LatenessP99Ms && s.LatenessP99Ms <= s.LatenessMaxMs) {
		t.Errorf("%s: lateness p50 %v, p99 %v, max %v ms", where, s.LatenessP50Ms, s.LatenessP99Ms, s.LatenessMaxMs)
	}
	if len(s.Processes) != drainProcesses {
		t.Errorf("%s: %d processes reported", where, len(s.Processes))
	}
	for _, p := range s.Processes {
		if p.Missing {
			t.Errorf("%s: process %d wrote no counters", where, p.Process)
		}
	}
	checkDrainCounts(t, dr, s)
	if len(s.Series.Global) < int(dr.IdealSeconds*1000/s.Series.StepMs) || slices.Max(s.Series.Global) != s.MaxGlobalInWindow ||
		len(s.Series.Tenants) != seriesTenants || s.Series.Tenants[0].Tasks != slices.Max(dr.TenantTasks) {
		t.Errorf("%s: series %d samples, peak %d, %d tenants; most in a window %d", where, len(s.Series.Global),
			slices.Max(s.Series.Global), len(s.Series.Tenants), s.MaxGlobalInWindow)
	}
}

// checkDrainCounts checks the joiners of strategy s of dr and what its
// worker processes counted: every task was sent once and the provider
// never failed; every run either sent or returned throttled; every send
// was admitted.
func checkDrainCounts(t *testing.T, dr *DrainResult, s DrainStrategy) {
	t.Helper()
	where := "drain " + s.Name
	if len(s.Joiners) != len(joiners) || s.Joiners[0] == nil {
		t.Errorf("%s: joiners %v: want %d, the first at 5%% of the ideal drain", where, s.Joiners, len(joiners))
	}
	if s.RedisCPUUsPerDelivered <= 0 {
		t.Errorf("%s: Redis CPU per task %v", where, s.RedisCPUUsPerDelivered)
	}
	c := s.DrainCounts
	sends := int64(dr.Tasks)
	for i, j := range s.Joiners {
		if j == nil {
			continue
		}
		sends += int64(joiners[i].tasks)
		if len(j.WaitsMs) != joiners[i].tasks || j.Kind != joiners[i].kind || j.FirstMs != slices.Min(j.WaitsMs) {
			t.Errorf("%s: joiner %d (%s of %d SMS): %+v", where, i, joiners[i].kind, joiners[i].tasks, j)
		}
	}
	if c.Sends != sends || c.SendErrors != 0 || c.Failed != 0 || c.LimiterErrors != 0 ||
		c.Admissions != c.Sends || c.Decisions != c.Admissions+c.Denials || c.Dequeues != c.Sends+c.Throttled {
		t.Errorf("%s: counters %+v", where, c)
	}
	switch s.Name {
	case "naive", "per-process":
		// One limiter call a run, and a denial sends the task back.
		if c.Decisions != c.Dequeues || c.Denials != c.Throttled {
			t.Errorf("%s: %d limiter calls and %d denials for %d runs and %d throttled", where, c.Decisions, c.Denials, c.Dequeues, c.Throttled)
		}
	case "sluice", "sluice-fcfs":
		// A held task asks again in the same run.
		if c.Decisions < c.Dequeues || c.Throttled > c.Denials {
			t.Errorf("%s: %d limiter calls, %d denials for %d runs, %d throttled", where, c.Decisions, c.Denials, c.Dequeues, c.Throttled)
		}
	}
	if got, want := s.DenialsPerDelivered, float64(c.Denials)/float64(dr.Tasks); got != want {
		t.Errorf("%s: %v denials per task, want %v", where, got, want)
	}
}

// newTestRunner returns a runner on the test Redis whose keys are deleted
// when the test ends.
func newTestRunner(t *testing.T, cfg Config) *runner {
	t.Helper()
	url := redistest.URL(t)
	cfg.RedisURL = url
	cfg, err := withDefaults(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{cfg: cfg, rdb: redis.NewClient(opt), prefix: redistest.Prefix(t)}
	t.Cleanup(func() {
		r.cleanup()
		r.rdb.Close()
	})
	return r
}

// TestDrainStopsAtDeadline: a backlog that cannot drain before the
// deadline is stopped there; the worker processes shut down gracefully and
// report, and what was delivered is measured.
func TestDrainStopsAtDeadline(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, Config{DrainConcurrency: 5})
	// Two tenants of one task a minute each, stopped after 2 s: the first
	// task of each is delivered, no more.
	sc := drainScenario{mode: "test", tasks: 20, tenants: 2, seed: 1, tenantLimit: 1, providerLimit: 10, window: time.Minute,
		deadlineSlack: 2 * time.Second}
	plan := newDrainPlan(sc, 0)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := runDrainStrategy(t.Context(), r, plan, drainStrategies[0], exe)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second+drainStopTimeout {
		t.Errorf("took %v: not stopped at the deadline", took)
	}
	if got.Drained || got.Delivered != 2 || got.Utilization != 0 || got.DrainSeconds < 2 {
		t.Errorf("drained %t, %d delivered, utilization %v, %v s; want 2 delivered, stopped after 2 s",
			got.Drained, got.Delivered, got.Utilization, got.DrainSeconds)
	}
	for _, p := range got.Processes {
		if p.Missing {
			t.Errorf("process %d wrote no counters: not a graceful shutdown", p.Process)
		}
	}
	if got.Admissions != 2 || got.Sends != 2 || got.Denials < 1 {
		t.Errorf("counters %+v; want 2 admitted and sent, the rest denied", got.DrainCounts)
	}
	if keys, err := r.rdb.Keys(t.Context(), r.prefix+"*").Result(); err != nil || len(keys) > 0 {
		t.Errorf("keys left behind: %q (%v)", keys, err)
	}
}

// TestDrainWorkerFails: a worker process that cannot run fails the
// strategy at once, with its output.
func TestDrainWorkerFails(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, Config{DrainConcurrency: 5})
	sc := drainScenario{mode: "test", tasks: 5, tenants: 1, seed: 1, tenantLimit: 10, providerLimit: 10, window: time.Second,
		deadlineSlack: time.Minute}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = runDrainStrategy(t.Context(), r, newDrainPlan(sc, 0), drainStrategy{name: "bogus", kind: "no-such-strategy"}, exe)
	if err == nil || !strings.Contains(err.Error(), "exited early") || !strings.Contains(err.Error(), `unknown strategy "no-such-strategy"`) {
		t.Errorf("err = %v, want the process's exit and its message", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %v to notice", took)
	}
}
