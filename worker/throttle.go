package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
)

// ThrottledError is returned by a task handler when the task must wait: the
// limiter denied it, or the provider answered 429. It is not a failure: it
// does not spend the task's retry budget, and the task runs again after
// RetryAfter through asynq's retry set, keeping its ID. For a limiter
// denial, RetryAfter can be shortly before the task's place in line: the
// worker that runs it then waits in process for the rest (see
// ThrottleConfig.MaxHold).
type ThrottledError struct {
	// RetryAfter is when the task should run again.
	RetryAfter time.Duration

	// By names what held the task back: a rule of the policies file, the
	// provider, or the limiter being unreachable.
	By string

	// Err is the cause, when there is one (a Redis error, a provider reply).
	Err error

	// FromProvider is set by providers for a 429: the Throttle middleware
	// then holds back other tasks of the same account (or tenant) in every
	// worker until RetryAfter.
	FromProvider bool
}

func (e *ThrottledError) Error() string {
	msg := fmt.Sprintf("throttled by %s; back in %v", e.By, e.RetryAfter.Round(time.Millisecond))
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *ThrottledError) Unwrap() error { return e.Err }

// IsThrottled reports whether err is, or wraps, a ThrottledError.
func IsThrottled(err error) bool {
	var te *ThrottledError
	return errors.As(err, &te)
}

// IsFailure is asynq's Config.IsFailure for Sluice: a throttled task has not
// failed, so its retry count stays and failure statistics stay clean.
func IsFailure(err error) bool { return !IsThrottled(err) }

// RetryDelay returns asynq's Config.RetryDelayFunc for Sluice: a throttled
// task comes back at its RetryAfter, rounded up to the next whole second
// because asynq v0.26 stores retry times as whole Unix seconds (truncated: a
// task due at 12:00:00.400 would otherwise come back at 12:00:00 and be
// denied again). A task recovered from a worker that died
// (asynq.ErrLeaseExpired) comes back at once; it still counts as a failure,
// so that a task that kills its workers cannot do so forever. Other errors
// get fallback, or asynq's default when nil.
func RetryDelay(fallback asynq.RetryDelayFunc) asynq.RetryDelayFunc {
	if fallback == nil {
		fallback = asynq.DefaultRetryDelayFunc
	}
	return func(n int, err error, task *asynq.Task) time.Duration {
		var te *ThrottledError
		switch {
		case errors.As(err, &te):
			return ceilToSecond(time.Now(), te.RetryAfter)
		case errors.Is(err, asynq.ErrLeaseExpired):
			// asynq's recoverer gives back the task of a worker that died,
			// a minute after the lease it held ended: it has waited enough.
			return 0
		}
		return fallback(n, err, task)
	}
}

// ceilToSecond returns the delay from now to the first whole second at or
// after now+d. asynq adds the delay to its own, later, reading of the clock,
// and truncates: the stored second is still the one returned here.
func ceilToSecond(now time.Time, d time.Duration) time.Duration {
	at := now.Add(d)
	sec := at.Unix()
	if at.Nanosecond() > 0 {
		sec++
	}
	return time.Unix(sec, 0).Sub(now)
}

// FailureMode says what a worker does when the limiter cannot decide.
type FailureMode int

const (
	// FailClosed sends nothing without a decision: the task comes back
	// after a delay, its retry budget untouched. The default.
	FailClosed FailureMode = iota
	// FailOpen runs the task without a decision.
	FailOpen
)

// HoldScope says whose sends a provider's 429 holds back.
type HoldScope int

const (
	// HoldAccount holds back every task of the task type, all tenants: the
	// provider account is shared, and a 429 usually means the account's
	// rate. The default.
	HoldAccount HoldScope = iota
	// HoldTenant holds back only the tenant of the task that got the 429,
	// for providers that limit each tenant (sub-account) on its own.
	HoldTenant
)

