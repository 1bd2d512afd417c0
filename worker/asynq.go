package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
)

// IsFailure is asynq's Config.IsFailure for Sluice: a throttled task has not
// failed, so its retry count stays and failure statistics stay clean.
func IsFailure(err error) bool { return !provider.IsThrottled(err) }

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
		var te *provider.ThrottledError
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
		case provider.IsThrottled(err):
			logger.Debug("task throttled", attrs...)
		case errors.Is(err, asynq.SkipRetry):
			logger.Error("task archived", attrs...)
		default:
			logger.Warn("task failed; will retry", append(attrs, "retried", retried)...)
		}
	})
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
