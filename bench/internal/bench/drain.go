package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
)

// DefaultDrainConcurrency is the asynq Concurrency of each worker process
// of the drain section unless Config.DrainConcurrency says otherwise:
// cmd/worker's default, as the strategies are compared as a deployment
// runs them. With the provider on loopback, 3 × 10 slots keep up with 200
// sends a second; the strategy sluice-c100 shows Sluice with ten times as
// many.
const DefaultDrainConcurrency = 10

// drainProcesses is how many worker processes drain the backlog.
const drainProcesses = 3

// drainShutdownTimeout is the asynq ShutdownTimeout of the worker
// processes, and stopTimeout how long the harness waits for one to exit
// after SIGTERM before it kills it.
const (
	drainShutdownTimeout = 10 * time.Second
	drainStopTimeout     = drainShutdownTimeout + 10*time.Second
)

// Targets of the issue for the drain, checked on the sluice strategy.
const (
	TargetDrainViolations     = 0    // arrivals over a limit, every rule
	TargetDrainUtilization    = 0.95 // least ideal drain time over actual
	TargetDrainPaced          = 0.97 // least paced ideal drain time over actual, slow-provider scenario: the best that keeps the newcomer bound (FAIRNESS.md)
	TargetDrainDenialsPerTask = 1.0  // most limiter denials per delivered task
	TargetDrainJain           = 0.95 // least Jain's index among backlogged tenants, stretches of 5 windows
	TargetDrainShare          = 0.10 // most deviation of a tenant's sends from its weighted share over 10 windows
	// and a p99 lateness of at most one window
)

// DrainResult is the drain section: a backlog of SMS tasks for many tenants,
// under a quota per tenant and a limit for the provider, drained by worker
// processes through a recording provider, once per strategy.
type DrainResult struct {
	Mode        string  `json:"mode"` // "full" (the default), "short" (Config.DrainShort), "slow" (Config.DrainSlow) or "weighted" (Config.DrainWeighted)
	Tasks       int     `json:"tasks"`
	Tenants     int     `json:"tenants"`
	TenantTasks []int   `json:"tenant_tasks"` // tasks of tenant-00, tenant-01, ...: ∝ 1/(i+1)^Skew
	Skew        float64 `json:"skew"`
	Seed        uint64  `json:"seed"` // of the shuffled enqueue order

	TenantLimit   int     `json:"tenant_limit"`   // per tenant per window
	ProviderLimit int     `json:"provider_limit"` // all tenants per window
	WindowSeconds float64 `json:"window_seconds"` // of both rules
	LatencyMs     float64 `json:"latency_ms"`     // the provider's time to answer each request
	MarginMs      float64 `json:"margin_ms"`      // what sluice and naive add to the windows (the policies' default)

	Processes   int `json:"processes"`   // worker processes, started together
	Concurrency int `json:"concurrency"` // asynq Concurrency of each, but where a strategy says otherwise

	// The asynq intervals of every worker process, ms: cmd/worker's
	// defaults.
	TaskCheckIntervalMs        float64 `json:"task_check_interval_ms"`
	DelayedTaskCheckIntervalMs float64 `json:"delayed_task_check_interval_ms"`

	// Policies is the policies file of sluice and naive, YAML.
	Policies string `json:"policies"`

	// IdealSeconds is the ideal drain time: the last slot of the ideal
	// schedule, from the start. IdealMarginSeconds is the same with the
	// margin added to the windows, as sluice and naive enforce them: the
	// best they can do. DeadlineSeconds is when a strategy is stopped,
	// delivered or not.
	IdealSeconds       float64 `json:"ideal_seconds"`
	IdealMarginSeconds float64 `json:"ideal_margin_seconds"`
	// IdealPacedSeconds is IdealMarginSeconds with the provider's
	// admissions paced, as the fair lines give them once a backlog waits:
	// a slot interval apart after its first full window. A paced drain
	// ends about one window later than a bursty one.
	IdealPacedSeconds float64 `json:"ideal_paced_seconds"`
	DeadlineSeconds   float64 `json:"deadline_seconds"`

	Strategies []DrainStrategy `json:"strategies"`

	// Targets are the goals of the issue, checked on the sluice strategy.
	Targets []DrainTarget `json:"targets"`
}

