package bench

import (
	"strings"
	"testing"
	"time"
)

// testResults are results of a run with fixed figures: at 32 callers Sluice
// makes 27,000 decisions a second, the floor 90,000 and redis_rate 30,000.
func testResults() *Results {
	m := func(perSecond float64) Measurement {
		r := Round{Calls: int64(2 * perSecond), PerSecond: perSecond, AllowedShare: 1, P50: 350, P90: 700, P99: 1500, P999: 4200.4, RedisUsPerCall: 13.94}
		return measurement([]Round{r, r})
	}
	p := Point{
		Callers: 32, Floor: m(90_000), Sluice: m(27_000), RedisRate: m(30_000),
		SluiceOverFloor:     Ratio{Median: 0.3, Min: 0.28, Max: 0.31},
		SluiceOverRedisRate: Ratio{Median: 0.9, Min: 0.9, Max: 0.9},
		RedisRateOverFloor:  Ratio{Median: 0.33, Min: 0.3, Max: 0.35},
	}
	lr := &LimiterResult{Keys: 10_000, Variants: []Variant{{Name: "allow", About: "Every call allowed.", Sluice: "100/1s", RedisRate: "100 req/s (burst 100)", Points: []Point{p}}}}
	lr.Targets = targets(lr)
	return &Results{
		Meta: Meta{
			Date: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), ElapsedSeconds: 300.2, GoVersion: "go1.26.8",
			OS: "linux", Arch: "amd64", CPUs: 2, GOMAXPROCS: 2, RedisVersion: "7.0.15", RedisAddr: "127.0.0.1:7000", OwnRedis: true,
			Settings: Settings{Sections: []string{"limiter", "memory"}, DurationSeconds: 2, WarmupSeconds: 0.25, Repeat: 5,
				Callers: []int{32}, Keys: 10_000, PoolSize: 32, Command: "go run ./cmd/bench --out DIR --duration 2s"},
		},
		Limiter: lr,
		Worker: &WorkerResult{
			Tasks: 20_000, Tenants: 50, Concurrency: 10, TaskCheckIntervalMs: 100, DelayedTaskCheckIntervalMs: 250,
			Policies: workerPolicies,
			Servers: []WorkerServer{{
				Name: "plain", About: "asynq running the handler",
				WorkerMeasurement: WorkerMeasurement{PerSecond: 12_000, RedisCPUUsPerTask: 40.04, RoundTripsPerTask: 3.21, GoCPUUsPerTask: 30.5,
					Commands: []CommandCost{{Command: "evalsha", CallsPerTask: 2.5, UsPerTask: 12.25}},
					Rounds: []WorkerRound{
						{Tasks: 20_000, Seconds: 1.6, PerSecond: 12_500, RedisCPUUsPerTask: 40.04}, {Tasks: 20_000, Seconds: 1.74, PerSecond: 11_500, RedisCPUUsPerTask: 40.04},
					}},
				OverPlain: Ratio{Median: 1, Min: 1, Max: 1}, CPUOverPlain: Ratio{Median: 1, Min: 1, Max: 1},
			}, {
				Name: "sluice", About: "behind the Throttle",
				WorkerMeasurement: WorkerMeasurement{PerSecond: 8_400, RedisCPUUsPerTask: 81.26, RoundTripsPerTask: 5.5, GoCPUUsPerTask: 61,
					Commands: []CommandCost{{Command: "evalsha", CallsPerTask: 3.5, UsPerTask: 40.5}, {Command: "zadd", CallsPerTask: 2, UsPerTask: 3}},
					Rounds: []WorkerRound{
						{Tasks: 20_000, Seconds: 2.35, PerSecond: 8_500, RedisCPUUsPerTask: 81.26}, {Tasks: 20_000, Seconds: 2.41, PerSecond: 8_300, RedisCPUUsPerTask: 81.26},
					}},
				OverPlain: Ratio{Median: 0.7, Min: 0.68, Max: 0.72}, CPUOverPlain: Ratio{Median: 2.03, Min: 2.03, Max: 2.03},
			}},
			Target: TargetWorkerOverPlain, CPUTarget: TargetWorkerCPUOverPlain,
		},
		Memory: &MemoryResult{Rows: []MemoryRow{
			{Units: 10, SluiceBytes: 424, SluiceBytesPerUnit: 42.4, SluiceEncoding: "listpack", RedisRateBytes: 120, SluiceOverRedisRate: 424.0 / 120,
				SlidingWindowBytes: 104, GCRABytes: 96, FixedWindowBytes: 88},
			{Units: 10_000, SluiceBytes: 1_290_832, SluiceBytesPerUnit: 129.0832, SluiceEncoding: "skiplist", RedisRateBytes: 136, SluiceOverRedisRate: 1_290_832.0 / 136,
				SlidingWindowBytes: 112, GCRABytes: 104, FixedWindowBytes: 96},
		}},
	}
}

