package bench

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/throttle"
)

// Defaults of Config.
const (
	DefaultDuration = 2 * time.Second
	DefaultWarmup   = 250 * time.Millisecond
	DefaultRepeat   = 5
	DefaultKeys     = 10_000
)

// DefaultCallers are the numbers of concurrent callers the limiter section
// measures unless Config.Callers says otherwise.
var DefaultCallers = []int{1, 8, 32, 128}

// DefaultMemoryUnits are the numbers of units per key the memory section
// measures unless Config.MemoryUnits says otherwise.
var DefaultMemoryUnits = []int{10, 100, 1000, 10_000}

// Config is what a run measures and how. Zero fields take their defaults.
type Config struct {
	// RedisURL names the Redis to measure, a single node: redis:// or
	// rediss://. Required. The harness writes keys under a fresh prefix and
	// deletes them at the end.
	RedisURL string

	// OwnRedis records, for the report, that the Redis was started for this
	// run (by redisproc.Start) rather than given.
	OwnRedis bool

	// Duration is how long each measurement counts calls, after its warm-up;
	// zero means DefaultDuration.
	Duration time.Duration

	// Warmup is how long each measurement runs before it counts; zero means
	// DefaultWarmup.
	Warmup time.Duration

	// Repeat is how many times each measurement is made; reports give the
	// median. Zero means DefaultRepeat.
	Repeat int

	// Callers are the numbers of concurrent callers of the limiter section;
	// nil means DefaultCallers. The client's pool holds as many connections
	// as the largest.
	Callers []int

	// Keys is how many keys the limiter section spreads its calls over,
	// picked at random for every call; zero means DefaultKeys.
	Keys int

	// MemoryUnits are the numbers of units per key of the memory section; nil
	// means DefaultMemoryUnits.
	MemoryUnits []int

	// LineWaiting are the numbers of tasks waiting ahead at which the line
	// section measures a denial; nil means DefaultLineWaiting.
	LineWaiting []int

	// WorkerTasks is how many tasks each round of the worker section runs;
	// zero means DefaultWorkerTasks.
	WorkerTasks int

	// WorkerConcurrency is asynq's Config.Concurrency of both servers of
	// the worker section; zero means DefaultWorkerConcurrency.
	WorkerConcurrency int

	// WorkerProfile, when set, is the file the worker section writes a Go
	// CPU profile of its rounds to (runtime/pprof), every contender's: read
	// it with go tool pprof, focused on a package or function.
	WorkerProfile string

	// DrainShort runs the drain section's short scenario (600 tasks, 10
	// tenants, about 6 s a strategy, for tests and CI) instead of the full
	// one (10,000 tasks, 50 tenants, about 50 s a strategy).
	DrainShort bool

	// DrainSlow runs the drain section's slow-provider scenario instead:
	// 1,200 tasks of 20 tenants with equal backlogs, a provider that
	// answers each request after 250 ms (fair service's utilization
	// target, docs/FAIRNESS.md).
	DrainSlow bool

	// DrainWeighted runs the drain section's scenario of unequal weights
	// instead: 1,440 tasks of 4 tenants with equal backlogs, weighted 3,
	// 1, 1 and 1 in the policies file, whose sends over 10 windows should
	// each be within 10% of its weighted share (docs/FAIRNESS.md).
	DrainWeighted bool

	// DrainConcurrency is asynq's Config.Concurrency of each worker process
	// of the drain section; zero means DefaultDrainConcurrency.
	DrainConcurrency int

	// Sections names the sections to run, in any order (they run in the
	// order of Sections); nil runs them all.
	Sections []string

	// Log, when set, receives a line for every measurement as it ends.
	Log io.Writer
}

// section is one part of a run: run measures and fills its field of
// Results; report writes its part of REPORT.md and nothing when that field
// is nil.
type section struct {
	name   string
	run    func(ctx context.Context, r *runner, res *Results) error
	report func(w io.Writer, res *Results)
}

