package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
)

// Defaults of the worker section.
const (
	DefaultWorkerTasks       = 20_000 // tasks per round
	DefaultWorkerConcurrency = 10     // worker.Config's default
)

// Targets of the worker section, on sluice against plain. The issue puts a
// floor under the CPU target: when the textbook server (plain, one round
// trip more and the fewest commands an exact log of the task's rules
// needs) costs Redis more than TargetWorkerCPUOverPlain, sluice is to come
// within TargetWorkerCPUOverFloor of the textbook instead.
const (
	TargetWorkerOverPlain    = 0.9  // least sluice/plain tasks a second
	TargetWorkerCPUOverPlain = 1.3  // most sluice/plain Redis CPU per task
	TargetWorkerCPUOverFloor = 1.05 // most sluice/textbook Redis CPU per task, when that floor is above the target
)

const (
	// workerTenants is how many tenants the tasks of a round spread over,
	// one after another.
	workerTenants = 50

	// workerEnqueuers is how many goroutines enqueue a round's tasks at
	// once: asynq's client sends one task a call, so enqueueing in parallel
	// is what keeps it from taking longer than the round it prepares.
	workerEnqueuers = 64

	// The asynq intervals of both servers: worker.Config's defaults.
	workerFetchInterval   = 100 * time.Millisecond // TaskCheckInterval
	workerDelayedInterval = 250 * time.Millisecond // DelayedTaskCheckInterval

	// workerStall is how long a round may go without a task completing
	// before it fails: a round whose tasks stopped running would otherwise
	// never end.
	workerStall = 30 * time.Second
)

// workerPolicies is the policies file of the sluice server: two rules on
// every task, as a deployment with a limit per tenant and one for the
// provider account has, so high that no round reaches them.
const workerPolicies = `tasks:
  sms:send:
    - name: tenant
      scope: tenant
      limit: 100000
      window: 1s
    - name: global
      scope: global
      limit: 100000
      window: 1s
`

// WorkerResult is the worker section: asynq tasks per second end to end,
// with the Throttle middleware, without it, and with the least a limiter
// call could add.
type WorkerResult struct {
	Tasks       int `json:"tasks"`       // tasks per round, enqueued before the server starts
	Tenants     int `json:"tenants"`     // the tasks spread over
	Concurrency int `json:"concurrency"` // asynq Config.Concurrency of every server

	// The asynq intervals of every server, ms.
	TaskCheckIntervalMs        float64 `json:"task_check_interval_ms"`
	DelayedTaskCheckIntervalMs float64 `json:"delayed_task_check_interval_ms"`

	// Policies is the policies file of the sluice servers, YAML.
	Policies string `json:"policies"`

	// Servers are the contenders in the order of their first round, plain
	// first (workerContenders says what each runs).
	Servers []WorkerServer `json:"servers"`

	// Target is TargetWorkerOverPlain; TargetMet says whether sluice's
	// OverPlain median reaches it. CPUTarget is TargetWorkerCPUOverPlain
	// and FloorTarget TargetWorkerCPUOverFloor; CPUTargetMet says whether
	// sluice's CPUOverPlain median is within CPUTarget or, when the
	// textbook's CPUOverPlain median is above CPUTarget, sluice's
	// CPUOverFloor median is within FloorTarget.
	Target       float64 `json:"target"`
	TargetMet    bool    `json:"target_met"`
	CPUTarget    float64 `json:"cpu_target"`
	FloorTarget  float64 `json:"floor_target"`
	CPUTargetMet bool    `json:"cpu_target_met"`

	// CPUOverFloor is sluice's Redis CPU per task over the textbook's,
	// round by round.
	CPUOverFloor Ratio `json:"cpu_over_floor"`
}

// WorkerServer is one contender of the worker section.
type WorkerServer struct {
	Name  string `json:"name"`
	About string `json:"about"`
	WorkerMeasurement

	// OverPlain is its tasks a second over plain's, and CPUOverPlain its
	// Redis CPU per task over plain's, round by round.
	OverPlain    Ratio `json:"over_plain"`
	CPUOverPlain Ratio `json:"cpu_over_plain"`
}

// server returns the contender named name, or nil.
func (wr *WorkerResult) server(name string) *WorkerServer {
	for i := range wr.Servers {
		if wr.Servers[i].Name == name {
			return &wr.Servers[i]
		}
	}
	return nil
}

// WorkerMeasurement is one server's rounds and their medians.
type WorkerMeasurement struct {
	PerSecond         float64       `json:"per_second"`            // median of the rounds' tasks a second
	RedisCPUUsPerTask float64       `json:"redis_cpu_us_per_task"` // median of the rounds'
	RoundTripsPerTask float64       `json:"round_trips_per_task"`  // median of the rounds'
	GoCPUUsPerTask    float64       `json:"go_cpu_us_per_task"`    // median of the rounds'
	Commands          []CommandCost `json:"commands"`              // each command's median over the rounds, the dearest first
	Rounds            []WorkerRound `json:"rounds"`
}