// checkReportHas fails t for each of wants that md does not contain.
func checkReportHas(t *testing.T, md string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestWriteReport(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	WriteReport(&b, testResults())
	md := b.String()
	checkReportHas(t, md,
		"on 2 CPUs, linux/amd64, GOMAXPROCS 2, go1.26.8; Redis 7.0.15, a redis-server started for the run",
		"in 5m0s",
		"go run ./cmd/bench --out DIR --duration 2s\n",
		"## Limiter: Allow",
		"- sluice/redis_rate decisions per second at 32 callers, allow: 0.90, want at least 1.00: **not met**",
		"- sluice/floor decisions per second at 32 callers, allow: 0.30, want at least 0.85: **not met**",
		"Sluice `100/1s`, redis_rate `100 req/s (burst 100)`: Every call allowed.",
		// Throughputs grouped by thousands; a ratio with its range, and
		// without one when every round agreed.
		"| 32 | 90,000 | 27,000 | 30,000 | 0.30 (0.28–0.31) | 0.90 | 0.33 (0.30–0.35) |",
		"| 32 | sluice | 350 | 700 | 1,500 | 4,200 | 100% | 13.9 |",
		"## Memory per limited key",
		"| 10 | 424 | 42.4 | listpack | 120 | 3.5 | 104 | 96 | 88 |",
		"| 10,000 | 1,290,832 | 129.1 | skiplist | 136 | 9,491 | 112 | 104 | 96 |",
		"## Worker: asynq end to end",
		"completed all 20,000 tasks",
		"for 50 tenants in turn",
		"(Concurrency 10, one queue, TaskCheckInterval 100ms, DelayedTaskCheckInterval 250ms)",
		"- **plain**: asynq running the handler;",
		"sluice/plain tasks a second 0.70, want at least 0.90: **not met**; sluice/plain Redis CPU per task 2.03, want at most 1.30: **not met**",
		"| plain | 12,000 | 11,500 | 12,500 | 2 | 1.00 | 40.0 | 1.00 | 3.21 | 30.5 |",
		"| sluice | 8,400 | 8,300 | 8,500 | 2 | 0.70 (0.68–0.72) | 81.3 | 2.03 | 5.50 | 61.0 |",
		// The dearest under sluice first; a command a server did not run
		// counts zero there.
		"| command | plain calls | µs | sluice calls | µs |",
		"| EVALSHA | 2.50 | 12.25 | 3.50 | 40.50 |\n| ZADD | 0.00 | 0.00 | 2.00 | 3.00 |",
		"```yaml\ntasks:\n  sms:send:\n",
	)
}

// TestWriteReportOthers: with sluice unbatched, the textbook and today's
// script measured, the report gives their throughput, ratios, latency and
// the targets against them.
func TestWriteReportOthers(t *testing.T) {
	t.Parallel()
	res := testResults()
	p := &res.Limiter.Variants[0].Points[0]
	r := Round{Calls: 90_000, PerSecond: 45_000, AllowedShare: 1, P50: 600, P90: 900, P99: 1800, P999: 5000, RedisUsPerCall: 11.96}
	unbatched, textbook, today := measurement([]Round{r, r}), measurement([]Round{r, r}), measurement([]Round{r, r})
	p.SluiceUnbatched, p.Textbook, p.Today = &unbatched, &textbook, &today
	p.SluiceOverUnbatched = Ratio{Median: 1.67, Min: 1.6, Max: 1.7}
	p.SluiceOverToday = Ratio{Median: 0.5, Min: 0.5, Max: 0.5}
	p.TextbookOverRedisRate = Ratio{Median: 1.5, Min: 1.4, Max: 1.6}
	p.SluiceRedisUsOverRedisRate = Ratio{Median: 1.2, Min: 1.1, Max: 1.3}
	p.SluiceP50OverToday = Ratio{Median: 1.05, Min: 1, Max: 1.1}
	res.Limiter.Targets = targets(res.Limiter)
	var b strings.Builder
	WriteReport(&b, res)
	md := b.String()
	checkReportHas(t, md,
		"- sluice/redis_rate decisions per second at 32 callers, allow: 0.90, want at least 1.00: **not met**",
		"- sluice/redis_rate Redis time per decision at 32 callers, allow: 1.20, want at most 1.00: **not met**",
		"- **sluice today**: the decision script of 2026-11-26",
		"| 32 | 90,000 | 27,000 | 30,000 | 0.30 (0.28–0.31) | 0.90 | 0.33 (0.30–0.35) |",
		"| callers | sluice unbatched | textbook | sluice today | sluice/unbatched | sluice/today | textbook/redis_rate |",
		"| 32 | 45,000 | 45,000 | 45,000 | 1.67 (1.60–1.70) | 0.50 | 1.50 (1.40–1.60) |",
		"| 32 | sluice unbatched | 600 | 900 | 1,800 | 5,000 | 100% | 12.0 |",
		"| 32 | sluice today | 600 | 900 | 1,800 | 5,000 | 100% | 12.0 |",
	)
	// The p50 target is at one caller, which this point is not.
	if ts := targets(res.Limiter); len(ts) != 3 {
		t.Errorf("targets = %+v, want 3", ts)
	}
	// Without them, none of their parts in the limiter section.
	b.Reset()
	WriteReport(&b, testResults())
	_, limiter, _ := strings.Cut(b.String(), "## Limiter")
	limiter, _, _ = strings.Cut(limiter, "\n## ")
	if strings.Contains(limiter, "textbook") || strings.Contains(limiter, "today") {
		t.Errorf("limiter section without the other contenders mentions them:\n%s", limiter)
	}
}

func TestWriteReportLine(t *testing.T) {
	t.Parallel()
	res := testResults()
	res.Line = &LineResult{Samples: 50, Tenants: 50, Rules: "the tenant's own 20/1m0s and a shared provider rule of 100/1m0s",
		Target: 2, Rows: []LineRow{
			{Waiting: 10, FairDenyUs: 60, FairAdmitUs: 30, FairDenyOverAdm: 2, FairNewcomerUs: 120, FairNewcomerOverAdm: 4,
				FCFSDenyUs: 200, FCFSAdmitUs: 35, FCFSDenyOverAdm: 200.0 / 35,
				FairDenyCmdUs: 12, FairAdmitCmdUs: 8, FCFSDenyCmdUs: 15, FCFSAdmitCmdUs: 6, FCFSDenyLuaUs: 185, FCFSAdmitLuaUs: 29,
				FairDenyCalls: 16, FairAdmitCalls: 12, FCFSDenyCalls: 15, FCFSAdmitCalls: 12},
			{Waiting: 10_000, FairDenyUs: 61, FairAdmitUs: 30, FairDenyOverAdm: 61.0 / 30, FairNewcomerUs: 121, FairNewcomerOverAdm: 121.0 / 30,
				FCFSDenyUs: 420, FCFSAdmitUs: 37, FCFSDenyOverAdm: 420.0 / 37},
		}}
	var b strings.Builder
	WriteReport(&b, res)
	md := b.String()
	checkReportHas(t, md,
		"## Line: a denial with tasks waiting ahead",
		"the median of 50",
		"A task's rules are the tenant's own 20/1m0s and a shared provider rule of 100/1m0s. The waiting tasks spread over up to 50 tenants",
		"most 2.0× an admission, however many wait: **not met**",
		"| 10 | 60 | 30 | 2.00 | 120 | 4.00 | 200 | 35 | 5.71 |",
		"| 10,000 | 61 | 30 | 2.03 | 121 | 4.03 | 420 | 37 | 11.35 |",
		"in the commands their scripts ran (INFO commandstats of every command but EVALSHA and INFO, the median)",
		"| 10 | 12 | 8 | 1.50 | 15 | 6 | 2.50 | 185 | 29 | 6.38 |",
		"| 10,000 | 0 | 0 | – | 0 | 0 | – | 0 | 0 | – |",
		"The commands each call's script ran (INFO commandstats' calls, the median)",
		"| 10 | 16 | 12 | 15 | 12 |",
	)
}

func TestWriteReportOmitsSectionsNotRun(t *testing.T) {
	t.Parallel()
	res := testResults()
	res.Memory, res.Worker = nil, nil
	var b strings.Builder
	WriteReport(&b, res)
	if md := b.String(); strings.Contains(md, "## Memory") || strings.Contains(md, "## Worker") || !strings.Contains(md, "## Limiter") {
		t.Errorf("report with no memory results:\n%s", md)
	}
}

func TestTargets(t *testing.T) {
	t.Parallel()
	lr := testResults().Limiter
	lr.Variants[0].Points[0].SluiceOverRedisRate.Median = 1.0
	lr.Variants[0].Points[0].SluiceOverFloor.Median = 0.85
	lr.Variants[0].Points[0].SluiceRedisUsOverRedisRate.Median = 1.0
	ts := targets(lr)
	if len(ts) != 3 {
		t.Fatalf("targets = %+v, want 3", ts)
	}
	for _, tg := range ts {
		if !tg.Met {
			t.Errorf("%s: got %v, want %v: not met; a ratio equal to its target meets it", tg.Name, tg.Got, tg.Want)
		}
	}
	// At one caller, with today's script measured: its p50 within 10%
	// meets the target, a hair over does not.
	today := measurement([]Round{{Calls: 1, PerSecond: 1, P50: 100}})
	lr.Variants[0].Points = append(lr.Variants[0].Points, Point{Callers: TargetP50OverTodayCaller, Today: &today,
		SluiceP50OverToday: Ratio{Median: TargetP50OverToday, Min: 1, Max: 1.2}})
	if ts := targets(lr); len(ts) != 4 || !ts[3].Met || !ts[3].AtMost {
		t.Errorf("targets = %+v, want the p50 target met at its bound", ts)
	}
	lr.Variants[0].Points[1].SluiceP50OverToday.Median = TargetP50OverToday + 0.001
	if ts := targets(lr); len(ts) != 4 || ts[3].Met {
		t.Errorf("targets = %+v, want the p50 target not met", ts)
	}
	lr.Variants[0].Points = lr.Variants[0].Points[:1]
	// Without a point at TargetCallers there is nothing to check.
	lr.Variants[0].Points[0].Callers = 8
	if ts := targets(lr); len(ts) != 0 {
		t.Errorf("targets without %d callers = %+v, want none", TargetCallers, ts)
	}
}

func TestFormats(t *testing.T) {
	t.Parallel()
	cases := []struct{ got, want string }{
		{thousands(0), "0"},
		{thousands(999.4), "999"},
		{thousands(999.5), "1,000"},
		{thousands(1234567), "1,234,567"},
		{thousands(-1234), "-1,234"},
		{percent(1), "100%"},
		{percent(0), "0%"},
		{percent(0.9951), "99.5%"},
		{ratio(Ratio{Median: 0.876, Min: 0.8, Max: 0.9}), "0.88 (0.80–0.90)"},
		{ratio(Ratio{Median: 1, Min: 1, Max: 1}), "1.00"},
		{times(3.53), "3.5"},
		{times(9491.4), "9,491"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
