package bench

import (
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// testDrain is a drain section with fixed figures: sluice drained 10,000
// tasks in 52 s within every limit, per-process broke them.
func testDrain() *DrainResult {
	series := func(peak int) DrainSeries {
		return DrainSeries{StepMs: 100, WindowMs: 1000, Global: []int{0, peak, peak, 150, 0},
			Tenants: []TenantSeries{{Tenant: "tenant-00", Tasks: 784, Counts: []int{0, 20, 20, 20, 0}}}}
	}
	dr := &DrainResult{
		Mode: "full", Tasks: 10_000, Tenants: 50, TenantTasks: []int{784, 555, 111}, Skew: 0.5, Seed: 1,
		TenantLimit: 20, ProviderLimit: 200, WindowSeconds: 1, MarginMs: 50, Processes: 3, Concurrency: 100,
		TaskCheckIntervalMs: 100, DelayedTaskCheckIntervalMs: 250, Policies: drainFull.policies(),
		IdealSeconds: 49, IdealMarginSeconds: 51.45, IdealPacedSeconds: 51.9, DeadlineSeconds: 226,
		Strategies: []DrainStrategy{{
			Name: "sluice", About: "the Throttle.", Drained: true, Delivered: 10_000, Received: 10_000,
			FirstDeliverySeconds: 0.05, EnqueueSeconds: 1.5, DrainSeconds: 52, Utilization: 49.0 / 52, MarginUtilization: 51.45 / 52, PacedUtilization: 51.9 / 52,
			MaxGlobalInWindow: 200, MaxTenantInWindow: 20, LatenessP50Ms: 1200.4, LatenessP99Ms: 2600, LatenessMaxMs: 3100,
			MarginLatenessP50Ms: 150, MarginLatenessP99Ms: 480,
			DrainCounts:         DrainCounts{Dequeues: 15_000, Decisions: 20_000, Denials: 8_000, Early: 2_000, Admissions: 10_000, Sends: 10_000, Throttled: 5_000},
			DenialsPerDelivered: 0.8, DequeuesPerDelivered: 1.5, RedisCPUUsPerDelivered: 95.4,
			Processes: []DrainProcess{{Process: 0}, {Process: 1}, {Process: 2}},
			Series:    series(200),
		}, {
			Name: "per-process", About: "the pattern.", Drained: false, Delivered: 9_000, Received: 9_002, Duplicates: 2,
			DrainSeconds: 226, GlobalViolations: 3_000, TenantViolations: 1_200, TenantsViolated: 40,
			MaxGlobalInWindow: 1_600, MaxTenantInWindow: 61, LatenessP50Ms: -900,
			Processes: []DrainProcess{{Process: 0}, {Process: 1, Missing: true}, {Process: 2}},
			Series:    series(600),
		}},
	}
	dr.Targets = drainTargets(&dr.Strategies[0], time.Second, false)
	return dr
}

func TestReportDrain(t *testing.T) {
	t.Parallel()
	res := &Results{Meta: Meta{Settings: Settings{Command: "go run ./cmd/bench --out DIR --only drain"}}, Drain: testDrain()}
	var b strings.Builder
	WriteReport(&b, res)
	md := b.String()
	checkReportHas(t, md,
		"## Drain: a backlog through 3 worker processes",
		"10,000 `sms:send` tasks for 50 tenants",
		"(the largest 784, the smallest 111)",
		"each an asynq server with Concurrency 100 unless the strategy says otherwise, TaskCheckInterval 100ms and DelayedTaskCheckInterval 250ms",
		"```yaml\ntasks:\n  sms:send:\n    - name: tenant\n",
		"add the policies' default margin, 50ms",
		"- **sluice**: the Throttle.",
		"- **per-process**: the pattern. The pattern: "+asynqRateLimitingPattern,
		"it drains in **49.00 s**, the *ideal drain time* (51.45 s with the margin",
		"A strategy is stopped at 226 s",
		"- arrivals over a limit: 0, want at most 0: **met**",
		"- utilization: 0.942, want at least 0.95: **not met**",
		"- limiter denials per delivered task: 0.80, want at most 1.0: **met**",
		"- p99 lateness: 2,600 ms, want at most 1,000 ms (one window): **not met**",
		"| sluice | 10,000 of 10,000 | 0 | 52.00 | 0.942 (0.989; paced 0.998) | 0 | 0 (0) | 200 of 200, 20 of 20 | 0.80 | 1.50 | 1,200 (150) | 2,600 (480) | 3,100 |",
		"| per-process | 9,000 of 10,000 | 2 | stopped at 226 | not drained | 3,000 | 1,200 (40) | 1,600 of 200, 61 of 20 |",
		"| sluice | 15,000 | 20,000 | 8,000 | 2,000 | 10,000 | 0 | 10,000 | 5,000 | 0 | 95 | 0.05 | 1.50 |",
		"| per-process (without process 1: no counters) |",
		"for each 100ms of the drain, the most arrivals at the provider in any window of 1s",
		"(drain-sluice.png)",
		"(drain-strategies.png)",
	)
	if strings.Contains(md, "short scenario") {
		t.Error("the full scenario's report calls itself short")
	}
	res.Drain.Mode = "short"
	b.Reset()
	WriteReport(&b, res)
	if !strings.Contains(b.String(), "**The short scenario** (`--drain-short`)") {
		t.Errorf("the short scenario's report does not say so:\n%s", b.String())
	}
}

// TestWriteFilesPlots: WriteFiles writes every plot the report links, as
// PNG images, and the report links nothing else.
func TestWriteFilesPlots(t *testing.T) {
	t.Parallel()
	res := testResults()
	res.Drain = testDrain()
	// A contender only some points have, as a field added to Point would
	// be: plotted where it is measured.
	batched := measurement([]Round{{Calls: 10, PerSecond: 50_000}})
	res.Limiter.Variants[0].Points[0].Textbook = &batched
	dir := t.TempDir()
	if err := WriteFiles(dir, res); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	var linked []string
	for _, m := range regexp.MustCompile(`!\[[^]]+\]\(([^)]+)\)`).FindAllStringSubmatch(string(md), -1) {
		linked = append(linked, m[1])
	}
	want := []string{"limiter-allow.png", "drain-sluice.png", "drain-strategies.png"}
	if !slices.Equal(linked, want) {
		t.Errorf("REPORT.md links %q, want %q", linked, want)
	}
	for _, name := range want {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 300 {
			t.Errorf("%s is %v", name, b)
		}
	}
}

func TestPointMeasurements(t *testing.T) {
	t.Parallel()
	m := func(perSecond float64) Measurement { return measurement([]Round{{Calls: 1, PerSecond: perSecond}}) }
	p := Point{Callers: 8, Floor: m(3), Sluice: m(1), RedisRate: m(2)}
	var names []string
	for _, nm := range pointMeasurements(p) {
		names = append(names, nm.name)
	}
	if want := []string{"floor", "sluice", "redis_rate"}; !slices.Equal(names, want) {
		t.Errorf("contenders %q, want %q: nil and unmeasured ones left out", names, want)
	}
	b := m(4)
	p.Textbook = &b
	p.Floor = Measurement{} // not measured
	names = nil
	for _, nm := range pointMeasurements(p) {
		names = append(names, nm.name)
	}
	if want := []string{"sluice", "redis_rate", "textbook"}; !slices.Equal(names, want) {
		t.Errorf("contenders %q, want %q", names, want)
	}
}

// TestReportJoiners: the joiners' table gives each kind's waits (a
// newcomer's first SMS, every urgent SMS), their median, p90 and worst,
// how many were over the bound (window ÷ limit + fetch + 100 ms: 205 ms
// here), the most backlog ahead, and the joiners that did not come.
func TestReportJoiners(t *testing.T) {
	t.Parallel()
	dr := testDrain()
	s := &dr.Strategies[0]
	s.Joiners = make([]*JoinResult, len(joiners))
	for i, j := range joiners {
		switch {
		case i == len(joiners)-1:
			// The last urgent SMS did not come: the drain had ended.
		case j.kind == "newcomer":
			first := float64(10 * (i + 1)) // 10, 30, 50, ... 190
			s.Joiners[i] = &JoinResult{Kind: j.kind, WaitsMs: []float64{first + 300, first, first + 600}, FirstMs: first, BacklogAhead: i}
		default:
			ms := 100 + float64(20*i) // 120, 160, ... 440 for the 9 that came
			s.Joiners[i] = &JoinResult{Kind: j.kind, WaitsMs: []float64{ms}, FirstMs: ms, BacklogAhead: 1}
		}
	}
	var b strings.Builder
	reportJoiners(&b, dr)
	for _, want := range []string{
		"| strategy | joiner | waits | median ms | p90 ms | worst ms | over 205 ms | backlog ahead, most | not come |",
		"| sluice | newcomer | 10 | 100 | 170 | 190 | 0 | 18 | 0 |",
		"| sluice | urgent | 9 | 280 | 440 | 440 | 6 | 1 | 1 |",
		"| per-process | newcomer | 0 | | | | | | 10 |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}