// ThrottleConfig configures a Throttle. Zero fields take the defaults given.
type ThrottleConfig struct {
	// FailureMode says what to do when the limiter cannot decide; default
	// FailClosed.
	FailureMode FailureMode

	// LimiterRetry is how long a task waits when the limiter could not
	// decide (FailClosed); default 1 s.
	LimiterRetry time.Duration

	// DecisionTimeout bounds each of the middleware's Redis calls for a
	// task (the provider hold's read, the limiter's decision): past it the
	// limiter has not decided, and FailureMode says what follows. Default
	// DefaultDecisionTimeout. The bound holds only if the Redis client
	// honours context deadlines (redis.Options.ContextTimeoutEnabled, set
	// by the worker command); otherwise its ReadTimeout bounds the call.
	DecisionTimeout time.Duration

	// MaxHold is the longest a denied task is held in the worker, waiting
	// for its place in line, instead of going back through asynq's retry
	// set; default 2 s, negative for never. The retry set keeps times in
	// whole seconds and moves due tasks every DelayedTaskCheckInterval, so a
	// task sent back for a place half a second away returns up to a second
	// late and the slot goes unused. A held task occupies one of the
	// worker's Concurrency slots while it waits.
	MaxHold time.Duration

	// DelayedTaskCheckInterval must be the asynq server's (default 5 s, as
	// asynq's). A task whose place is further than MaxHold goes back
	// through the retry set timed to return up to 1 s plus this interval
	// early, then waits in the worker for its place.
	DelayedTaskCheckInterval time.Duration

	// FetchInterval must be the asynq server's TaskCheckInterval (default
	// 1 s, as asynq's): a task moved to an empty queue can wait this long
	// to be fetched, so it is sent back this much earlier too.
	FetchInterval time.Duration

	// ProviderHold says whose sends a provider's 429 holds back, in every
	// worker, until its Retry-After; default HoldAccount.
	ProviderHold HoldScope

	// Logger receives the middleware's logs; nil means slog.Default().
	Logger *slog.Logger

	// OnDecision, when set, is called after every limiter call the
	// middleware makes: allowed, denied or failed. A task can cause more
	// than one (it is asked again after each wait for its place in line)
	// or none (its type has no rules, or a provider hold sent it back
	// first). It runs in the task's goroutine before the task goes on, so
	// it must be quick and safe for concurrent use: count, observe a
	// histogram. Nil means none.
	OnDecision func(DecisionEvent)
}

// DecisionEvent is one limiter call of the Throttle middleware, given to
// ThrottleConfig.OnDecision.
type DecisionEvent struct {
	// TaskType and Tenant are those of the task asked about.
	TaskType, Tenant string

	// Rules names the rules checked, in the order of Decision.Checks.
	Rules []string

	// Decision is the limiter's answer: Decision.Allowed, and when denied
	// Decision.Denied indexes Rules. It is the zero value when Err is set.
	Decision throttle.MultiDecision

	// Err is the limiter's error: Redis failed, or the task's context
	// ended during the call. The middleware then follows its FailureMode.
	Err error

	// Latency is how long the limiter call took, as the worker saw it.
	Latency time.Duration

	// FailedOpen reports that the limiter could not decide and the task
	// runs without a decision (FailOpen).
	FailedOpen bool

	// Shadow holds the decisions of the task's rules in shadow mode, made
	// once the task was admitted by the others (Rules, which never name a
	// shadow rule). A task whose rules are all in shadow mode has an event
	// with no Rules, allowed, and its Shadow decisions.
	Shadow []ShadowDecision
}

// ShadowDecision is what a rule in shadow mode decided for a task that ran
// anyway: Allowed, or the limiter's error (Err).
type ShadowDecision struct {
	Rule    string
	Allowed bool
	Err     error
}

// DefaultDecisionTimeout is ThrottleConfig.DecisionTimeout's default: a
// decision takes well under a millisecond on a healthy Redis, so a second
// means Redis is not answering.
const DefaultDecisionTimeout = time.Second

// maxHolds is how many times one run of a task may wait in the worker
// (for a provider hold or its place in line) before it goes back through
// the retry set: a waiting task can lose its place to a newcomer and be
// placed again. A run waits at most maxHolds × MaxHold in all.
const maxHolds = 3

// holdRefresh is how long a worker trusts what it read of a provider hold.
// Other workers see a new hold at most this late, and each worker reads a
// hold key at most this often.
const holdRefresh = 250 * time.Millisecond

// Throttle is the asynq middleware that asks the limiter before each task.
// It is safe for concurrent use.
type Throttle struct {
	limiter  *throttle.Limiter
	policies *PolicyFile
	logger   *slog.Logger
	mode     FailureMode
	backoff  time.Duration
	timeout  time.Duration // DecisionTimeout
	maxHold  time.Duration
	lead     time.Duration
	scope    HoldScope
	holds    *holdCache

	onDecision func(DecisionEvent) // ThrottleConfig.OnDecision, or nil

	// down is when the limiter last began to fail, zero while it answers:
	// the change is logged once each way, not once a task.
	downMu  sync.Mutex
	down    time.Time
	anyDown atomic.Bool // !down.IsZero(), read without the lock

	stopOnce sync.Once
	stopping chan struct{}
}

