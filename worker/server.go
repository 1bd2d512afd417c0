package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
)

// Config configures a Server. Zero fields take the defaults given.
type Config struct {
	// ThrottleConfig configures the Server's Throttle middleware: the
	// failure mode, the decision timeout, holds, the logger (which gets
	// asynq's logs too) and the OnDecision hook. Its two intervals are
	// also given to asynq, and default to DefaultCheckInterval and
	// DefaultFetchInterval, not to asynq's own defaults: asynq's 5 s would
	// let a throttled task come back up to 5 s late.
	ThrottleConfig

	// Policies are the rules the worker enforces; required.
	Policies *policies.File

	// SMS and Email send the tasks; at least one is required. The worker
	// serves the queues of the task types it has a provider for, so a
	// worker with only an SMS provider never fetches an email task.
	// provider.LogProvider logs instead of sending, and the task
	// completes: for a type that should not go out.
	SMS   provider.SMSProvider
	Email provider.EmailProvider

	// Concurrency is how many tasks run at once in this process; default
	// DefaultConcurrency.
	Concurrency int

	// Queues maps queue names to priorities, as asynq.Config.Queues. Nil
	// means the queues of the types the worker has a provider for, as the
	// layout names them (docs/SCALING.md), each at priority 1, and
	// layout.Legacy ("default", where Sluice 0.x put every task) when it
	// has a provider for every type. Queues given here may hold tasks of
	// any type, so they need both providers.
	Queues map[string]int

	// DrainingShards are the shards of older layouts whose queues the
	// server serves too when Queues is nil, so that the tasks left there
	// by a change of layout (admin layout) are still run; the worker
	// command reads them from Redis (layout.Draining).
	DrainingShards []int

	// ShutdownTimeout is how long Shutdown waits for running tasks before
	// asynq puts them back in their queue; default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration

	// Prefix starts the limiter's Redis keys; default throttle.DefaultPrefix.
	// Every worker sharing limits must use the same.
	Prefix string

	// RetryDelay is the backoff for real failures; nil means asynq's
	// default (exponential with jitter).
	RetryDelay asynq.RetryDelayFunc

	// ErrorHandler, when set, is called after the worker's own logging
	// (see ErrorHandler) for every task run that returned an error: a task
	// sent back through the retry set by throttling (provider.IsThrottled), a
	// failure to be retried, or a task being archived. It runs in the
	// task's goroutine, as asynq's Config.ErrorHandler, so it must be safe
	// for concurrent use and quick. Nil means none. The demo
	// (worker --demo) counts throttled returns with it.
	ErrorHandler asynq.ErrorHandler

	// Observers are told, in order, of each decision, each provider's
	// answer and each throttled return: before OnDecision and
	// ErrorHandler. status.Metrics and status.Activity are Observers. Nil
	// means none.
	Observers []Observer

	// AllowEviction lets the server run on a Redis whose maxmemory-policy
	// may evict keys, which Run and Ready otherwise refuse (ErrEvicting):
	// an evicted log admits again what it counted. It says so once; a
	// Redis that will not say its policy is then not warned of.
	AllowEviction bool
}

// Server is a worker: an asynq server whose tasks pass the Throttle
// middleware before their provider.
type Server struct {
	rdb      redis.UniversalClient
	policies *policies.File
	srv      *asynq.Server
	handler  asynq.Handler
	throttle *Throttle
	logger   *slog.Logger
	prefix   string
	queues   []string // asynq's, in name order
	served   []string // the task types it has a provider for
	layout   layout.Layout

	allowEviction bool
	// The warnings that Redis would not say its policy, and that it may
	// evict but AllowEviction runs anyway: once each, not at every Ready.
	unknownEviction, allowedEviction sync.Once
}

