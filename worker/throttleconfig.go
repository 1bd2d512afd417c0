package worker

import (
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/throttle"
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

// Fairness says how a Throttle serves waiting tasks.
type Fairness int

const (
	// FairnessOn serves waiting tasks through fair lines
	// (docs/FAIRNESS.md): each task type's shared rules are shared among
	// the waiting tenants by weight, the most urgent priority first, and a
	// tenant that starts waiting is served within a slot. It needs
	// ThrottleConfig.QueueRedis. The default.
	FairnessOn Fairness = iota
	// FairnessOff serves them first come, first served: a denied task
	// takes the next free place in line, after every place given before.
	FairnessOff
)

// ThrottleConfig configures a Throttle. Zero fields take the defaults given.
type ThrottleConfig struct {
	// Fairness says how waiting tasks are served; FairnessOn, the default,
	// takes effect only with QueueRedis.
	Fairness Fairness

	// QueueRedis is the Redis of the asynq queues (the server's client),
	// which the fair lines move granted tasks in. Without it the Throttle
	// serves first come, first served. Server sets it.
	QueueRedis redis.UniversalClient

	// Shards is the number of shards of the layout the Throttle runs
	// (docs/SCALING.md), at most layout.MaxShards: a task's rules and fair
	// line live in its shard's limiter group, and a global rule is leased
	// to the shards. 0 is 1, every key in one group. More than one needs
	// QueueRedis, and RunLines running: it balances the leases, and no
	// shard admits a global rule's tasks until it has a share. A Server
	// serves every shard's queues and writes the layout to Redis; the
	// worker command chooses it (--shards).
	Shards int

	// Park is how long a task waiting in a fair line stays in asynq's retry
	// set before asynq brings it back by itself, should no grant come
	// first (its line lost in a failover, no worker running the lines);
	// default throttle.DefaultPark.
	Park time.Duration

	// FailureMode says what to do when the limiter cannot decide; default
	// FailClosed.
	FailureMode throttle.FailureMode

	// LimiterRetry is how long a task waits when the limiter could not
	// decide (FailClosed); default DefaultLimiterRetry.
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
	// set; default DefaultMaxHold, negative for never. The retry set keeps times in
	// whole seconds and moves due tasks every DelayedTaskCheckInterval, so a
	// task sent back for a place half a second away returns up to a second
	// late and the slot goes unused. A held task occupies one of the
	// worker's Concurrency slots while it waits.
	MaxHold time.Duration

	// DelayedTaskCheckInterval must be the asynq server's. A task whose
	// place is further than MaxHold goes back through the retry set timed
	// to return up to 1 s plus this interval early, then waits in the
	// worker for its place. Default: asynq's, 5 s, for the middleware on a
	// server of the caller's; in a Server, DefaultCheckInterval, which the
	// Server gives asynq too.
	DelayedTaskCheckInterval time.Duration

	// FetchInterval must be the asynq server's TaskCheckInterval: a task
	// moved to an empty queue can wait this long to be fetched, so it is
	// sent back this much earlier too. Default: asynq's, 1 s; in a Server,
	// DefaultFetchInterval, which the Server gives asynq too.
	FetchInterval time.Duration

	// ProviderHold says whose sends a provider's 429 holds back, in every
	// worker, until its Retry-After; default HoldAccount.
	ProviderHold HoldScope

	// MaxProviderHold is the longest a provider's 429 holds sends back: a
	// longer Retry-After is cut to it, for the hold and for the task, and
	// logged at WARN with the provider's value. Default
	// DefaultMaxProviderHold.
	MaxProviderHold time.Duration

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

	// TracerProvider makes the spans of each task's run, linked to the
	// span of its enqueue (docs/TRACING.md); nil means
	// otel.GetTracerProvider(), the no-op one unless the program sets
	// another.
	TracerProvider trace.TracerProvider
}
