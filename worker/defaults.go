package worker

import "time"

// The defaults of the worker's settings, each named once: Config and
// ThrottleConfig fill a zero field with them, and the worker command's
// flags show them.
const (
	// DefaultConcurrency is Config.Concurrency's default: tasks run at once
	// in one process.
	DefaultConcurrency = 10

	// DefaultCheckInterval is a Server's DelayedTaskCheckInterval: how often
	// due retries move to their queue. asynq's own default,
	// asynqDelayedTaskCheckInterval, would let a throttled task come back
	// up to 5 s late.
	DefaultCheckInterval = 250 * time.Millisecond

	// DefaultFetchInterval is a Server's FetchInterval: how often an idle
	// worker looks at its empty queues (asynq's TaskCheckInterval, whose
	// default is asynqTaskCheckInterval).
	DefaultFetchInterval = 100 * time.Millisecond

	// DefaultShutdownTimeout is Config.ShutdownTimeout's default: how long
	// running tasks may finish at shutdown before asynq puts them back.
	DefaultShutdownTimeout = 30 * time.Second

	// DefaultMaxHold is ThrottleConfig.MaxHold's default: the longest a
	// denied task waits in the worker for its place in line.
	DefaultMaxHold = 2 * time.Second

	// DefaultMaxProviderHold is ThrottleConfig.MaxProviderHold's default:
	// the longest a provider's 429 holds sends back, whatever its
	// Retry-After says (a year, by mistake, would stop every tenant).
	DefaultMaxProviderHold = 10 * time.Minute

	// DefaultLimiterRetry is ThrottleConfig.LimiterRetry's default: how long
	// a task waits when the limiter could not decide (fail-closed).
	DefaultLimiterRetry = time.Second

	// DefaultDecisionTimeout is ThrottleConfig.DecisionTimeout's default: a
	// decision takes well under a millisecond on a healthy Redis, so a
	// second means Redis is not answering.
	DefaultDecisionTimeout = time.Second
)

// asynq's defaults of the two intervals, which ThrottleConfig assumes when
// it is not told the asynq server's: the middleware on a server of the
// caller's, configured as asynq configures it.
const (
	asynqDelayedTaskCheckInterval = 5 * time.Second
	asynqTaskCheckInterval        = time.Second
)