// NewThrottle returns the middleware for limiter and policies; a nil cfg
// takes every default.
func NewThrottle(limiter *throttle.Limiter, policies *PolicyFile, cfg *ThrottleConfig) (*Throttle, error) {
	if limiter == nil || policies == nil || policies.Current() == nil {
		return nil, errors.New("worker: NewThrottle needs a limiter and loaded policies")
	}
	if cfg == nil {
		cfg = &ThrottleConfig{}
	}
	t := &Throttle{
		limiter:  limiter,
		policies: policies,
		logger:   cfg.Logger,
		mode:     cfg.FailureMode,
		backoff:  cfg.LimiterRetry,
		timeout:  cfg.DecisionTimeout,
		maxHold:  cfg.MaxHold,
		scope:    cfg.ProviderHold,
		holds:    &holdCache{limiter: limiter, m: map[string]holdEntry{}},
		stopping: make(chan struct{}),

		onDecision: cfg.OnDecision,
	}
	if t.logger == nil {
		t.logger = slog.Default()
	}
	if t.backoff <= 0 {
		t.backoff = time.Second
	}
	if t.maxHold == 0 {
		t.maxHold = 2 * time.Second
	}
	if t.timeout <= 0 {
		t.timeout = DefaultDecisionTimeout
	}
	interval := cfg.DelayedTaskCheckInterval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	fetch := cfg.FetchInterval
	if fetch <= 0 {
		fetch = time.Second
	}
	// A task due at second S moves to its queue between S and S+interval,
	// is fetched within the fetch interval, and asynq rounds S down: aim S
	// one second plus both intervals (and 50 ms) before the place, so that
	// the task is in the worker before its place.
	t.lead = max(0, min(t.maxHold, time.Second+interval+fetch+50*time.Millisecond))
	return t, nil
}

// Stop ends every wait in progress and every later one: waiting tasks go
// back through the retry set at once, keeping their place in line, so that
// a worker shutting down does not wait for them. Call it before
// asynq.Server.Shutdown (Server.Run does). Safe to call more than once.
func (t *Throttle) Stop() { t.stopOnce.Do(func() { close(t.stopping) }) }

// Middleware wraps next: for each task it resolves the rules of the task's
// type and tenant, checks them all in one atomic limiter call, and runs next
// only if every rule allows.
//
// A denied task takes a place in line (see throttle.Limiter.AllowInLine), so
// a denied backlog comes back one free slot at a time. A place within
// MaxHold is waited for in the worker; a later one sends the task back
// through asynq's retry set, as a ThrottledError timed to return shortly
// before the place, and the task is then held for the rest.
//
// The quota unit is spent when the task is admitted, whether or not the
// provider then succeeds: a provider call that fails after admission used a
// slot, as it did at the provider.
//
// When the provider answers 429 (a ThrottledError with FromProvider), the
// task type's sends (or the tenant's, with HoldTenant) are held back in
// every worker until the provider's Retry-After.
//
// A task of type producer.TypeSMS or producer.TypeEmail whose payload is
// larger than producer.MaxPayload is archived before it reaches the limiter
// or the handler.
//
// Retry budget: the task's budget is the producer.HeaderMaxRetry header
// (asynq's MaxRetry minus one for tasks without it). A real failure with the
// budget spent is archived (asynq.SkipRetry); throttling never spends it.
func (t *Throttle) Middleware(next asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		tenant := task.Headers()[producer.HeaderTenant]
		if err := producer.ValidateTenant(tenant); err != nil {
			return fmt.Errorf("%w: task %s: header %s: %v", asynq.SkipRetry, task.Type(), producer.HeaderTenant, err)
		}
		if typ := task.Type(); typ == producer.TypeSMS || typ == producer.TypeEmail {
			// Refused before the limiter: an oversized task must not
			// spend a slot of the tenant's quota, nor be decoded.
			if err := producer.CheckPayloadSize(task.Payload()); err != nil {
				return fmt.Errorf("%w: task %s: %v", asynq.SkipRetry, typ, err)
			}
		}
		holdKey := t.holdKey(task.Type(), tenant)
		if err := t.admit(ctx, holdKey, task.Type(), tenant, t.policies.Current().For(task.Type(), tenant)); err != nil {
			return err
		}
		err := runHandler(ctx, next, task)
		var te *ThrottledError
		if errors.As(err, &te) && te.FromProvider {
			if herr := t.holds.hold(ctx, holdKey, te.RetryAfter); herr != nil {
				t.logger.Warn("could not share the provider's hold with other workers", "key", holdKey, "err", herr)
			}
		}
		if err == nil || te != nil || errors.Is(err, asynq.SkipRetry) {
			return err
		}
		if retried, budget := retries(ctx, task); retried >= budget {
			return fmt.Errorf("%w: retry budget of %d spent: %w", asynq.SkipRetry, budget, err)
		}
		return err
	})
}

