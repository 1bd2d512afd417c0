package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
)

// ThrottledError is returned by a task handler when the task must wait: the
// limiter denied it, or the provider answered 429. It is not a failure: it
// does not spend the task's retry budget, and the task runs again after
// RetryAfter through asynq's retry set, keeping its ID.
type ThrottledError struct {
	// RetryAfter is when the task should run again.
	RetryAfter time.Duration

	// By names what held the task back: a rule of the policies file, the
	// provider, or the limiter being unreachable.
	By string

	// Err is the cause, when there is one (a Redis error, a provider reply).
	Err error
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
// denied again). Other errors get fallback, or asynq's default when nil.
func RetryDelay(fallback asynq.RetryDelayFunc) asynq.RetryDelayFunc {
	if fallback == nil {
		fallback = asynq.DefaultRetryDelayFunc
	}
	return func(n int, err error, task *asynq.Task) time.Duration {
		var te *ThrottledError
		if errors.As(err, &te) {
			return ceilToSecond(time.Now(), te.RetryAfter)
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

// Throttle is the asynq middleware that asks the limiter before each task.
// It is safe for concurrent use.
type Throttle struct {
	limiter  *throttle.Limiter
	policies *PolicyFile
	logger   *slog.Logger
	mode     FailureMode
	backoff  time.Duration
}

// NewThrottle returns the middleware for limiter and policies. A nil logger
// means slog.Default().
func NewThrottle(limiter *throttle.Limiter, policies *PolicyFile, logger *slog.Logger) (*Throttle, error) {
	if limiter == nil || policies == nil || policies.Current() == nil {
		return nil, errors.New("worker: NewThrottle needs a limiter and loaded policies")
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Throttle{limiter: limiter, policies: policies, logger: logger, backoff: time.Second}, nil
}

// Middleware wraps next: for each task it resolves the rules of the task's
// type and tenant, checks them all in one atomic limiter call, and runs next
// only if every rule allows. A denied task returns a ThrottledError with the
// time of its place in line (see throttle.Limiter.AllowInLine), so a denied
// backlog comes back one free slot at a time.
//
// The quota unit is spent when the task is admitted, whether or not the
// provider then succeeds: a provider call that fails after admission used a
// slot, as it did at the provider.
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
		if applied := t.policies.Current().For(task.Type(), tenant); len(applied) > 0 {
			if err := t.admit(ctx, task, applied); err != nil {
				return err
			}
		}
		err := next.ProcessTask(ctx, task)
		if err == nil || IsThrottled(err) || errors.Is(err, asynq.SkipRetry) {
			return err
		}
		if retried, budget := retries(ctx, task); retried >= budget {
			return fmt.Errorf("%w: retry budget of %d spent: %w", asynq.SkipRetry, budget, err)
		}
		return err
	})
}

// admit asks the limiter; nil means run the task.
func (t *Throttle) admit(ctx context.Context, task *asynq.Task, applied []Applied) error {
	checks := make([]throttle.Check, len(applied))
	for i, a := range applied {
		checks[i] = a.Check
	}
	id, _ := asynq.GetTaskID(ctx)
	md, err := t.limiter.AllowInLine(ctx, id, checks)
	switch {
	case err != nil && t.mode == FailOpen:
		t.logger.Warn("limiter unavailable; running the task without a decision (fail-open)", "task", id, "err", err)
		return nil
	case err != nil:
		return &ThrottledError{RetryAfter: t.backoff, By: "limiter unavailable", Err: err}
	case !md.Allowed:
		return &ThrottledError{RetryAfter: md.RetryAfter, By: "rule " + applied[md.Denied].Rule}
	}
	return nil
}

// retries returns how many real failures the task has had and its budget.
func retries(ctx context.Context, task *asynq.Task) (retried, budget int) {
	retried, _ = asynq.GetRetryCount(ctx)
	if n, err := strconv.Atoi(task.Headers()[producer.HeaderMaxRetry]); err == nil && n >= 0 {
		return retried, n
	}
	max, _ := asynq.GetMaxRetry(ctx)
	return retried, max - 1
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
