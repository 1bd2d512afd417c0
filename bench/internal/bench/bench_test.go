package bench

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/redistest"
)

func TestMain(m *testing.M) {
	RunWorkerIfChild() // the drain section's worker processes are this test binary
	os.Exit(redistest.Main(m))
}

// TestRunSmoke runs every section against a real Redis with tiny durations,
// writes the files, and checks that results.json holds every section with
// sane figures and that the run left no keys behind. The Redis is its own,
// as the bench's is: the sections read INFO commandstats, which another
// test's commands would add to.
func TestRunSmoke(t *testing.T) {
	t.Parallel()
	url := redistest.Own(t)
	cfg := Config{
		RedisURL:    url,
		Duration:    50 * time.Millisecond,
		Warmup:      20 * time.Millisecond,
		Repeat:      2,
		Callers:     []int{1, TargetCallers},
		Keys:        2000,
		MemoryUnits: []int{10, 1000},
		LineWaiting: []int{10, 100},
		WorkerTasks: 200,
		DrainShort:  true,
	}
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteFiles(dir, res); err != nil {
		t.Fatal(err)
	}

	got := readResultsJSON(t, dir)
	m := got.Meta
	checkSmokeMeta(t, m)

	checkLimiter(t, got.Limiter, cfg)
	checkMemory(t, got.Memory, cfg)
	if a := got.Accuracy; a == nil || len(a.Patterns) != len(accuracyPatterns()) || len(a.Patterns[0].Rows) != 4 {
		t.Errorf("accuracy results = %+v", a)
	}
	checkLine(t, got.Line, cfg)
	checkWorker(t, got.Worker, cfg)
	checkDrain(t, got.Drain)

	md, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Limiter: Allow", "### allow", "### deny", "## Line: a denial with tasks waiting ahead", "## Memory per limited key", "## Accuracy of the constant-memory algorithms", "## Worker: asynq end to end", "## Drain: a backlog", "go run ./cmd/bench"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("REPORT.md lacks %q", want)
		}
	}

	checkNoKeysLeft(t, url, m.KeyPrefix)
}

// readResultsJSON reads the results.json written in dir, and fails t
// unless it holds meta and every section.
func readResultsJSON(t *testing.T, dir string) Results {
	t.Helper()
	js, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(js, &raw); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	for _, name := range append([]string{"meta"}, Sections()...) {
		if v, ok := raw[name]; !ok || string(v) == "null" {
			t.Errorf("results.json has no section %q", name)
		}
	}
	var got Results
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	return got
}

// checkSmokeMeta checks the meta of TestRunSmoke's results: the versions,
// the date and TestRunSmoke's settings.
func checkSmokeMeta(t *testing.T, m Meta) {
	t.Helper()
	if m.GoVersion == "" || m.RedisVersion == "" || m.RedisVersion == "unknown" || m.CPUs < 1 || m.GOMAXPROCS < 1 {
		t.Errorf("meta = %+v", m)
	}
	if d := time.Since(m.Date); d < 0 || d > time.Hour {
		t.Errorf("meta date %v is not the run's", m.Date)
	}
	if s := m.Settings; s.Repeat != 2 || s.Keys != 2000 || s.PoolSize != TargetCallers || !slices.Equal(s.Sections, Sections()) ||
		s.DurationSeconds != 0.05 || !strings.Contains(s.Command, "--duration 50ms") ||
		s.WorkerTasks != 200 || s.WorkerConcurrency != DefaultWorkerConcurrency || !strings.Contains(s.Command, "--worker-tasks 200") ||
		!s.DrainShort || s.DrainConcurrency != DefaultDrainConcurrency || !strings.Contains(s.Command, "--drain-short --drain-concurrency 10") {
		t.Errorf("settings = %+v", s)
	}
}

// checkNoKeysLeft checks that the Redis at url holds no key and no asynq
// queue under keyPrefix, the run's.
func checkNoKeysLeft(t *testing.T, url, keyPrefix string) {
	t.Helper()
	opt, _ := redis.ParseURL(url)
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	if !strings.HasPrefix(keyPrefix, "sluice-bench-") {
		t.Fatalf("key prefix %q", keyPrefix)
	}
	for _, pattern := range []string{keyPrefix + "*", redisRatePrefix + keyPrefix + "*", asynqQueuePattern(keyPrefix + "*")} {
		if keys, err := rdb.Keys(t.Context(), pattern).Result(); err != nil || len(keys) > 0 {
			t.Errorf("keys left behind matching %s: %d (%v)", pattern, len(keys), err)
		}
	}
	queues, err := rdb.SMembers(t.Context(), asynqQueues).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if strings.HasPrefix(q, keyPrefix) {
			t.Errorf("asynq queue %q left in %s", q, asynqQueues)
		}
	}
}