// DrainStrategy is one strategy's drain. Times are from the start: the
// moment the first worker process was started, every task enqueued.
type DrainStrategy struct {
	Name        string `json:"name"`
	About       string `json:"about"`
	Concurrency int    `json:"concurrency"` // asynq Concurrency of each worker process

	Drained    bool `json:"drained"`    // every task delivered before the deadline
	Delivered  int  `json:"delivered"`  // distinct tasks that reached the provider
	Received   int  `json:"received"`   // requests the provider accepted, duplicates included
	Duplicates int  `json:"duplicates"` // Received - Delivered

	EnqueueSeconds       float64 `json:"enqueue_seconds"`        // enqueueing the backlog, before the start
	FirstDeliverySeconds float64 `json:"first_delivery_seconds"` // the first arrival
	// DrainSeconds is the time to the last delivery when Drained, else to
	// the deadline.
	DrainSeconds float64 `json:"drain_seconds"`
	// Utilization is IdealSeconds over DrainSeconds when Drained, else 0.
	Utilization float64 `json:"utilization"`

	// Arrivals over a limit as the provider counted them, with the limits
	// as written (no margin): an arrival is over when the window ending
	// with it holds more than the limit (see arrivals.OverLimit). Tenant
	// figures add up every tenant's.
	GlobalViolations  int `json:"global_violations"`
	TenantViolations  int `json:"tenant_violations"`
	TenantsViolated   int `json:"tenants_violated"`     // tenants with any
	MaxGlobalInWindow int `json:"max_global_in_window"` // most arrivals in one window, all tenants
	MaxTenantInWindow int `json:"max_tenant_in_window"` // most of one tenant in one window

	// Lateness of each delivery against the ideal schedule, ms: a tenant's
	// k-th delivery against its k-th ideal slot. Negative is ahead.
	LatenessP50Ms float64 `json:"lateness_p50_ms"`
	LatenessP99Ms float64 `json:"lateness_p99_ms"`
	LatenessMaxMs float64 `json:"lateness_max_ms"`

	// The same against the ideal schedule with the margin: what is lost
	// to anything but the margin. MarginUtilization is
	// IdealMarginSeconds over DrainSeconds when Drained, else 0.
	MarginUtilization float64 `json:"margin_utilization"`
	// PacedUtilization is IdealPacedSeconds over DrainSeconds when Drained.
	PacedUtilization    float64 `json:"paced_utilization"`
	MarginLatenessP50Ms float64 `json:"margin_lateness_p50_ms"`
	MarginLatenessP99Ms float64 `json:"margin_lateness_p99_ms"`

	// The worker processes' counters added up; see DrainProcess.
	DrainCounts

	DenialsPerDelivered float64 `json:"denials_per_delivered"`
	// RedisCPUUsPerDelivered is the CPU time the Redis process used from
	// the workers' start to the last delivery (or the deadline), user and
	// system, over the tasks delivered, µs: every strategy's Redis work
	// for a task, the queue's and the limiter's, and the joiners'.
	RedisCPUUsPerDelivered float64 `json:"redis_cpu_us_per_delivered"`
	DequeuesPerDelivered   float64 `json:"dequeues_per_delivered"`

	// Jain is the least Jain's index of the sends of the tenants that stay
	// backlogged, over stretches of 5 windows (see jainStretch).
	Jain JainResult `json:"jain"`

	// Shares are each tenant's sends over 10 windows against its weighted
	// share (see shareWindows); nil in a scenario without weights.
	Shares *ShareResult `json:"shares,omitempty"`

	// Joiners are the joiners' waits (see joiners), in their order; nil
	// for one that the drain ended before.
	Joiners []*JoinResult `json:"joiners"`

	// Processes holds each worker process's own counters.
	Processes []DrainProcess `json:"processes"`

	// Series is what the plots draw.
	Series DrainSeries `json:"series"`
}