// sections are the sections in the order they run and are reported.
var sections = []section{
	{"limiter", runLimiter, func(w io.Writer, res *Results) { reportLimiter(w, res); reportLimiterPlots(w, res) }},
	{"line", runLine, reportLine},
	{"memory", runMemory, reportMemory},
	{"accuracy", runAccuracy, reportAccuracy},
	{"worker", runWorker, reportWorker},
	{"drain", runDrain, reportDrain},
}

// Sections returns the names of the sections, in the order they run.
func Sections() []string {
	names := make([]string, len(sections))
	for i, s := range sections {
		names[i] = s.name
	}
	return names
}

// Results is everything a run measured: the content of results.json. A
// section that did not run is nil.
type Results struct {
	Meta     Meta            `json:"meta"`
	Limiter  *LimiterResult  `json:"limiter,omitempty"`
	Line     *LineResult     `json:"line,omitempty"`
	Memory   *MemoryResult   `json:"memory,omitempty"`
	Accuracy *AccuracyResult `json:"accuracy,omitempty"`
	Worker   *WorkerResult   `json:"worker,omitempty"`
	Drain    *DrainResult    `json:"drain,omitempty"`
}

// Meta says where and how the results were measured.
type Meta struct {
	Date           time.Time `json:"date"`            // start of the run, UTC
	ElapsedSeconds float64   `json:"elapsed_seconds"` // length of the run
	GoVersion      string    `json:"go_version"`
	OS             string    `json:"os"`
	Arch           string    `json:"arch"`
	CPUs           int       `json:"cpus"`       // runtime.NumCPU
	GOMAXPROCS     int       `json:"gomaxprocs"` // of the harness
	CPUModel       string    `json:"cpu_model,omitempty"`
	RedisVersion   string    `json:"redis_version"`
	RedisAddr      string    `json:"redis_addr"`
	OwnRedis       bool      `json:"own_redis"`  // started for this run on loopback
	KeyPrefix      string    `json:"key_prefix"` // of every key the run wrote and deleted
	Settings       Settings  `json:"settings"`
}

// Settings are the settings of a run, defaults filled in.
type Settings struct {
	Sections          []string `json:"sections"`
	DurationSeconds   float64  `json:"duration_seconds"` // per measurement
	WarmupSeconds     float64  `json:"warmup_seconds"`   // per measurement
	Repeat            int      `json:"repeat"`
	Callers           []int    `json:"callers"`
	Keys              int      `json:"keys"`
	MemoryUnits       []int    `json:"memory_units"`
	LineWaiting       []int    `json:"line_waiting"`
	WorkerTasks       int      `json:"worker_tasks"`       // per round of the worker section
	WorkerConcurrency int      `json:"worker_concurrency"` // asynq Concurrency of the worker section
	DrainShort        bool     `json:"drain_short"`        // the drain section's short scenario
	DrainSlow         bool     `json:"drain_slow"`         // the drain section's slow-provider scenario
	DrainWeighted     bool     `json:"drain_weighted"`     // the drain section's scenario of unequal weights
	DrainConcurrency  int      `json:"drain_concurrency"`  // asynq Concurrency of each worker process of the drain section
	PoolSize          int      `json:"pool_size"`          // go-redis PoolSize of the limiter section, shared by its contenders
	Command           string   `json:"command"`            // the command that reruns these settings
}

// runner is the state shared by the sections of one run.
type runner struct {
	cfg    Config
	rdb    *redis.Client
	prefix string        // every key written starts with it
	today  *redis.Script // the contender "sluice today", nil when left out
}

// logf writes a progress line to cfg.Log, if set.
func (r *runner) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, format+"\n", args...)
	}
}

// Validate reports whether cfg can run, but for RedisURL, which Run checks
// as it connects: an error names the first bad field.
func (cfg Config) Validate() error {
	_, err := withDefaults(cfg)
	return err
}

