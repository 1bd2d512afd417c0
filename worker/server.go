package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
)

// Config configures a Server. Zero fields take the defaults given.
type Config struct {
	// Policies are the rules the worker enforces; required.
	Policies *PolicyFile

	// SMS and Email send the tasks; both are required. NewServer refuses
	// a nil provider: the worker fetches both task types from its queues,
	// and without a provider it could only archive the tasks of that type,
	// after the limiter had counted them. LogProvider logs instead of
	// sending, and the task completes: for a type that no one enqueues, or
	// that should not go out.
	SMS   SMSProvider
	Email EmailProvider

	// Concurrency is how many tasks run at once in this process; default 10.
	Concurrency int

	// Queues maps queue names to priorities, as asynq.Config.Queues; default
	// {"default": 1}.
	Queues map[string]int

	// DelayedTaskCheckInterval is how often tasks due in the retry and
	// scheduled sets move to their queue: the lateness a throttled task can
	// have on top of asynq's whole-second retry times. Default 250 ms
	// (asynq's own default is 5 s).
	DelayedTaskCheckInterval time.Duration

	// FetchInterval is how often an idle worker looks for tasks when its
	// queues are empty (asynq's TaskCheckInterval, whose default is 1 s): a
	// task moved from the retry set to an empty queue waits up to this long
	// to be fetched. Default 100 ms.
	FetchInterval time.Duration

	// ShutdownTimeout is how long Shutdown waits for running tasks before
	// asynq puts them back in their queue; default 30 s.
	ShutdownTimeout time.Duration

	// Prefix starts the limiter's Redis keys; default throttle.DefaultPrefix.
	// Every worker sharing limits must use the same.
	Prefix string

	// FailureMode says what to do when the limiter cannot decide; default
	// FailClosed.
	FailureMode FailureMode

	// LimiterRetry is how long a task waits when the limiter could not
	// decide (FailClosed); default 1 s.
	LimiterRetry time.Duration

	// DecisionTimeout bounds each Redis call a task makes before its
	// provider: past it the limiter has not decided, and FailureMode says
	// what follows. Default DefaultDecisionTimeout, 1 s. See
	// ThrottleConfig.DecisionTimeout: rdb must honour context deadlines
	// (redis.Options.ContextTimeoutEnabled) for the bound to hold.
	DecisionTimeout time.Duration

	// MaxHold is the longest a denied task waits in the worker for its
	// place in line before it goes back through the retry set; default 2 s,
	// negative for never. See ThrottleConfig.MaxHold.
	MaxHold time.Duration

	// ProviderHold says whose sends a provider's 429 holds back; default
	// HoldAccount.
	ProviderHold HoldScope

	// RetryDelay is the backoff for real failures; nil means asynq's
	// default (exponential with jitter).
	RetryDelay asynq.RetryDelayFunc

	// ErrorHandler, when set, is called after the worker's own logging
	// (see ErrorHandler) for every task run that returned an error: a task
	// sent back through the retry set by throttling (IsThrottled), a
	// failure to be retried, or a task being archived. It runs in the
	// task's goroutine, as asynq's Config.ErrorHandler, so it must be safe
	// for concurrent use and quick. Nil means none. The demo
	// (worker --demo) counts throttled returns with it.
	ErrorHandler asynq.ErrorHandler

	// Logger receives the worker's logs and asynq's; nil means
	// slog.Default().
	Logger *slog.Logger

	// OnDecision, when set, is called after every limiter call of the
	// worker's Throttle; see ThrottleConfig.OnDecision. Nil means none.
	OnDecision func(DecisionEvent)

	// Metrics, when set, count the worker's decisions, its providers'
	// answers and its throttled returns. Nil means none.
	Metrics *Metrics

	// Activity, when set, records the tenants whose tasks the worker asks
	// the limiter about, the denials of each rule and the providers'
	// answers, for the status page (StatusPage). Nil means none.
	Activity *Activity
}

// Server is a worker: an asynq server whose tasks pass the Throttle
// middleware before their provider.
type Server struct {
	rdb      redis.UniversalClient
	policies *PolicyFile
	srv      *asynq.Server
	handler  asynq.Handler
	throttle *Throttle
	logger   *slog.Logger
}