// DrainCounts are what worker processes count.
type DrainCounts struct {
	// Dequeues counts handler runs: tasks asynq gave the handler, each
	// run of a task that comes back counted again. It is provider
	// successes plus runs that returned an error (asynq's ErrorHandler).
	Dequeues int64 `json:"dequeues"`

	// Limiter calls: Redis calls for sluice (every call of its Throttle:
	// a task held for its place in line asks again) and naive, the local
	// token buckets for per-process. A call is a denial, an early return
	// (sluice: a task back from the retry set before its place, told the
	// time left; it changes nothing), an admission or an error.
	Decisions     int64 `json:"decisions"`
	Denials       int64 `json:"denials"`
	Early         int64 `json:"early"`
	Admissions    int64 `json:"admissions"`
	LimiterErrors int64 `json:"limiter_errors"`

	Sends      int64 `json:"sends"`       // provider calls
	SendErrors int64 `json:"send_errors"` // that failed
	Throttled  int64 `json:"throttled"`   // runs sent back to the retry set by throttling
	Failed     int64 `json:"failed"`      // runs that returned another error
}

// add adds o to c.
func (c *DrainCounts) add(o DrainCounts) {
	c.Dequeues += o.Dequeues
	c.Decisions += o.Decisions
	c.Denials += o.Denials
	c.Early += o.Early
	c.Admissions += o.Admissions
	c.LimiterErrors += o.LimiterErrors
	c.Sends += o.Sends
	c.SendErrors += o.SendErrors
	c.Throttled += o.Throttled
	c.Failed += o.Failed
}

// DrainProcess is what one worker process counted, written when it shut
// down.
type DrainProcess struct {
	Process int `json:"process"` // 0, 1, 2
	DrainCounts
	// Missing says the process wrote no counters (it was killed): the
	// strategy's sums leave it out.
	Missing bool `json:"missing,omitempty"`
}

// DrainSeries is what the drain plots draw: for each span of StepMs from
// the start, the most arrivals at the provider in any window of WindowMs
// ending within it (see windowPeaks), the count a rule holds to its limit.
type DrainSeries struct {
	StepMs   float64        `json:"step_ms"`
	WindowMs float64        `json:"window_ms"`
	Global   []int          `json:"global"`  // all tenants
	Tenants  []TenantSeries `json:"tenants"` // the largest tenants
}

// TenantSeries is one tenant's samples.
type TenantSeries struct {
	Tenant string `json:"tenant"`
	Tasks  int    `json:"tasks"`
	Counts []int  `json:"counts"`
}

// DrainTarget is one goal of the issue against what the sluice strategy
// did.
type DrainTarget struct {
	Name   string  `json:"name"`    // "violations", "utilization", "denials_per_delivered", "p99_lateness_ms"
	Want   float64 `json:"want"`    // the bound
	AtMost bool    `json:"at_most"` // Want is a ceiling; else a floor
	Got    float64 `json:"got"`
	Met    bool    `json:"met"`
}

// drainStrategy is a way of draining: what the worker processes run.
type drainStrategy struct {
	name  string // unique in a run: names its queue and keys
	kind  string // what the worker processes run: "sluice", "sluice-fcfs", "naive" or "per-process"
	about string

	// concurrency is the asynq Concurrency of each worker process; zero
	// means Config.DrainConcurrency.
	concurrency int

	// fullOnly leaves the strategy out of the short scenario.
	fullOnly bool
}

// drainStrategies run in this order, each on a fresh queue and fresh
// limiter keys.
var drainStrategies = []drainStrategy{{
	name: "sluice", kind: "sluice",
	about: "`worker.NewServer` as `cmd/worker` configures it by default, with the fair lines " +
		"(docs/FAIRNESS.md): a task that cannot go at once waits parked in the retry set, in its tenant's line; " +
		"slots of the provider rule are given among the waiting tenants by start-time fair queueing, at most a " +
		"learned lead (150 ms or more) ahead, and a task given one is moved to the front of its queue.",
}, {
	name: "sluice-fcfs", kind: "sluice-fcfs",
	about: "`worker.NewServer` with `--fairness off`, first come, first served: the Throttle middleware asks " +
		"`AllowInLine` for both rules (windows plus the default margin); a denied task takes a place in line " +
		"and waits for it in the worker when it is within MaxHold (2 s), else goes back through the retry set " +
		"timed to return shortly before it.",
}, {
	name: "naive", kind: "naive",
	about: "the same asynq server and rules, with a middleware that calls `AllowMulti` and, when denied, " +
		"returns `&provider.ThrottledError{RetryAfter: md.RetryAfter}`: the task comes back when the oldest entry " +
		"leaves the window, rounded up to a whole second by `worker.RetryDelay`, together with every other task " +
		"denied meanwhile.",
}, {
	name: "per-process", kind: "per-process",
	about: "asynq's documented rate-limiting pattern (wiki page \"Rate Limiting\"): each process has its own " +
		"`golang.org/x/time/rate` token buckets, one per tenant at the tenant quota and one at the provider " +
		"limit, each at the full limit (rate limit/window, burst limit), no margin; a denied task returns " +
		"an error with `RetryIn` = `rand.Intn(10)` seconds, `IsFailure` false and a `RetryDelayFunc` that uses it.",
}, {
	name: "sluice-c100", kind: "sluice", concurrency: 100, fullOnly: true,
	about: "sluice again with asynq Concurrency 100 in each process, ten times `cmd/worker`'s default, as a " +
		"deployment whose provider calls take long needs to keep up: more tasks in the workers at once, each " +
		"denied one taking a place in line.",
}}