// WorkerRound is one server running one round's tasks.
type WorkerRound struct {
	Tasks     int     `json:"tasks"`
	Seconds   float64 `json:"seconds"`    // from the server's Start until the handler completed the last task
	PerSecond float64 `json:"per_second"` // Tasks over Seconds

	// RedisCPUUsPerTask is the CPU time the Redis process used, user and
	// system, from Start until the last task completed (INFO cpu), per
	// task, µs: what a task costs Redis, its network I/O and the asynq
	// server's background work included. It assumes the Redis serves no
	// one else meanwhile.
	RedisCPUUsPerTask float64 `json:"redis_cpu_us_per_task"`

	// RoundTripsPerTask is the round trips of the section's client over
	// the same span, per task: asynq's and the limiter's (roundTrips).
	RoundTripsPerTask float64 `json:"round_trips_per_task"`

	// GoCPUUsPerTask is the CPU time this process used over the same span,
	// user and system, per task, µs: the asynq server's, the handler's and
	// the limiter's Go side (the enqueuers are done before it starts).
	GoCPUUsPerTask float64 `json:"go_cpu_us_per_task"`

	// Commands is what each Redis command cost per task over the same
	// span (INFO commandstats), the dearest first.
	Commands []CommandCost `json:"commands"`

	// EnqueueSeconds is how long enqueueing the tasks took, before the
	// server started; not part of Seconds.
	EnqueueSeconds float64 `json:"enqueue_seconds"`
}