func checkLimiter(t *testing.T, lr *LimiterResult, cfg Config) {
	t.Helper()
	if lr == nil {
		t.Fatal("no limiter results")
	}
	if got, want := len(lr.Variants), 2; got != want {
		t.Fatalf("%d variants, want %d", got, want)
	}
	for _, v := range lr.Variants {
		if len(v.Points) != len(cfg.Callers) {
			t.Errorf("%s: %d points, want %d", v.Name, len(v.Points), len(cfg.Callers))
			continue
		}
		for i, p := range v.Points {
			if p.Callers != cfg.Callers[i] {
				t.Errorf("%s: point %d has %d callers, want %d", v.Name, i, p.Callers, cfg.Callers[i])
			}
			measured := pointMeasurements(p)
			var names []string
			for _, c := range measured {
				names = append(names, c.name)
			}
			want := []string{"floor", "sluice", "redis_rate", "sluice_unbatched", "textbook"}
			if _, err := todayScript(t.Context()); err == nil {
				want = append(want, "today") // left out only without its commit
			}
			if !slices.Equal(names, want) {
				t.Fatalf("%s at %d: contenders %v, want %v", v.Name, p.Callers, names, want)
			}
			for _, c := range measured {
				where := v.Name + " " + c.name + " at " + strconv.Itoa(p.Callers)
				if len(c.m.Rounds) != cfg.Repeat {
					t.Errorf("%s: %d rounds, want %d", where, len(c.m.Rounds), cfg.Repeat)
				}
				r := c.m.Median
				if r.Calls < 1 || r.PerSecond <= 0 {
					t.Errorf("%s: %d calls, %v a second", where, r.Calls, r.PerSecond)
				}
				if !(0 < r.P50 && r.P50 <= r.P90 && r.P90 <= r.P99 && r.P99 <= r.P999) || r.P999 > 10e6 {
					t.Errorf("%s: percentiles out of order or absurd: %+v", where, r)
				}
				if r.RedisUsPerCall < 0 {
					t.Errorf("%s: Redis µs per call %v", where, r.RedisUsPerCall)
				}
				wantAllowed := 1.0
				if v.Name == "deny" && c.name != "floor" {
					wantAllowed = 0
				}
				if r.AllowedShare != wantAllowed {
					t.Errorf("%s: allowed share %v, want %v", where, r.AllowedShare, wantAllowed)
				}
			}
			ratios := map[string]Ratio{"sluice/floor": p.SluiceOverFloor, "sluice/redis_rate": p.SluiceOverRedisRate, "redis_rate/floor": p.RedisRateOverFloor,
				"sluice/unbatched": p.SluiceOverUnbatched, "sluice/today": p.SluiceOverToday, "textbook/redis_rate": p.TextbookOverRedisRate,
				"sluice p50/today": p.SluiceP50OverToday}
			if v.Name == "allow" { // a denial records nothing: Redis time ratios of the allowing variant only
				ratios["sluice Redis µs/redis_rate"] = p.SluiceRedisUsOverRedisRate
			}
			for name, r := range ratios {
				if !(0 < r.Min && r.Min <= r.Median && r.Median <= r.Max) {
					t.Errorf("%s %s at %d: ratio %+v", v.Name, name, p.Callers, r)
				}
			}
		}
	}
	// Throughput, Redis time and p50 (the run has TargetCallers and
	// TargetP50OverTodayCaller callers).
	if len(lr.Targets) != 4 {
		t.Errorf("targets = %+v, want 4", lr.Targets)
	}
}