// runDrain drains the scenario's backlog with each strategy in turn.
func runDrain(ctx context.Context, r *runner, res *Results) error {
	sc := drainFull
	switch {
	case r.cfg.DrainShort:
		sc = drainShort
	case r.cfg.DrainSlow:
		sc = drainSlow
	case r.cfg.DrainWeighted:
		sc = drainWeighted
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("the harness's own executable, to run workers: %w", err)
	}
	parsed, err := policies.Parse("drain", []byte(sc.policies()))
	if err != nil {
		return err
	}
	rules := parsed.Rules(producer.TypeSMS)
	margin := rules[0].MarginFor(rules[0].Policy) // both rules have the same window
	plan := newDrainPlan(sc, margin)
	dr := &DrainResult{
		Mode: sc.mode, Tasks: sc.tasks, Tenants: sc.tenants, TenantTasks: plan.tenantTasks, Skew: sc.skew, Seed: sc.seed,
		TenantLimit: sc.tenantLimit, ProviderLimit: sc.providerLimit, WindowSeconds: sc.window.Seconds(),
		LatencyMs:                  float64(sc.latency) / float64(time.Millisecond),
		MarginMs:                   float64(margin) / float64(time.Millisecond),
		Processes:                  drainProcesses,
		Concurrency:                r.cfg.DrainConcurrency,
		TaskCheckIntervalMs:        float64(workerFetchInterval) / float64(time.Millisecond),
		DelayedTaskCheckIntervalMs: float64(workerDelayedInterval) / float64(time.Millisecond),
		Policies:                   sc.policies(),
		IdealSeconds:               plan.ideal.drain.Seconds(),
		IdealMarginSeconds:         plan.withMargin.drain.Seconds(),
		IdealPacedSeconds:          plan.paced.drain.Seconds(),
		DeadlineSeconds:            plan.deadline().Seconds(),
	}
	r.logf("drain %s: %d tasks, %d tenants (largest %d), limits %d/tenant and %d in all per %v; ideal drain %.2f s (%.2f s with the margin), deadline %.0f s",
		sc.mode, sc.tasks, sc.tenants, plan.tenantTasks[0], sc.tenantLimit, sc.providerLimit, sc.window, dr.IdealSeconds, dr.IdealMarginSeconds, dr.DeadlineSeconds)
	for _, st := range drainStrategies {
		if st.fullOnly && sc.mode == "short" {
			continue
		}
		got, err := runDrainStrategy(ctx, r, plan, st, exe)
		if err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
		r.logf("drain %-11s %5d/%d delivered in %6.2f s (utilization %.3f); over limits: %d global, %d tenant (max %d, %d); "+
			"%.2f denials and %.2f dequeues a task; lateness p50 %.0f ms p99 %.0f ms",
			st.name, got.Delivered, sc.tasks, got.DrainSeconds, got.Utilization, got.GlobalViolations, got.TenantViolations,
			got.MaxGlobalInWindow, got.MaxTenantInWindow, got.DenialsPerDelivered, got.DequeuesPerDelivered, got.LatenessP50Ms, got.LatenessP99Ms)
		dr.Strategies = append(dr.Strategies, got)
	}
	dr.Targets = drainTargets(&dr.Strategies[0], sc.window, r.cfg.DrainSlow)
	res.Drain = dr
	return nil
}