// runWorker measures, round after round, the same tasks run by every
// contender of workerContenders, in an order that rotates from round to
// round, after one uncounted round of each with a tenth of the tasks.
func runWorker(ctx context.Context, r *runner, res *Results) error {
	opt, err := redis.ParseURL(r.cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("the Redis URL: %w", err)
	}
	// A client of the section's own, shared by both servers and the
	// limiter: the enqueuers and every asynq worker get a connection.
	opt.PoolSize = workerEnqueuers + r.cfg.WorkerConcurrency + 8
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	trips := &roundTrips{}
	rdb.AddHook(trips)

	parsed, err := policies.Parse("bench", []byte(workerPolicies))
	if err != nil {
		return err
	}
	limiterPrefix := r.prefix + "worker:"
	contenders := workerContenders(rdb, limiterPrefix, parsed)

	n := r.cfg.WorkerTasks
	run := func(c workerContender, label string, tasks int) (WorkerRound, error) {
		queue := r.prefix + "worker-" + label + "-" + c.name
		defer func() {
			// With a context of its own: the keys go even after an
			// interruption.
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = deleteQueue(dctx, rdb, queue)
			_ = unlinkMatching(dctx, rdb, limiterPrefix+"*")
		}()
		return workerRound(ctx, rdb, trips, queue, tasks, r.cfg.WorkerConcurrency, c.wrap)
	}
	for _, c := range contenders {
		if _, err := run(c, "warmup", max(1, n/10)); err != nil {
			return fmt.Errorf("warm up %s: %w", c.name, err)
		}
	}
	wr := &WorkerResult{
		Tasks:                      n,
		Tenants:                    workerTenants,
		Concurrency:                r.cfg.WorkerConcurrency,
		TaskCheckIntervalMs:        float64(workerFetchInterval) / float64(time.Millisecond),
		DelayedTaskCheckIntervalMs: float64(workerDelayedInterval) / float64(time.Millisecond),
		Policies:                   workerPolicies,
		Target:                     TargetWorkerOverPlain,
		CPUTarget:                  TargetWorkerCPUOverPlain,
		FloorTarget:                TargetWorkerCPUOverFloor,
	}
	for _, c := range contenders {
		wr.Servers = append(wr.Servers, WorkerServer{Name: c.name, About: c.about})
	}
	if r.cfg.WorkerProfile != "" {
		stop, err := startProfile(r.cfg.WorkerProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	for round := range r.cfg.Repeat {
		for k := range contenders {
			c := contenders[(round+k)%len(contenders)]
			got, err := run(c, strconv.Itoa(round+1), n)
			if err != nil {
				return fmt.Errorf("%s round %d: %w", c.name, round+1, err)
			}
			m := wr.server(c.name)
			m.Rounds = append(m.Rounds, got)
			r.logf("worker round %d/%d %-11s %6d tasks in %6.3f s: %8.0f tasks/s  Redis CPU %5.1f µs/task  Go CPU %5.1f µs/task  %4.1f round trips/task  (enqueued in %.3f s)",
				round+1, r.cfg.Repeat, c.name, got.Tasks, got.Seconds, got.PerSecond, got.RedisCPUUsPerTask, got.GoCPUUsPerTask, got.RoundTripsPerTask, got.EnqueueSeconds)
		}
	}
	wr.summarize()
	res.Worker = wr
	return nil
}

// summarize sets the medians of each contender's rounds in wr, its ratios
// to plain, and whether sluice meets the targets.
func (wr *WorkerResult) summarize() {
	plain := wr.server("plain")
	for i := range wr.Servers {
		m := &wr.Servers[i]
		n := len(m.Rounds)
		cpu, trips, goCPU, costs := make([]float64, n), make([]float64, n), make([]float64, n), make([][]CommandCost, n)
		for i, rd := range m.Rounds {
			cpu[i], trips[i], goCPU[i], costs[i] = rd.RedisCPUUsPerTask, rd.RoundTripsPerTask, rd.GoCPUUsPerTask, rd.Commands
		}
		m.PerSecond, m.RedisCPUUsPerTask, m.RoundTripsPerTask = median(workerPerSecond(m.Rounds)), median(cpu), median(trips)
		m.GoCPUUsPerTask = median(goCPU)
		m.Commands = medianCosts(costs)
		if plain != nil {
			m.OverPlain = perSecondRatio(workerPerSecond(m.Rounds), workerPerSecond(plain.Rounds))
			m.CPUOverPlain = perSecondRatio(cpu, workerCPU(plain.Rounds))
		}
	}
	if s := wr.server("sluice"); s != nil {
		wr.TargetMet = s.OverPlain.Median >= wr.Target
		wr.CPUTargetMet = s.CPUOverPlain.Median > 0 && s.CPUOverPlain.Median <= wr.CPUTarget
		if floor := wr.server("textbook"); floor != nil {
			wr.CPUOverFloor = perSecondRatio(workerCPU(s.Rounds), workerCPU(floor.Rounds))
			if floor.CPUOverPlain.Median > wr.CPUTarget {
				wr.CPUTargetMet = wr.CPUTargetMet || (wr.CPUOverFloor.Median > 0 && wr.CPUOverFloor.Median <= wr.FloorTarget)
			}
		}
	}
}

// workerRound enqueues tasks SMS tasks on queue, then starts an asynq
// server on it whose handler, wrapped by wrap, counts completed tasks, and
// returns the time from Start until the count reached tasks. The server
// has shut down when it returns. A task that fails fails the round: no
// task should.
func workerRound(ctx context.Context, rdb *redis.Client, trips *roundTrips, queue string, tasks, concurrency int,
	wrap func(context.Context, asynq.Handler) (asynq.Handler, error)) (WorkerRound, error) {
	enqueued, err := enqueueSMS(ctx, rdb, queue, tasks)
	if err != nil {
		return WorkerRound{}, err
	}

	var done atomic.Int64
	finished := make(chan struct{})
	counting := asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		if done.Add(1) == int64(tasks) {
			close(finished)
		}
		return nil
	})
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h, err := wrap(rctx, counting)
	if err != nil {
		return WorkerRound{}, err
	}
	failed := make(chan error, 1)
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:              concurrency,
		Queues:                   map[string]int{queue: 1},
		TaskCheckInterval:        workerFetchInterval,
		DelayedTaskCheckInterval: workerDelayedInterval,
		ShutdownTimeout:          5 * time.Second,
		ErrorHandler: asynq.ErrorHandlerFunc(func(_ context.Context, task *asynq.Task, err error) {
			select {
			case failed <- fmt.Errorf("task %s of tenant %q: %w", task.Type(), task.Headers()[producer.HeaderTenant], err):
			default:
			}
		}),
		LogLevel: asynq.WarnLevel,
	})

	before, err := readRoundCost(ctx, rdb, trips)
	if err != nil {
		return WorkerRound{}, err
	}
	start := time.Now()
	if err := srv.Start(h); err != nil {
		return WorkerRound{}, fmt.Errorf("start asynq server: %w", err)
	}
	defer srv.Shutdown()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastAt := int64(0), start
	for {
		select {
		case <-finished:
			d := time.Since(start)
			after, err := readRoundCost(ctx, rdb, trips)
			if err != nil {
				return WorkerRound{}, err
			}
			round := before.until(after, tasks)
			round.Seconds, round.PerSecond, round.EnqueueSeconds = d.Seconds(), float64(tasks)/d.Seconds(), enqueued.Seconds()
			return round, nil
		case err := <-failed:
			return WorkerRound{}, err
		case <-ctx.Done():
			return WorkerRound{}, ctx.Err()
		case now := <-tick.C:
			if n := done.Load(); n != last {
				last, lastAt = n, now
			} else if now.Sub(lastAt) > workerStall {
				return WorkerRound{}, fmt.Errorf("stalled: %d of %d tasks done, none in %v", n, tasks, workerStall)
			}
		}
	}
}