// NewServer returns a worker on rdb; the caller owns rdb and closes it after
// the server has shut down. It adds SyncHook to rdb, so that what asynq
// could not write during an outage is written after it. Its limiter batches, as
// every throttle.Limiter does by default: the decisions of tasks that start
// at the same time share a pipeline.
func NewServer(rdb redis.UniversalClient, cfg Config) (*Server, error) {
	if rdb == nil {
		return nil, errors.New("worker: nil Redis client")
	}
	if cfg.Policies == nil || cfg.Policies.Current() == nil {
		return nil, errors.New("worker: no policies")
	}
	if err := cfg.checkProviders(); err != nil {
		return nil, err
	}
	if _, err := layout.Parse(cfg.layout().String()); err != nil {
		return nil, fmt.Errorf("worker: Config.Shards: %w", err)
	}
	if len(cfg.Queues) > 0 && cfg.layout().Shards > 1 {
		if err := shardQueues(cfg.layout(), cfg.Queues, cfg.served()); err != nil {
			return nil, err
		}
	}
	cfg = cfg.withDefaults()
	cfg.warnOldQueues()
	rdb.AddHook(SyncHook{})
	// Batching: the decisions of tasks that start while others are being
	// decided go to Redis together, one pipeline instead of a round trip
	// each. A lone decision is sent at once, as without batching, so it
	// costs nothing when tasks do not overlap.
	limiter := throttle.NewLimiter(rdb, throttle.WithPrefix(cfg.Prefix))
	sms, email := cfg.observeProviders()
	tc := cfg.ThrottleConfig
	tc.OnDecision = cfg.onDecision()
	if tc.QueueRedis == nil {
		tc.QueueRedis = rdb
	}
	t, err := NewThrottle(limiter, cfg.Policies, &tc)
	if err != nil {
		return nil, err
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:              cfg.Concurrency,
		Queues:                   cfg.Queues,
		DelayedTaskCheckInterval: cfg.DelayedTaskCheckInterval,
		TaskCheckInterval:        cfg.FetchInterval,
		ShutdownTimeout:          cfg.ShutdownTimeout,
		IsFailure:                IsFailure,
		RetryDelayFunc:           RetryDelay(cfg.RetryDelay),
		ErrorHandler:             cfg.errorHandler(),
		Logger:                   asynqLogger{cfg.Logger},
		LogLevel:                 asynq.WarnLevel,
	})
	return &Server{
		rdb:      rdb,
		policies: cfg.Policies,
		srv:      srv,
		handler:  t.Middleware(Handler(sms, email)),
		throttle: t,
		logger:   cfg.Logger,
		prefix:   cfg.Prefix,
		queues:   slices.Sorted(maps.Keys(cfg.Queues)),
		served:   cfg.served(),
		layout:   cfg.layout(),

		allowEviction: cfg.AllowEviction,
	}, nil
}

// withDefaults returns c with each zero setting that a Server fills set
// to its default.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Prefix == "" {
		c.Prefix = throttle.DefaultPrefix
	}
	if c.DelayedTaskCheckInterval <= 0 {
		c.DelayedTaskCheckInterval = DefaultCheckInterval
	}
	if c.FetchInterval <= 0 {
		c.FetchInterval = DefaultFetchInterval
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if len(c.Queues) == 0 {
		c.Queues = map[string]int{}
		for _, q := range c.layout().Queues(c.served(), producer.TaskTypes()) {
			c.Queues[q] = 1
		}
		for _, n := range c.DrainingShards {
			for _, q := range (layout.Layout{Shards: n}).Queues(c.served(), producer.TaskTypes()) {
				c.Queues[q] = 1
			}
		}
	}
	return c
}

// warnOldQueues warns when c's queues are Sluice 0.1's, default without
// the type queues: producers of this version put tasks there once a
// worker of this version has written the layout.
func (c Config) warnOldQueues() {
	if _, old := c.Queues[layout.Legacy]; !old {
		return
	}
	for _, t := range c.served() {
		if q := c.layout().TypeQueues(t)[0]; c.Queues[q] == 0 {
			c.Logger.Warn("the queues name default but not a task type's queue, where producers of this version put the tasks they are given no queue for: serve it too, or leave the queues to the worker",
				"queue", q)
		}
	}
}

// layout is the layout c runs: Shards shards, at least one.
func (c Config) layout() layout.Layout { return layout.Layout{Shards: max(c.Shards, 1)} }

// served returns the task types c has a provider for.
func (c Config) served() []string {
	var types []string
	if c.Email != nil {
		types = append(types, producer.TypeEmail)
	}
	if c.SMS != nil {
		types = append(types, producer.TypeSMS)
	}
	return types
}