// drainTargets checks the goals of the issues against s; paced adds the
// fair service's target against the paced ideal, which it sets for the
// slow-provider scenario (where the tenants' backlogs are equal, so that
// max-min shares do not lengthen the ideal).
func drainTargets(s *DrainStrategy, window time.Duration, paced bool) []DrainTarget {
	violations := float64(s.GlobalViolations + s.TenantViolations)
	windowMs := float64(window) / float64(time.Millisecond)
	targets := []DrainTarget{
		{Name: "violations", Want: TargetDrainViolations, AtMost: true, Got: violations, Met: violations <= TargetDrainViolations},
		{Name: "utilization", Want: TargetDrainUtilization, Got: s.Utilization, Met: s.Drained && s.Utilization >= TargetDrainUtilization},
		{Name: "denials_per_delivered", Want: TargetDrainDenialsPerTask, AtMost: true, Got: s.DenialsPerDelivered,
			Met: s.Drained && s.DenialsPerDelivered <= TargetDrainDenialsPerTask},
		{Name: "jain_min", Want: TargetDrainJain, Got: s.Jain.Min, Met: s.Drained && s.Jain.Min >= TargetDrainJain},
	}
	if paced {
		targets = append(targets, DrainTarget{Name: "paced_utilization", Want: TargetDrainPaced, Got: s.PacedUtilization,
			Met: s.Drained && s.PacedUtilization >= TargetDrainPaced})
	}
	if s.Shares != nil {
		targets = append(targets, DrainTarget{Name: "share_deviation", Want: TargetDrainShare, AtMost: true, Got: s.Shares.MaxDeviation,
			Met: s.Drained && s.Shares.MaxDeviation <= TargetDrainShare})
	}
	return append(targets, DrainTarget{Name: "p99_lateness_ms", Want: windowMs, AtMost: true, Got: s.LatenessP99Ms,
		Met: s.Drained && s.LatenessP99Ms <= windowMs})
}

