package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// RunWorkerIfChild makes this process a worker of the drain section when
// the harness started it as one, and then exits; otherwise it returns at
// once. The drain section starts its worker processes by running its own
// executable again with an environment variable set, so every program
// that runs the section must call it first thing: cmd/bench's main, and
// the TestMain of a test package that runs the section.
//
// The worker runs until SIGTERM or SIGINT, or until its standard input
// closes (the harness is gone), shuts down gracefully, writes its counters
// to the file the harness named, and exits 0; 1 when it could not run.
func RunWorkerIfChild() {
	js, ok := os.LookupEnv(drainWorkerEnv)
	if !ok {
		return
	}
	var spec drainWorkerSpec
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "bench: drain worker: %s: %v\n", drainWorkerEnv, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	err := runDrainWorker(ctx, spec)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: drain worker %d (%s): %v\n", spec.Process, spec.Strategy, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runDrainWorker runs the strategy's asynq server on the spec's queue until
// ctx is done, then writes the counters.
func runDrainWorker(ctx context.Context, spec drainWorkerSpec) error {
	// As cmd/worker makes its client: go-redis's defaults.
	rdb, err := redisconn.Client(spec.RedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	parsed, err := policies.Parse("drain", []byte(spec.Policies))
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c := &drainCounters{}
	sms := countingSMS{next: &provider.Webhook{URL: spec.ProviderURL}, c: c}
	errorHandler := asynq.ErrorHandlerFunc(c.handleError)

	switch spec.Strategy {
	case "sluice", "sluice-fcfs":
		fairness := worker.FairnessOn
		if spec.Strategy == "sluice-fcfs" {
			fairness = worker.FairnessOff
		}
		srv, err := worker.NewServer(rdb, worker.Config{
			ThrottleConfig: worker.ThrottleConfig{
				Logger:     logger,
				OnDecision: func(e worker.DecisionEvent) { c.decision(e.Decision.Allowed, e.Decision.Early, e.Err) },
				Fairness:   fairness,
			},
			Policies:        policies.Static(parsed),
			SMS:             sms,
			Email:           provider.LogProvider{Logger: logger}, // the drain enqueues none
			Concurrency:     spec.Concurrency,
			Queues:          map[string]int{spec.Queue: 1},
			Prefix:          spec.Prefix,
			ShutdownTimeout: drainShutdownTimeout,
			ErrorHandler:    errorHandler,
		})
		if err != nil {
			return err
		}
		if err := srv.Run(ctx); err != nil {
			return err
		}
	case "naive":
		l := throttle.NewLimiter(rdb, throttle.WithPrefix(spec.Prefix))
		mw := naiveMiddleware(l, parsed, c)
		if err := runBaseline(ctx, rdb, spec, worker.IsFailure, worker.RetryDelay(nil), errorHandler, mw(worker.Handler(sms, nil))); err != nil {
			return err
		}
	case "per-process":
		mw := perProcessMiddleware(newLocalLimits(parsed), c)
		isFailure := func(err error) bool { return !isRateLimitError(err) }
		if err := runBaseline(ctx, rdb, spec, isFailure, rateLimitRetryDelay, errorHandler, mw(worker.Handler(sms, nil))); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown strategy %q", spec.Strategy)
	}
	js, err := json.Marshal(c.snapshot())
	if err != nil {
		return err
	}
	return os.WriteFile(spec.Counters, js, 0o644)
}

// runBaseline runs h on an asynq server configured as worker.NewServer
// configures its own, with isFailure and retryDelay, until ctx is done.
func runBaseline(ctx context.Context, rdb redis.UniversalClient, spec drainWorkerSpec, isFailure func(error) bool,
	retryDelay asynq.RetryDelayFunc, errorHandler asynq.ErrorHandler, h asynq.Handler) error {
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:              spec.Concurrency,
		Queues:                   map[string]int{spec.Queue: 1},
		TaskCheckInterval:        workerFetchInterval,
		DelayedTaskCheckInterval: workerDelayedInterval,
		ShutdownTimeout:          drainShutdownTimeout,
		IsFailure:                isFailure,
		RetryDelayFunc:           retryDelay,
		ErrorHandler:             errorHandler,
		LogLevel:                 asynq.WarnLevel,
	})
	if err := srv.Start(h); err != nil {
		return fmt.Errorf("start asynq server: %w", err)
	}
	<-ctx.Done()
	srv.Shutdown()
	return nil
}

// naiveMiddleware asks the limiter for every rule of a task in one
// AllowMulti call, and sends a denied task back to when the oldest entry
// leaves the window that denied it: every task denied meanwhile comes back
// then too.
func naiveMiddleware(l *throttle.Limiter, rules *policies.Policies, c *drainCounters) func(asynq.Handler) asynq.Handler {
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
			applied := rules.For(task.Type(), task.Headers()[producer.HeaderTenant])
			if len(applied) == 0 {
				return next.ProcessTask(ctx, task)
			}
			checks := make([]throttle.Check, len(applied))
			for i, a := range applied {
				checks[i] = a.Check
			}
			md, err := l.AllowMulti(ctx, checks)
			c.decision(md.Allowed, false, err)
			switch {
			case err != nil:
				return &provider.ThrottledError{RetryAfter: time.Second, By: "limiter unavailable", Err: err}
			case !md.Allowed:
				return &provider.ThrottledError{RetryAfter: md.RetryAfter, By: "rule " + applied[md.Denied].Rule}
			}
			return next.ProcessTask(ctx, task)
		})
	}
}