// withDefaults returns cfg with its zero fields set to their defaults, or an
// error naming the first bad field.
func withDefaults(cfg Config) (Config, error) {
	if cfg.Duration < 0 || cfg.Warmup < 0 || cfg.Repeat < 0 || cfg.Keys < 0 || cfg.WorkerTasks < 0 || cfg.WorkerConcurrency < 0 || cfg.DrainConcurrency < 0 {
		return cfg, errors.New("bench: negative duration, warm-up, repeat, keys, worker tasks, worker concurrency or drain concurrency")
	}
	if b2i(cfg.DrainShort)+b2i(cfg.DrainSlow)+b2i(cfg.DrainWeighted) > 1 {
		return cfg, errors.New("bench: the drain's short, slow-provider and weighted scenarios are three: choose one")
	}
	cfg.Duration = cmp.Or(cfg.Duration, DefaultDuration)
	cfg.Warmup = cmp.Or(cfg.Warmup, DefaultWarmup)
	cfg.Repeat = cmp.Or(cfg.Repeat, DefaultRepeat)
	cfg.Keys = cmp.Or(cfg.Keys, DefaultKeys)
	cfg.WorkerTasks = cmp.Or(cfg.WorkerTasks, DefaultWorkerTasks)
	cfg.WorkerConcurrency = cmp.Or(cfg.WorkerConcurrency, DefaultWorkerConcurrency)
	cfg.DrainConcurrency = cmp.Or(cfg.DrainConcurrency, DefaultDrainConcurrency)
	if cfg.Callers == nil {
		cfg.Callers = DefaultCallers
	}
	if cfg.MemoryUnits == nil {
		cfg.MemoryUnits = DefaultMemoryUnits
	}
	if cfg.LineWaiting == nil {
		cfg.LineWaiting = DefaultLineWaiting
	}
	if len(cfg.Callers) == 0 || len(cfg.MemoryUnits) == 0 || len(cfg.LineWaiting) == 0 {
		return cfg, errors.New("bench: no numbers of callers, of units per key or of tasks waiting")
	}
	for _, n := range cfg.LineWaiting {
		if n < 1 {
			return cfg, fmt.Errorf("bench: %d tasks waiting: need at least 1", n)
		}
	}
	for _, n := range cfg.Callers {
		if n < 1 {
			return cfg, fmt.Errorf("bench: %d callers: need at least 1", n)
		}
	}
	for _, n := range cfg.MemoryUnits {
		if n < 1 || n > throttle.MaxLimit {
			return cfg, fmt.Errorf("bench: %d units per key: need 1 to throttle.MaxLimit, %d", n, throttle.MaxLimit)
		}
	}
	if cfg.Sections == nil {
		cfg.Sections = Sections()
	}
	for _, s := range cfg.Sections {
		if !slices.Contains(Sections(), s) {
			return cfg, fmt.Errorf("bench: unknown section %q: use %s", s, strings.Join(Sections(), ", "))
		}
	}
	if len(cfg.Sections) == 0 {
		return cfg, errors.New("bench: no section to run")
	}
	// In the order they run, once each.
	var names []string
	for _, s := range Sections() {
		if slices.Contains(cfg.Sections, s) {
			names = append(names, s)
		}
	}
	cfg.Sections = names
	return cfg, nil
}