func checkLine(t *testing.T, lr *LineResult, cfg Config) {
	t.Helper()
	if lr == nil {
		t.Fatal("no line results")
	}
	if lr.Samples != lineSamples || lr.Tenants != lineTenants || lr.Target != TargetLineDenyOverAdmit || len(lr.Rows) != len(cfg.LineWaiting) {
		t.Fatalf("line results %+v", lr)
	}
	met := true
	for i, r := range lr.Rows {
		// Every call runs a script: none costs Redis nothing.
		if r.Waiting != cfg.LineWaiting[i] || r.FairDenyUs <= 0 || r.FairAdmitUs <= 0 || r.FCFSDenyUs <= 0 || r.FCFSAdmitUs <= 0 ||
			r.FairNewcomerUs <= 0 || r.FairNewcomerOverAdm != r.FairNewcomerUs/r.FairAdmitUs ||
			r.FairDenyOverAdm != r.FairDenyUs/r.FairAdmitUs || r.FCFSDenyOverAdm != r.FCFSDenyUs/r.FCFSAdmitUs {
			t.Errorf("row %d: %+v", i, r)
		}
		// Every script runs commands, within its own time.
		for _, c := range []struct {
			name            string
			commands, total float64
		}{
			{"fair denial", r.FairDenyCmdUs, r.FairDenyUs},
			{"fair admission", r.FairAdmitCmdUs, r.FairAdmitUs},
			{"fcfs denial", r.FCFSDenyCmdUs, r.FCFSDenyUs},
			{"fcfs admission", r.FCFSAdmitCmdUs, r.FCFSAdmitUs},
		} {
			if c.commands <= 0 || c.commands > c.total {
				t.Errorf("row %d, %s: commands %v µs of %v µs in all", i, c.name, c.commands, c.total)
			}
		}
		// A denial runs more commands than an admission, in both lines.
		if r.FairDenyCalls <= r.FairAdmitCalls || r.FairAdmitCalls < 1 || r.FCFSDenyCalls <= r.FCFSAdmitCalls || r.FCFSAdmitCalls < 1 {
			t.Errorf("row %d: commands a call: fair %v against %v, fcfs %v against %v", i,
				r.FairDenyCalls, r.FairAdmitCalls, r.FCFSDenyCalls, r.FCFSAdmitCalls)
		}
		// And the Lua around them takes time of its own.
		if r.FCFSDenyLuaUs <= 0 || r.FCFSDenyLuaUs >= r.FCFSDenyUs || r.FCFSAdmitLuaUs <= 0 || r.FCFSAdmitLuaUs >= r.FCFSAdmitUs {
			t.Errorf("row %d: the script's own time %v µs of %v (denial), %v of %v (admission)", i,
				r.FCFSDenyLuaUs, r.FCFSDenyUs, r.FCFSAdmitLuaUs, r.FCFSAdmitUs)
		}
		met = met && r.FairDenyOverAdm <= lr.Target && r.FCFSDenyOverAdm <= lr.Target
	}
	if lr.TargetMet != met {
		t.Errorf("target met %v, want %v: %+v", lr.TargetMet, met, lr.Rows)
	}
}

func checkMemory(t *testing.T, mr *MemoryResult, cfg Config) {
	t.Helper()
	if mr == nil {
		t.Fatal("no memory results")
	}
	if len(mr.Rows) != len(cfg.MemoryUnits) {
		t.Fatalf("%d memory rows, want %d", len(mr.Rows), len(cfg.MemoryUnits))
	}
	small, large := mr.Rows[0], mr.Rows[1]
	// Redis packs small sorted sets (listpack) and turns them into a
	// skiplist past 128 members.
	if small.SluiceEncoding != "listpack" && small.SluiceEncoding != "ziplist" || large.SluiceEncoding != "skiplist" {
		t.Errorf("encodings %q and %q, want listpack (or ziplist) then skiplist", small.SluiceEncoding, large.SluiceEncoding)
	}
	// A skiplist member costs tens of bytes at least; a GCRA key is one
	// small string whatever the count.
	if large.SluiceBytes < 20*int64(large.Units) || large.SluiceBytes <= small.SluiceBytes {
		t.Errorf("sluice bytes: %d for %d units, %d for %d", small.SluiceBytes, small.Units, large.SluiceBytes, large.Units)
	}
	for _, r := range mr.Rows {
		if r.RedisRateBytes <= 0 || r.RedisRateBytes > 300 {
			t.Errorf("redis_rate key of %d units: %d bytes", r.Units, r.RedisRateBytes)
		}
		if r.SluiceOverRedisRate <= 1 {
			t.Errorf("%d units: sluice/redis_rate %v", r.Units, r.SluiceOverRedisRate)
		}
		// A counter key is a hash of a few integers, whatever the count.
		for alg, n := range map[string]int64{"sliding-window": r.SlidingWindowBytes, "gcra": r.GCRABytes, "fixed-window": r.FixedWindowBytes} {
			if n <= 0 || n > 200 {
				t.Errorf("%s key of %d units: %d bytes, want at most 200", alg, r.Units, n)
			}
		}
	}
	if d := large.GCRABytes - small.GCRABytes; d < -16 || d > 16 {
		t.Errorf("gcra key: %d bytes for %d units, %d for %d: it grows with the count", small.GCRABytes, small.Units, large.GCRABytes, large.Units)
	}
}