// rateLimitError is the error of asynq's rate-limiting pattern: the task
// is not a failure, and comes back in RetryIn.
type rateLimitError struct{ RetryIn time.Duration }

func (e *rateLimitError) Error() string { return fmt.Sprintf("rate limited (retry in %v)", e.RetryIn) }

func isRateLimitError(err error) bool {
	var rl *rateLimitError
	return errors.As(err, &rl)
}

// rateLimitRetryDelay is the pattern's RetryDelayFunc.
func rateLimitRetryDelay(n int, err error, task *asynq.Task) time.Duration {
	var rl *rateLimitError
	if errors.As(err, &rl) {
		return rl.RetryIn
	}
	return asynq.DefaultRetryDelayFunc(n, err, task)
}

// perProcessMiddleware is asynq's rate-limiting pattern: limits kept in
// the process, and a denied task back in a random 0 to 9 s.
func perProcessMiddleware(limits *localLimits, c *drainCounters) func(asynq.Handler) asynq.Handler {
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
			allowed, checked := limits.allow(task.Type(), task.Headers()[producer.HeaderTenant])
			if checked {
				c.decision(allowed, false, nil)
			}
			if !allowed {
				return &rateLimitError{RetryIn: time.Duration(rand.IntN(10)) * time.Second}
			}
			return next.ProcessTask(ctx, task)
		})
	}
}

// localLimits holds a token bucket per rule of the policies, and per
// tenant for tenant rules, at the rule's limit as written: a rate of
// limit/window and a burst of limit. It is safe for concurrent use.
type localLimits struct {
	policies *policies.Policies
	mu       sync.Mutex
	buckets  map[string]*rate.Limiter // by rule key
}

func newLocalLimits(p *policies.Policies) *localLimits {
	return &localLimits{policies: p, buckets: map[string]*rate.Limiter{}}
}

// allow takes one token from every bucket of the task's rules, or from
// none: a bucket that has no token now denies, and the tokens taken from
// the others are put back. checked is false when the type has no rules.
func (l *localLimits) allow(taskType, tenant string) (allowed, checked bool) {
	rules := l.policies.Rules(taskType)
	if len(rules) == 0 {
		return true, false
	}
	now := time.Now()
	taken := make([]*rate.Reservation, 0, len(rules))
	for _, r := range rules {
		res := l.bucket(taskType, r, tenant).ReserveN(now, 1)
		if !res.OK() || res.DelayFrom(now) > 0 {
			res.CancelAt(now)
			for _, t := range taken {
				t.CancelAt(now)
			}
			return false, true
		}
		taken = append(taken, res)
	}
	return true, true
}

// bucket returns the token bucket of rule r for tenant.
func (l *localLimits) bucket(taskType string, r policies.Rule, tenant string) *rate.Limiter {
	key, p := taskType+"/"+r.Name, r.Policy
	if r.Scope == policies.ScopeTenant {
		key += "/" + tenant
		if o, ok := r.Tenants[tenant]; ok {
			p = o
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		b = rate.NewLimiter(rate.Limit(float64(p.Limit)/p.Window.Seconds()), p.Limit)
		l.buckets[key] = b
	}
	return b
}

// drainCounters is what a worker process counts, safe for concurrent use.
type drainCounters struct {
	decisions, denials, early, admissions, limiterErrors atomic.Int64
	sends, sendErrors, throttled, failed                 atomic.Int64
}

// decision counts one limiter call. An early return (a task back before
// its place, told the time left) is not a denial: it changed nothing.
func (c *drainCounters) decision(allowed, early bool, err error) {
	c.decisions.Add(1)
	switch {
	case err != nil:
		c.limiterErrors.Add(1)
	case allowed:
		c.admissions.Add(1)
	case early:
		c.early.Add(1)
	default:
		c.denials.Add(1)
	}
}

// handleError is the asynq ErrorHandler: it counts the runs that returned
// an error.
func (c *drainCounters) handleError(_ context.Context, _ *asynq.Task, err error) {
	if provider.IsThrottled(err) || isRateLimitError(err) {
		c.throttled.Add(1)
	} else {
		c.failed.Add(1)
	}
}

// snapshot returns the counts so far. A run of a task either returned an
// error (counted by handleError) or succeeded, which for these SMS tasks
// is a provider call that succeeded.
func (c *drainCounters) snapshot() DrainCounts {
	d := DrainCounts{
		Decisions: c.decisions.Load(), Denials: c.denials.Load(), Early: c.early.Load(), Admissions: c.admissions.Load(), LimiterErrors: c.limiterErrors.Load(),
		Sends: c.sends.Load(), SendErrors: c.sendErrors.Load(), Throttled: c.throttled.Load(), Failed: c.failed.Load(),
	}
	d.Dequeues = d.Sends - d.SendErrors + d.Throttled + d.Failed
	return d
}

// countingSMS counts the provider calls of next.
type countingSMS struct {
	next provider.SMSProvider
	c    *drainCounters
}

func (s countingSMS) SendSMS(ctx context.Context, m provider.Message[producer.SMS]) error {
	s.c.sends.Add(1)
	err := s.next.SendSMS(ctx, m)
	if err != nil {
		s.c.sendErrors.Add(1)
	}
	return err
}