// checkProviders refuses a Config that would fetch tasks it has no
// provider for: the limiter would count them, and the worker archive them
// unsent.
func (c Config) checkProviders() error {
	switch {
	case c.SMS == nil && c.Email == nil:
		return errors.New("worker: no provider (Config.SMS, Config.Email): the worker would have nothing to send")
	case len(c.Queues) == 0:
		return nil
	case c.SMS == nil:
		return fmt.Errorf("worker: no SMS provider (Config.SMS), and Config.Queues names the queues: they may hold %s tasks, which the worker would archive unsent; leave Queues nil to serve only the queues of %s", producer.TypeSMS, producer.TypeEmail)
	case c.Email == nil:
		return fmt.Errorf("worker: no email provider (Config.Email), and Config.Queues names the queues: they may hold %s tasks, which the worker would archive unsent; leave Queues nil to serve only the queues of %s", producer.TypeEmail, producer.TypeSMS)
	}
	return nil
}

// observeProviders returns c's providers, wrapped so that c's observers,
// when it has some, are told each answer; a nil one stays nil.
func (c Config) observeProviders() (sms provider.SMSProvider, email provider.EmailProvider) {
	sms, email = c.SMS, c.Email
	if len(c.Observers) == 0 {
		return sms, email
	}
	answer := func(e provider.Event) {
		for _, o := range c.Observers {
			o.ObserveProvider(e)
		}
	}
	if sms != nil {
		sms = provider.ObserveSMS("sms", sms, answer)
	}
	if email != nil {
		email = provider.ObserveEmail("email", email, answer)
	}
	return sms, email
}

// onDecision returns the hook that gives each decision to c's observers,
// then c.OnDecision; nil when c has neither.
func (c Config) onDecision() func(DecisionEvent) {
	if len(c.Observers) == 0 {
		return c.OnDecision
	}
	observers, then := c.Observers, c.OnDecision
	return func(e DecisionEvent) {
		for _, o := range observers {
			o.ObserveDecision(e)
		}
		if then != nil {
			then(e)
		}
	}
}

// errorHandler returns asynq's error handler for a Server of c: the
// worker's logging (ErrorHandler), then, for a throttled return, c's
// observers, then c.ErrorHandler when set.
func (c Config) errorHandler() asynq.ErrorHandler {
	logged := ErrorHandler(c.Logger)
	observers, then := c.Observers, c.ErrorHandler
	return asynq.ErrorHandlerFunc(func(ctx context.Context, task *asynq.Task, err error) {
		logged.HandleError(ctx, task, err)
		if len(observers) > 0 && provider.IsThrottled(err) {
			id, _ := asynq.GetTaskID(ctx)
			e := ThrottledEvent{TaskType: task.Type(), TaskID: id, Err: err}
			for _, o := range observers {
				o.ObserveThrottled(e)
			}
		}
		if then != nil {
			then.HandleError(ctx, task, err)
		}
	})
}