// Run measures the sections of cfg and returns their results. It fails on
// the first Redis error, or when ctx ends.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.RedisURL == "" {
		return nil, errors.New("bench: no Redis URL")
	}
	opt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("bench: Redis URL: %w", err)
	}
	// One client for every contender, with a connection for every caller:
	// the default pool (10 per GOMAXPROCS) would make callers queue for
	// connections in the client rather than in Redis.
	opt.PoolSize = slices.Max(cfg.Callers)
	rdb := redis.NewClient(opt)
	defer rdb.Close()

	b := make([]byte, 4)
	_, _ = rand.Read(b)
	r := &runner{cfg: cfg, rdb: rdb, prefix: "sluice-bench-" + hex.EncodeToString(b) + ":"}

	start := time.Now()
	res := &Results{Meta: Meta{
		Date:       start.UTC().Truncate(time.Second),
		GoVersion:  runtime.Version(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		CPUs:       runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		CPUModel:   cpuModel(),
		RedisAddr:  opt.Addr,
		OwnRedis:   cfg.OwnRedis,
		KeyPrefix:  r.prefix,
		Settings: Settings{
			Sections:          cfg.Sections,
			DurationSeconds:   cfg.Duration.Seconds(),
			WarmupSeconds:     cfg.Warmup.Seconds(),
			Repeat:            cfg.Repeat,
			Callers:           cfg.Callers,
			Keys:              cfg.Keys,
			MemoryUnits:       cfg.MemoryUnits,
			LineWaiting:       cfg.LineWaiting,
			WorkerTasks:       cfg.WorkerTasks,
			WorkerConcurrency: cfg.WorkerConcurrency,
			DrainShort:        cfg.DrainShort,
			DrainSlow:         cfg.DrainSlow,
			DrainWeighted:     cfg.DrainWeighted,
			DrainConcurrency:  cfg.DrainConcurrency,
			PoolSize:          opt.PoolSize,
			Command:           command(cfg),
		},
	}}
	if res.Meta.RedisVersion, err = redisVersion(ctx, rdb); err != nil {
		return nil, fmt.Errorf("bench: Redis at %s: %w", opt.Addr, err)
	}
	defer r.cleanup()

	for _, s := range sections {
		if !slices.Contains(cfg.Sections, s.name) {
			continue
		}
		if err := s.run(ctx, r, res); err != nil {
			return nil, fmt.Errorf("bench: %s: %w", s.name, err)
		}
	}
	res.Meta.ElapsedSeconds = time.Since(start).Seconds()
	return res, nil
}

// cleanup deletes every key the run wrote, and the names of the asynq
// queues it made, with a context of its own so that it also runs after an
// interruption.
func (r *runner) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, pattern := range []string{r.prefix + "*", redisRatePrefix + r.prefix + "*", asynqQueuePattern(r.prefix + "*")} {
		_ = unlinkMatching(ctx, r.rdb, pattern)
	}
	if queues, err := r.rdb.SMembers(ctx, asynqQueues).Result(); err == nil {
		for _, q := range queues {
			if strings.HasPrefix(q, r.prefix) {
				r.rdb.SRem(ctx, asynqQueues, q)
			}
		}
	}
}

// command returns the command line that reruns cfg's settings.
func command(cfg Config) string {
	var b strings.Builder
	b.WriteString("go run ./cmd/bench")
	if !cfg.OwnRedis {
		b.WriteString(" --redis URL")
	}
	fmt.Fprintf(&b, " --out DIR --duration %v --warmup %v --repeat %d", cfg.Duration, cfg.Warmup, cfg.Repeat)
	if slices.Contains(cfg.Sections, "worker") {
		fmt.Fprintf(&b, " --worker-tasks %d --worker-concurrency %d", cfg.WorkerTasks, cfg.WorkerConcurrency)
	}
	if slices.Contains(cfg.Sections, "drain") {
		if cfg.DrainShort {
			b.WriteString(" --drain-short")
		}
		if cfg.DrainSlow {
			b.WriteString(" --drain-slow")
		}
		if cfg.DrainWeighted {
			b.WriteString(" --drain-weighted")
		}
		fmt.Fprintf(&b, " --drain-concurrency %d", cfg.DrainConcurrency)
	}
	fmt.Fprintf(&b, " --only %s", strings.Join(cfg.Sections, ","))
	return b.String()
}

// redisVersion returns the redis_version field of INFO server.
func redisVersion(ctx context.Context, rdb *redis.Client) (string, error) {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "unknown", nil
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or "" where
// there is none.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// WriteFiles writes res to dir, creating it if needed: results.json,
// REPORT.md and the PNG plots that REPORT.md embeds.
func WriteFiles(dir string, res *Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encode results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	var md strings.Builder
	WriteReport(&md, res)
	if err := os.WriteFile(filepath.Join(dir, "REPORT.md"), []byte(md.String()), 0o644); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return writePlots(dir, res)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