func checkWorker(t *testing.T, wr *WorkerResult, cfg Config) {
	t.Helper()
	if wr == nil {
		t.Fatal("no worker results")
	}
	if wr.Tasks != cfg.WorkerTasks || wr.Concurrency != DefaultWorkerConcurrency || wr.Tenants != workerTenants ||
		wr.TaskCheckIntervalMs != 100 || wr.DelayedTaskCheckIntervalMs != 250 || !strings.Contains(wr.Policies, "sms:send") {
		t.Errorf("worker settings: %+v", wr)
	}
	var names []string
	for _, c := range wr.Servers {
		names = append(names, c.Name)
		if len(c.Rounds) != cfg.Repeat {
			t.Errorf("%s: %d rounds, want %d", c.Name, len(c.Rounds), cfg.Repeat)
		}
		for i, r := range c.Rounds {
			// Tasks over Seconds, and not absurd: a task costs at least
			// a round trip or two to Redis.
			if r.Tasks != cfg.WorkerTasks || r.Seconds <= 0 || r.PerSecond <= 0 || r.PerSecond > 1e6 ||
				math.Abs(r.PerSecond*r.Seconds-float64(r.Tasks)) > 1e-6*float64(r.Tasks) || r.EnqueueSeconds <= 0 || r.RedisCPUUsPerTask < 0 ||
				r.RoundTripsPerTask < 1 {
				t.Errorf("%s round %d: %+v", c.Name, i+1, r)
			}
		}
		if c.PerSecond <= 0 || c.PerSecond != median(workerPerSecond(c.Rounds)) {
			t.Errorf("%s: median %v of rounds %+v", c.Name, c.PerSecond, c.Rounds)
		}
		if r := c.OverPlain; !(0 < r.Min && r.Min <= r.Median && r.Median <= r.Max) {
			t.Errorf("%s/plain: %+v", c.Name, r)
		}
		// Every server runs asynq's scripts; every one but plain runs one
		// of its own a task, at least.
		evalsha := 0.0
		for _, cc := range c.Commands {
			if cc.Command == "evalsha" {
				evalsha = cc.CallsPerTask
			}
		}
		if want := 1.0; c.Name != "plain" && evalsha < want+1 {
			t.Errorf("%s: %v EVALSHA a task, want asynq's and at least one more: %+v", c.Name, evalsha, c.Commands)
		} else if evalsha < want {
			t.Errorf("%s: %v EVALSHA a task, want asynq's: %+v", c.Name, evalsha, c.Commands)
		}
	}
	if want := []string{"plain", "floor", "textbook", "sluice", "sluice fcfs"}; !slices.Equal(names, want) {
		t.Errorf("servers %v, want %v", names, want)
	}
	s := wr.server("sluice")
	if s == nil {
		t.Fatal("no sluice server")
	}
	if wr.Target != TargetWorkerOverPlain || wr.TargetMet != (s.OverPlain.Median >= TargetWorkerOverPlain) {
		t.Errorf("target %v, met %v, with sluice/plain %v", wr.Target, wr.TargetMet, s.OverPlain.Median)
	}
	floor := wr.server("textbook")
	var perRound []float64
	for i := range s.Rounds {
		perRound = append(perRound, s.Rounds[i].RedisCPUUsPerTask/floor.Rounds[i].RedisCPUUsPerTask)
	}
	overFloor := median(perRound)
	met := s.CPUOverPlain.Median <= TargetWorkerCPUOverPlain ||
		(floor.CPUOverPlain.Median > TargetWorkerCPUOverPlain && overFloor <= TargetWorkerCPUOverFloor)
	if wr.CPUTarget != TargetWorkerCPUOverPlain || wr.FloorTarget != TargetWorkerCPUOverFloor || wr.CPUTargetMet != met {
		t.Errorf("CPU target %v (floor %v), met %v, with sluice/plain %v and textbook/plain %v", wr.CPUTarget, wr.FloorTarget,
			wr.CPUTargetMet, s.CPUOverPlain.Median, floor.CPUOverPlain.Median)
	}
	if math.Abs(wr.CPUOverFloor.Median-overFloor) > 1e-9 {
		t.Errorf("sluice/textbook CPU %v, want %v", wr.CPUOverFloor.Median, overFloor)
	}
}

func TestParseCPU(t *testing.T) {
	t.Parallel()
	info := "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:9.000000\r\n" +
		"used_cpu_user_children:9.000000\r\nused_cpu_sys_main_thread:1.400000\r\n"
	if got, want := parseCPU(info), 3.75e6; math.Abs(got-want) > 1e-3 {
		t.Errorf("parseCPU = %v µs, want %v: the process's own, not its children's or a thread's", got, want)
	}
}