// runDrainStrategy enqueues the plan's backlog on a queue of its own,
// starts a recording provider and the worker processes, waits until every
// task has reached the provider or the deadline passed, stops the
// processes, and measures what the provider saw. Its queue and limiter
// keys are deleted when it returns.
func runDrainStrategy(ctx context.Context, r *runner, plan *drainPlan, st drainStrategy, exe string) (DrainStrategy, error) {
	if st.concurrency == 0 {
		st.concurrency = r.cfg.DrainConcurrency
	}
	queue := r.prefix + "drain-" + st.name
	limiterPrefix := limiterPrefixOf(queue)
	defer func() {
		// With a context of its own: the keys go even after an
		// interruption.
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = deleteQueue(dctx, r.rdb, queue)
		_ = unlinkMatching(dctx, r.rdb, limiterPrefix+"*")
	}()
	enqueued := time.Now()
	if err := enqueueBacklog(ctx, r.rdb, queue, plan); err != nil {
		return DrainStrategy{}, err
	}
	enqueueTime := time.Since(enqueued)

	provider := sink.New(plan.sc.window, slog.New(slog.DiscardHandler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return DrainStrategy{}, fmt.Errorf("provider: %w", err)
	}
	hs := &http.Server{Handler: slowly(provider.Handler(), plan.sc.latency), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()

	dir, err := os.MkdirTemp("", "sluice-bench-drain-")
	if err != nil {
		return DrainStrategy{}, err
	}
	defer os.RemoveAll(dir)

	cpu, err := redisCPU(ctx, r.rdb)
	if err != nil {
		return DrainStrategy{}, err
	}
	start := time.Now()
	procs := make([]*drainProc, drainProcesses)
	defer func() {
		for _, p := range procs {
			p.kill() // those still running after an error
		}
	}()
	base := drainWorkerSpec{
		Strategy:    st.kind,
		RedisURL:    r.cfg.RedisURL,
		Queue:       queue,
		Prefix:      limiterPrefix,
		ProviderURL: "http://" + ln.Addr().String() + "/sms",
		Concurrency: st.concurrency,
		Policies:    plan.sc.policies(),
	}
	if err := startDrainProcs(procs, exe, base, dir); err != nil {
		return DrainStrategy{}, err
	}
	joined, err := awaitDrain(ctx, r, plan, st, procs, provider, start, queue)
	if err != nil {
		return DrainStrategy{}, err
	}
	receipts := provider.Receipts()
	stopped := time.Since(start)
	cpuAfter, err := redisCPU(ctx, r.rdb)
	if err != nil {
		return DrainStrategy{}, err
	}

	got := DrainStrategy{Name: st.name, About: st.about, Concurrency: st.concurrency, EnqueueSeconds: enqueueTime.Seconds()}
	got.collect(r, procs)
	got.setDelivery(plan, drainDelivery(plan, start, receipts), stopped)
	if got.Delivered > 0 {
		got.RedisCPUUsPerDelivered = (cpuAfter - cpu) / float64(got.Delivered)
	}
	got.setJoiners(start, joined, receipts)
	return got, nil
}

// setJoiners measures each joiner enqueued at joined[i] (zero: it was
// not) in receipts.
func (got *DrainStrategy) setJoiners(start time.Time, joined []time.Time, receipts []sink.Receipt) {
	got.Joiners = make([]*JoinResult, len(joiners))
	for i, j := range joiners {
		if !joined[i].IsZero() {
			got.Joiners[i] = j.result(start, joined[i], receipts)
		}
	}
}

// startDrainProcs starts one worker process per slot of procs, each from
// base with its own process number and counters file in dir. On an error
// the processes started so far stay in procs, for the caller to kill.
func startDrainProcs(procs []*drainProc, exe string, base drainWorkerSpec, dir string) error {
	for i := range procs {
		spec := base
		spec.Process = i
		spec.Counters = filepath.Join(dir, fmt.Sprintf("counters-%d.json", i))
		var err error
		if procs[i], err = startDrainProc(exe, spec); err != nil {
			return err
		}
	}
	return nil
}

// awaitDrain waits until provider has received every task of the plan
// once, and the joiners', or the plan's deadline from start has passed,
// logging progress every 10 s. It enqueues each joiner's tasks on queue
// when their time comes, and returns when it did (zero if it did not), in
// the order of joiners. It fails when ctx ends or a worker process exits
// early.
func awaitDrain(ctx context.Context, r *runner, plan *drainPlan, st drainStrategy, procs []*drainProc, provider *sink.Sink,
	start time.Time, queue string) (joined []time.Time, err error) {
	joined = make([]time.Time, len(joiners))
	deadline := start.Add(plan.deadline())
	want := plan.sc.tasks
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
	for {
		select {
		case <-ctx.Done():
			return joined, ctx.Err()
		case now := <-poll.C:
			for i, j := range joiners {
				if joined[i].IsZero() && now.Sub(start) >= j.at(plan) && provider.Unique() < want {
					if joined[i], err = j.enqueue(ctx, r.rdb, plan, queue, limiterPrefixOf(queue)); err != nil {
						return joined, err
					}
					want += j.tasks
				}
			}
			if provider.Unique() >= want || now.After(deadline) {
				return joined, nil
			}
			for _, p := range procs {
				if p.exited() {
					return joined, fmt.Errorf("worker process %d exited early: %v; its output ends:\n%s", p.spec.Process, p.err, p.output.String())
				}
			}
		case now := <-progress.C:
			r.logf("drain %-11s %5d/%d delivered after %3.0f s", st.name, provider.Unique(), plan.sc.tasks, now.Sub(start).Seconds())
		}
	}
}

// collect stops the worker processes, all at once, waits for them, and
// adds up their counters into got. A process whose counters cannot be
// read is marked Missing and logged.
func (got *DrainStrategy) collect(r *runner, procs []*drainProc) {
	// All at once, so that none goes on working while another stops.
	for _, p := range procs {
		p.terminate()
	}
	for _, p := range procs {
		p.await()
	}
	for _, p := range procs {
		pc := DrainProcess{Process: p.spec.Process}
		c, err := p.counters()
		if err != nil {
			pc.Missing = true
			r.logf("drain %s: worker process %d: %v", got.Name, p.spec.Process, err)
		} else {
			pc.DrainCounts = c
			got.add(c)
		}
		got.Processes = append(got.Processes, pc)
	}
}

// setDelivery fills in got what the provider saw, d, measured against
// the plan; stopped is how long the run took when it did not drain.
// It needs got's counters first, for the rates per delivered task.
func (got *DrainStrategy) setDelivery(plan *drainPlan, d delivery, stopped time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	got.Drained = d.drained
	got.Delivered, got.Received, got.Duplicates = d.delivered, d.received, d.received-d.delivered
	got.FirstDeliverySeconds = d.first.Seconds()
	got.DrainSeconds = stopped.Seconds()
	if d.drained {
		got.DrainSeconds = d.last.Seconds()
		got.Utilization = plan.ideal.drain.Seconds() / d.last.Seconds()
		got.MarginUtilization = plan.withMargin.drain.Seconds() / d.last.Seconds()
		got.PacedUtilization = plan.paced.drain.Seconds() / d.last.Seconds()
	}
	got.GlobalViolations, got.TenantViolations, got.TenantsViolated = d.globalOver, d.tenantOver, d.tenantsOver
	got.MaxGlobalInWindow, got.MaxTenantInWindow = d.maxGlobal, d.maxTenant
	got.Jain, got.Shares = d.jain, d.shares
	got.LatenessP50Ms, got.LatenessP99Ms, got.LatenessMaxMs = ms(d.lateness.p50), ms(d.lateness.p99), ms(d.lateness.max)
	got.MarginLatenessP50Ms, got.MarginLatenessP99Ms = ms(d.marginLateness.p50), ms(d.marginLateness.p99)
	if d.delivered > 0 {
		got.DenialsPerDelivered = float64(got.Denials) / float64(d.delivered)
		got.DequeuesPerDelivered = float64(got.Dequeues) / float64(d.delivered)
	}
	got.Series = d.series
}

// slowly returns h answering each request d after h has handled it (h
// records the arrival at once): a provider that takes d to answer.
func slowly(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		time.Sleep(d)
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// limiterPrefixOf is the prefix of the limiter's keys of a drain on queue.
func limiterPrefixOf(queue string) string { return queue + ":" }

// enqueueBacklog enqueues the plan's tasks on queue one after another, in
// the plan's order, so that asynq hands them out in that order.
func enqueueBacklog(ctx context.Context, rdb *redis.Client, queue string, plan *drainPlan) error {
	pc := producer.NewClientFromRedisClient(rdb)
	defer pc.Close()
	for i, t := range plan.order {
		task, err := producer.NewSMSTask(plan.tenantNames[t], producer.SMS{To: fmt.Sprintf("+1555%07d", i), Body: "Your code is 1234"})
		if err != nil {
			return err
		}
		if _, err := pc.Enqueue(ctx, task, asynq.Queue(queue), asynq.TaskID(taskID(i))); err != nil {
			return fmt.Errorf("enqueue task %d: %w", i, err)
		}
	}
	return nil
}

// drainWorkerEnv is the environment variable that makes the harness's
// executable a drain worker (see RunWorkerIfChild); it holds the
// drainWorkerSpec as JSON.
const drainWorkerEnv = "SLUICE_BENCH_DRAIN_WORKER"

// drainWorkerSpec is what a worker process is told by the harness.
type drainWorkerSpec struct {
	Strategy    string `json:"strategy"`
	Process     int    `json:"process"`
	RedisURL    string `json:"redis_url"`
	Queue       string `json:"queue"`
	Prefix      string `json:"prefix"` // of the limiter's keys
	ProviderURL string `json:"provider_url"`
	Concurrency int    `json:"concurrency"`
	Policies    string `json:"policies"` // YAML
	Counters    string `json:"counters"` // the file to write its DrainCounts to, as JSON, at exit
}

// errNoCounters is returned by drainProc.counters when the process wrote
// none.
var errNoCounters = errors.New("no counters written")

// decodeCounters reads the counters file a worker process wrote.
func decodeCounters(path string) (DrainCounts, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return DrainCounts{}, errNoCounters
	}
	if err != nil {
		return DrainCounts{}, err
	}
	var c DrainCounts
	if err := json.Unmarshal(data, &c); err != nil {
		return DrainCounts{}, fmt.Errorf("counters %s: %w", path, err)
	}
	return c, nil
}