// NewServer returns a worker on rdb; the caller owns rdb and closes it after
// the server has shut down. It adds SyncHook to rdb, so that what asynq
// could not write during an outage is written after it. Its limiter batches (throttle.WithBatching): the
// decisions of tasks that start at the same time share a pipeline.
func NewServer(rdb redis.UniversalClient, cfg Config) (*Server, error) {
	if rdb == nil {
		return nil, errors.New("worker: nil Redis client")
	}
	if cfg.Policies == nil || cfg.Policies.Current() == nil {
		return nil, errors.New("worker: no policies")
	}
	if cfg.SMS == nil {
		return nil, fmt.Errorf("worker: no SMS provider (Config.SMS): the worker would archive every %s task unsent", producer.TypeSMS)
	}
	if cfg.Email == nil {
		return nil, fmt.Errorf("worker: no email provider (Config.Email): the worker would archive every %s task unsent", producer.TypeEmail)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	rdb.AddHook(SyncHook{})
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = throttle.DefaultPrefix
	}
	interval := cfg.DelayedTaskCheckInterval
	if interval == 0 {
		interval = 250 * time.Millisecond
	}
	fetch := cfg.FetchInterval
	if fetch <= 0 {
		fetch = 100 * time.Millisecond
	}
	// Batching: the decisions of tasks that start while others are being
	// decided go to Redis together, one pipeline instead of a round trip
	// each. A lone decision is sent at once, as without batching, so it
	// costs nothing when tasks do not overlap.
	limiter := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix), throttle.WithBatching(nil))
	// Each decision goes to the metrics, the activity, then the caller's
	// hook; each provider's answer to the metrics and the activity.
	var observers []func(DecisionEvent)
	var answers []func(provider string, err error)
	if m := cfg.Metrics; m != nil {
		observers = append(observers, m.ObserveDecision)
		answers = append(answers, m.ObserveProvider)
	}
	if a := cfg.Activity; a != nil {
		observers = append(observers, a.ObserveDecision)
		answers = append(answers, a.ObserveProvider)
	}
	sms, email := cfg.SMS, cfg.Email
	if len(answers) > 0 {
		sms = observedSMS{p: sms, answers: answers}
		email = observedEmail{p: email, answers: answers}
	}
	if cfg.OnDecision != nil {
		observers = append(observers, cfg.OnDecision)
	}
	var onDecision func(DecisionEvent)
	switch len(observers) {
	case 0:
	case 1:
		onDecision = observers[0]
	default:
		onDecision = func(e DecisionEvent) {
			for _, o := range observers {
				o(e)
			}
		}
	}
	t, err := NewThrottle(limiter, cfg.Policies, &ThrottleConfig{
		FailureMode:              cfg.FailureMode,
		LimiterRetry:             cfg.LimiterRetry,
		DecisionTimeout:          cfg.DecisionTimeout,
		MaxHold:                  cfg.MaxHold,
		DelayedTaskCheckInterval: interval,
		FetchInterval:            fetch,
		ProviderHold:             cfg.ProviderHold,
		Logger:                   logger,
		OnDecision:               onDecision,
	})
	if err != nil {
		return nil, err
	}
	errorHandler := ErrorHandler(logger)
	if m := cfg.Metrics; m != nil {
		own := errorHandler
		errorHandler = asynq.ErrorHandlerFunc(func(ctx context.Context, task *asynq.Task, err error) {
			own.HandleError(ctx, task, err)
			m.ObserveThrottled(task.Type(), err)
		})
	}
	if extra := cfg.ErrorHandler; extra != nil {
		own := errorHandler
		errorHandler = asynq.ErrorHandlerFunc(func(ctx context.Context, task *asynq.Task, err error) {
			own.HandleError(ctx, task, err)
			extra.HandleError(ctx, task, err)
		})
	}
	shutdown := cfg.ShutdownTimeout
	if shutdown == 0 {
		shutdown = 30 * time.Second
	}
	concurrency := cfg.Concurrency
	if concurrency <= 0 {
		concurrency = 10
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:              concurrency,
		Queues:                   cfg.Queues,
		DelayedTaskCheckInterval: interval,
		TaskCheckInterval:        fetch,
		ShutdownTimeout:          shutdown,
		IsFailure:                IsFailure,
		RetryDelayFunc:           RetryDelay(cfg.RetryDelay),
		ErrorHandler:             errorHandler,
		Logger:                   asynqLogger{logger},
		LogLevel:                 asynq.WarnLevel,
	})
	return &Server{
		rdb:      rdb,
		policies: cfg.Policies,
		srv:      srv,
		handler:  t.Middleware(Handler(sms, email)),
		throttle: t,
		logger:   logger,
	}, nil
}

// Run starts the server, runs until ctx is done, then shuts down gracefully:
// it stops fetching, waits up to ShutdownTimeout for running tasks, and
// asynq puts back what did not finish.
func (s *Server) Run(ctx context.Context) error {
	if err := s.srv.Start(s.handler); err != nil {
		return fmt.Errorf("worker: start: %w", err)
	}
	<-ctx.Done()
	s.throttle.Stop()
	s.srv.Shutdown()
	return nil
}

// Unthrottled returns the task types the server handles (TaskTypes) that
// the policies in force enforce no rule for, in name order: they have no
// rules, or only rules in shadow mode, so their tasks go to their provider
// whatever the limiter says. The worker command warns of each as it
// starts.
func (s *Server) Unthrottled() []string {
	var out []string
	for _, t := range TaskTypes() {
		enforced := slices.ContainsFunc(s.policies.Current().Rules(t), func(r Rule) bool { return !r.Shadow })
		if !enforced {
			out = append(out, t)
		}
	}
	return out
}

// Ready reports whether the server can work: nil when Redis answers a
// PING within ctx and policies are loaded. It is the /readyz check of
// OpsHandler.
func (s *Server) Ready(ctx context.Context) error {
	if s.policies.Current() == nil {
		return errors.New("no policies loaded")
	}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// asynqLogger sends asynq's logs to slog.
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...), "from", "asynq") }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...), "from", "asynq") }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...), "from", "asynq") }
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...), "from", "asynq") }
func (a asynqLogger) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...), "from", "asynq")
	os.Exit(1) // asynq's Logger contract: Fatal does not return
}