// runHandler runs next, turning a panic into an error: asynq recovers
// panics outside the middleware, where the retry budget is not checked, so
// a panicking task would get one retry more than its budget.
func runHandler(ctx context.Context, next asynq.Handler, task *asynq.Task) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in the %s handler: %v\n%s", task.Type(), r, debug.Stack())
		}
	}()
	return next.ProcessTask(ctx, task)
}

// holdKey is the limiter key of the provider hold for a task.
func (t *Throttle) holdKey(taskType, tenant string) string {
	if t.scope == HoldTenant {
		return "provider/" + taskType + "/" + tenant
	}
	return "provider/" + taskType
}

// admit waits out a provider hold on holdKey, then asks the limiter for the
// applied rules (none: the task is not throttled); nil means run the task.
// taskType and tenant name the task to the OnDecision hook.
// The hold is read again before each question, as a hold can begin while a
// task waits for its place. All waits of one run together are at most
// maxHolds, each within MaxHold and within half the time left before the
// task's deadline: asynq counts a deadline that passes as a failure, which
// would spend the retry budget.
func (t *Throttle) admit(ctx context.Context, holdKey, taskType, tenant string, all []Applied) error {
	var applied, shadow []Applied
	for _, a := range all {
		if a.Shadow {
			shadow = append(shadow, a)
		} else {
			applied = append(applied, a)
		}
	}
	checks := make([]throttle.Check, len(applied))
	for i, a := range applied {
		checks[i] = a.Check
	}
	id, _ := asynq.GetTaskID(ctx)
	for waits := 0; ; waits++ {
		if err := ctx.Err(); err != nil {
			return &ThrottledError{RetryAfter: t.backoff, By: "task cancelled while waiting", Err: err}
		}
		left, err := t.holdLeft(ctx, holdKey)
		if err != nil {
			// A hold that cannot be read counts as none: the limiter's own
			// failure mode then decides.
			t.logger.Debug("could not read the provider hold", "key", holdKey, "err", err)
		}
		if left > 0 {
			if waits < maxHolds && t.wait(ctx, left) {
				continue
			}
			return &ThrottledError{RetryAfter: left, By: "provider hold"}
		}
		if len(checks) == 0 {
			if len(shadow) > 0 {
				asked := time.Now()
				e := DecisionEvent{TaskType: taskType, Tenant: tenant, Decision: throttle.MultiDecision{Decision: throttle.Decision{Allowed: true}, Denied: -1}}
				e.Shadow = t.shadow(ctx, shadow)
				e.Latency = time.Since(asked)
				t.decided(e, nil)
			}
			return nil
		}
		asked := time.Now()
		md, err := t.decide(ctx, id, checks)
		e := DecisionEvent{TaskType: taskType, Tenant: tenant, Decision: md, Err: err, Latency: time.Since(asked),
			FailedOpen: err != nil && ctx.Err() == nil && t.mode == FailOpen}
		if err == nil && md.Allowed && len(shadow) > 0 {
			e.Shadow = t.shadow(ctx, shadow)
		}
		t.decided(e, applied)
		latency := e.Latency
		if err == nil || ctx.Err() == nil {
			t.availability(err, latency)
		}
		if err != nil {
			t.logger.Debug("limiter did not decide", "task", id, "latency", latency, "err", err)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			// Not the limiter's fault: never run a task without a decision
			// because its own context ended (asynq may have requeued it).
			return &ThrottledError{RetryAfter: t.backoff, By: "task cancelled while waiting", Err: err}
		case err != nil && t.mode == FailOpen:
			t.logger.Warn("limiter unavailable; running the task without a decision (fail-open)",
				"task", id, "type", taskType, "tenant", tenant, "latency", latency, "err", err)
			return nil
		case err != nil:
			return &ThrottledError{RetryAfter: t.backoff, By: "limiter unavailable", Err: err}
		case md.Allowed:
			return nil
		}
		start := time.Now()
		if waits < maxHolds && t.wait(ctx, md.RetryAfter) {
			continue
		}
		// Not waited for, or the wait was cut short: back through the retry
		// set, shortly before the place.
		back := md.RetryAfter - time.Since(start)
		if back > t.maxHold {
			back -= t.lead
		}
		return &ThrottledError{RetryAfter: max(back, 0), By: "rule " + applied[md.Denied].Rule}
	}
}