// roundCost is what a round's cost is read from, at its start and at its
// end: Redis's CPU and commands, the client's round trips and this
// process's CPU.
type roundCost struct {
	redisCPU, goCPU float64
	trips           int64
	commands        map[string]commandStats
}

// readRoundCost reads them now.
func readRoundCost(ctx context.Context, rdb *redis.Client, trips *roundTrips) (roundCost, error) {
	c := roundCost{trips: trips.count(), goCPU: processCPU()}
	var err error
	if c.redisCPU, err = redisCPU(ctx, rdb); err != nil {
		return c, err
	}
	c.commands, err = redisCommands(ctx, rdb)
	return c, err
}

// until returns the costs per task of tasks from c to end, in a WorkerRound
// whose times are left to the caller.
func (c roundCost) until(end roundCost, tasks int) WorkerRound {
	n := float64(tasks)
	return WorkerRound{
		Tasks:             tasks,
		RedisCPUUsPerTask: (end.redisCPU - c.redisCPU) / n,
		RoundTripsPerTask: float64(end.trips-c.trips) / n,
		GoCPUUsPerTask:    (end.goCPU - c.goCPU) / n,
		Commands:          commandCosts(c.commands, end.commands, tasks),
	}
}

// enqueueSMS enqueues tasks SMS tasks on queue through producer.Client, the
// tenants taking turns, from workerEnqueuers goroutines at once, and
// returns how long it took.
func enqueueSMS(ctx context.Context, rdb *redis.Client, queue string, tasks int) (time.Duration, error) {
	pc := producer.NewClientFromRedisClient(rdb)
	defer pc.Close()
	start := time.Now()
	errs := make([]error, workerEnqueuers)
	var wg sync.WaitGroup
	for e := range workerEnqueuers {
		wg.Go(func() {
			for i := e; i < tasks && errs[e] == nil; i += workerEnqueuers {
				tenant := "tenant-" + strconv.Itoa(i%workerTenants)
				task, err := producer.NewSMSTask(tenant, producer.SMS{To: fmt.Sprintf("+1555%07d", i), Body: "Your code is 1234"})
				if err == nil {
					_, err = pc.Enqueue(ctx, task, asynq.Queue(queue))
				}
				if err != nil {
					errs[e] = fmt.Errorf("enqueue: %w", err)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// asynqQueuePattern matches every key asynq keeps for queue: asynq v0.26
// starts them all with "asynq:{<queue>}:" (the braces are the Cluster hash
// tag).
func asynqQueuePattern(queue string) string { return "asynq:{" + queue + "}:*" }

// asynqQueues is the set of queue names asynq knows.
const asynqQueues = "asynq:queues"

// deleteQueue deletes every key of queue, its tasks and its statistics,
// and its name from asynq's set of queues. asynq's own
// Inspector.DeleteQueue keeps the statistics.
func deleteQueue(ctx context.Context, rdb *redis.Client, queue string) error {
	if err := unlinkMatching(ctx, rdb, asynqQueuePattern(queue)); err != nil {
		return err
	}
	if err := rdb.SRem(ctx, asynqQueues, queue).Err(); err != nil {
		return fmt.Errorf("SREM %s %s: %w", asynqQueues, queue, err)
	}
	return nil
}

// unlinkMatching deletes every key that matches the SCAN pattern.
func unlinkMatching(ctx context.Context, rdb *redis.Client, pattern string) error {
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		if err := rdb.Unlink(ctx, iter.Val()).Err(); err != nil {
			return fmt.Errorf("UNLINK %s: %w", iter.Val(), err)
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("SCAN %s: %w", pattern, err)
	}
	return nil
}

// redisCPU returns the CPU time the Redis process has used, user and
// system, in µs (INFO cpu).
func redisCPU(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO cpu: %w", err)
	}
	return parseCPU(info), nil
}

// parseCPU returns used_cpu_sys plus used_cpu_user of INFO cpu, in µs.
func parseCPU(info string) float64 {
	var s float64
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			x, _ := strconv.ParseFloat(v, 64)
			s += x
		}
	}
	return s * 1e6
}

// workerCPU returns the Redis CPU per task of each round.
func workerCPU(rounds []WorkerRound) []float64 {
	xs := make([]float64, len(rounds))
	for i, r := range rounds {
		xs[i] = r.RedisCPUUsPerTask
	}
	return xs
}

// workerPerSecond returns the throughput of each round.
func workerPerSecond(rounds []WorkerRound) []float64 {
	xs := make([]float64, len(rounds))
	for i, r := range rounds {
		xs[i] = r.PerSecond
	}
	return xs
}
