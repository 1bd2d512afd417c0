package provider

import (
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// ThrottledError is returned by a task handler when the task must wait: the
// limiter denied it, or the provider answered 429. It is not a failure: it
// does not spend the task's retry budget, and the task runs again after
// RetryAfter through asynq's retry set, keeping its ID. For a limiter
// denial, RetryAfter can be shortly before the task's place in line: the
// worker that runs it then waits in process for the rest (see
// worker.ThrottleConfig.MaxHold).
//
// Its message starts "throttled by " and By: the worker's retry set reads
// the reason back from the last error asynq keeps for a task.
type ThrottledError struct {
	// RetryAfter is when the task should run again.
	RetryAfter time.Duration

	// By names what held the task back: a rule of the policies file, the
	// provider, or the limiter being unreachable.
	By string

	// Err is the cause, when there is one (a Redis error, a provider reply).
	Err error

	// FromProvider is set by providers for a 429: the worker's Throttle
	// middleware then holds back other tasks of the same account (or
	// tenant) in every worker until RetryAfter.
	FromProvider bool
}

// Error returns "throttled by <By>; back in <RetryAfter>", and the cause
// after a colon when there is one.
func (e *ThrottledError) Error() string {
	msg := fmt.Sprintf("throttled by %s; back in %v", e.By, e.RetryAfter.Round(time.Millisecond))
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause, nil when there is none.
func (e *ThrottledError) Unwrap() error { return e.Err }

// IsThrottled reports whether err is, or wraps, a ThrottledError.
func IsThrottled(err error) bool {
	var te *ThrottledError
	return errors.As(err, &te)
}

// Permanent marks err as one that retrying cannot fix: the task is archived.
// It wraps err with asynq.SkipRetry, so errors.Is finds both; an err that
// already matches SkipRetry, or nil, is returned as it is.
func Permanent(err error) error {
	if err == nil || errors.Is(err, asynq.SkipRetry) {
		return err
	}
	return fmt.Errorf("%w: %w", asynq.SkipRetry, err)
}