// Run refuses a Redis that may evict keys (ErrEvicting) unless
// AllowEviction, and one where an older worker serves its queues or that
// names another layout or a change of layout under way (CheckLayout),
// then starts the server, runs until ctx is done,
// then shuts down gracefully: it stops fetching, waits up to
// ShutdownTimeout for running tasks, and asynq puts back what did not
// finish. It also stops, returning an error matching producer.ErrLayout,
// when Redis comes to name another layout or a change (admin layout).
func (s *Server) Run(ctx context.Context) error {
	// ctx done before the server started is a stop, not a failure.
	early := func(err error) error {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := s.CheckEviction(ctx); err != nil {
		return early(err)
	}
	// Said before the layout is read, which admin layout reads after it
	// marks a change: one of the two sees the other.
	id := layout.PresenceID()
	if err := layout.Present(ctx, s.rdb, s.prefix, id); err != nil {
		return early(fmt.Errorf("worker: %w", err))
	}
	defer func() { _ = layout.Absent(context.WithoutCancel(ctx), s.rdb, s.prefix, id) }()
	if err := s.CheckLayout(ctx); err != nil {
		return early(err)
	}
	if err := s.srv.Start(s.handler); err != nil {
		return fmt.Errorf("worker: start: %w", err)
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go s.watchLayout(ctx, stop, id)
	lines := make(chan struct{})
	go func() { s.throttle.RunLines(ctx); close(lines) }()
	<-ctx.Done()
	s.throttle.Stop()
	<-lines
	s.srv.Shutdown()
	if err := context.Cause(ctx); errors.Is(err, layout.ErrOther) {
		return fmt.Errorf("worker: stopped: %w", err)
	}
	return nil
}

// layoutEvery is how often a running worker reads the layout again and
// renews its presence (layout.Present); the first time a second after it
// started.
const layoutEvery = 10 * time.Second

// watchLayout renews worker id's presence and reads the layout, a second
// after the start and every layoutEvery, and stops the worker (stop) when
// Redis names another or a change is under way (admin layout): such a
// worker would admit where the new layout no longer counts. Redis not
// answering stops nothing. A 0.1.0 worker started since is logged as an
// error each time (layout.ErrOlder).
func (s *Server) watchLayout(ctx context.Context, stop context.CancelCauseFunc, id string) {
	tick := time.NewTimer(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			tick.Reset(layoutEvery)
		}
		err := layout.Present(ctx, s.rdb, s.prefix, id)
		if err == nil {
			err = layout.Check(ctx, s.rdb, s.prefix, s.layout)
		}
		if errors.Is(err, layout.ErrOther) {
			s.logger.Error("the layout in Redis is not the one this worker runs: stopping", "err", err)
			stop(err)
			return
		}
		if err != nil {
			s.logger.Debug("could not read the layout", "err", err)
		}
		if err := layout.CheckOlder(ctx, s.rdb, s.prefix, s.queues); errors.Is(err, layout.ErrOlder) {
			s.logger.Error("an asynq server that is no worker of this version serves this worker's queues: stop it", "err", err)
		}
	}
}

// CheckLayout writes the layout this worker runs (Config.Shards shards)
// when Redis names none, and returns an error matching producer.ErrLayout,
// naming both, when Redis names another (docs/SCALING.md); one matching
// layout.ErrOlder, and nothing written, when a worker of Sluice 0.1.0
// serves one of its queues.
func (s *Server) CheckLayout(ctx context.Context) error {
	if err := layout.CheckOlder(ctx, s.rdb, s.prefix, s.queues); errors.Is(err, layout.ErrOlder) {
		return fmt.Errorf("%w; stop them before starting this version (docs/SCALING.md, \"From 0.1.0\")", err)
	} else if err != nil {
		return err
	}
	return layout.Ensure(ctx, s.rdb, s.prefix, s.layout)
}

// Queues returns the asynq queues the server serves, in name order.
func (s *Server) Queues() []string { return slices.Clone(s.queues) }

// Unthrottled returns the task types the server has a provider for that
// the policies in force enforce no rule for, in name order: they have no
// rules, or only rules in shadow mode, so their
// tasks go to their provider whatever the limiter says. The worker command
// warns of each as it starts.
func (s *Server) Unthrottled() []string {
	var out []string
	for _, t := range s.served {
		enforced := slices.ContainsFunc(s.policies.Current().Rules(t), func(r policies.Rule) bool { return !r.Shadow })
		if !enforced {
			out = append(out, t)
		}
	}
	return out
}

// Refused reports what Redis has refused the server in the last minute
// (damaged keys, a full Redis: docs/OPERATING.md), nil when nothing, for
// status.PageConfig.Refused; Ready fails with it too.
func (s *Server) Refused() error { return s.throttle.damage.Err() }

// Lines returns the fair lines the server serves tasks through on one
// shard; nil when it serves first come, first served (FairnessOff), and on
// more than one shard, where AllLines has each shard's.
func (s *Server) Lines() *throttle.Lines { return s.throttle.Lines() }

// AllLines returns the fair lines of every shard the server serves tasks
// through, for status.PageConfig.Lines (Throttle.AllLines); nil when it
// serves first come, first served (FairnessOff).
func (s *Server) AllLines() []*throttle.Lines { return s.throttle.AllLines() }

// Holds returns the provider holds in force under the server's prefix,
// at most most of them (throttle.Limiter.Holds): a 429's Retry-After, which
// every worker keeps to.
func (s *Server) Holds(ctx context.Context, most int) ([]throttle.HeldKey, error) {
	return s.throttle.limiter.Holds(ctx, most)
}

// Ready reports whether the server can work: nil when Redis answers a
// PING within ctx, has refused none of the server's calls in the last
// minute (a damaged key: the error names it), its maxmemory-policy evicts no
// keys (or AllowEviction) and policies are loaded. It is the /readyz
// check of status.OpsHandler.
func (s *Server) Ready(ctx context.Context) error {
	if s.policies.Current() == nil {
		return errors.New("no policies loaded")
	}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if err := s.Refused(); err != nil {
		return err
	}
	return s.CheckEviction(ctx)
}