// shadow asks the limiter for each rule in shadow mode, on its own and
// within the decision timeout: a shadow rule admits and records the task
// when its window has room, and never holds it back. Nothing waits for a
// place: shadow rules take none.
func (t *Throttle) shadow(ctx context.Context, shadow []Applied) []ShadowDecision {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	out := make([]ShadowDecision, len(shadow))
	for i, a := range shadow {
		d, err := t.limiter.AllowN(ctx, a.Check.Key, a.Check.Policy, a.Check.Cost)
		out[i] = ShadowDecision{Rule: a.Rule, Allowed: err == nil && d.Allowed, Err: err}
		if err != nil {
			t.logger.Debug("shadow rule did not decide", "rule", a.Rule, "err", err)
		}
	}
	return out
}

// holdLeft reads the provider hold on key within the decision timeout.
func (t *Throttle) holdLeft(ctx context.Context, key string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	return t.holds.left(ctx, key)
}

// decide asks the limiter for checks within the decision timeout.
func (t *Throttle) decide(ctx context.Context, id string, checks []throttle.Check) (throttle.MultiDecision, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	return t.limiter.AllowInLine(ctx, id, checks)
}

// availability logs when the limiter stops answering (err set) and when
// it answers again, once each: during an outage every task of every worker
// fails to get a decision, and one line says so better than thousands.
func (t *Throttle) availability(err error, latency time.Duration) {
	if err == nil && !t.anyDown.Load() {
		return
	}
	t.downMu.Lock()
	defer t.downMu.Unlock()
	switch {
	case err != nil && t.down.IsZero():
		t.down = time.Now()
		t.anyDown.Store(true)
		what := "tasks wait and come back (fail-closed)"
		if t.mode == FailOpen {
			what = "tasks run without a decision (fail-open)"
		}
		t.logger.Warn("limiter unavailable: "+what, "latency", latency, "err", err)
	case err == nil && !t.down.IsZero():
		t.logger.Info("limiter available again", "unavailable_for", time.Since(t.down).Round(time.Millisecond))
		t.down = time.Time{}
		t.anyDown.Store(false)
	}
}

// decided gives one limiter call, e without its Rules, to the OnDecision
// hook, if there is one.
func (t *Throttle) decided(e DecisionEvent, applied []Applied) {
	if t.onDecision == nil {
		return
	}
	e.Rules = make([]string, len(applied))
	for i, a := range applied {
		e.Rules[i] = a.Rule
	}
	if e.Err != nil {
		e.Decision = throttle.MultiDecision{}
	}
	t.onDecision(e)
}

// wait waits d in the worker when d is within MaxHold and within half the
// time left before ctx's deadline, and reports whether it did; false when
// d is too long or the wait was cut short by ctx or by Stop.
func (t *Throttle) wait(ctx context.Context, d time.Duration) bool {
	if t.maxHold < 0 || d > t.maxHold {
		return false
	}
	if deadline, ok := ctx.Deadline(); ok && d > time.Until(deadline)/2 {
		return false
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
	case <-t.stopping:
	}
	return false
}

// retries returns how many real failures the task has had and its budget.
func retries(ctx context.Context, task *asynq.Task) (retried, budget int) {
	retried, _ = asynq.GetRetryCount(ctx)
	if n, err := strconv.Atoi(task.Headers()[producer.HeaderMaxRetry]); err == nil && n >= 0 {
		return retried, n
	}
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	return retried, max(maxRetry-1, 0)
}

// ErrorHandler returns asynq's Config.ErrorHandler for Sluice: throttled
// tasks are logged at debug level, failures at warn, archived tasks at
// error.
func ErrorHandler(logger *slog.Logger) asynq.ErrorHandler {
	if logger == nil {
		logger = slog.Default()
	}
	return asynq.ErrorHandlerFunc(func(ctx context.Context, task *asynq.Task, err error) {
		id, _ := asynq.GetTaskID(ctx)
		retried, _ := asynq.GetRetryCount(ctx)
		attrs := []any{"task", id, "type", task.Type(), "tenant", task.Headers()[producer.HeaderTenant], "err", err}
		switch {
		case IsThrottled(err):
			logger.Debug("task throttled", attrs...)
		case errors.Is(err, asynq.SkipRetry):
			logger.Error("task archived", attrs...)
		default:
			logger.Warn("task failed; will retry", append(attrs, "retried", retried)...)
		}
	})
}
