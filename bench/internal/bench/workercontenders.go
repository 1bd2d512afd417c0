package bench

import (
	"context"
	"log/slog"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// textbookSource is the least an exact sliding-window log of a task's
// rules does, one sorted set a rule, with no line, no reply beyond yes or
// no and nothing shared between calls: TIME, then for every key
// ZREMRANGEBYSCORE and ZCARD, and when all have room ZADD and PEXPIRE.
// KEYS are the rules' keys; ARGV[1] the limit, ARGV[2] the window in µs,
// ARGV[3] a name unique to the call (the task's ID). Reply: 1 admitted, 0
// not.
const textbookSource = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, window = tonumber(ARGV[1]), tonumber(ARGV[2])
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window)
  if redis.call('ZCARD', KEYS[i]) >= limit then return 0 end
end
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], now, t[1] .. t[2] .. ARGV[3])
  redis.call('PEXPIRE', KEYS[i], math.floor(window / 1000) + 1)
end
return 1
`

// textbookScript runs textbookSource.
var textbookScript = redis.NewScript(textbookSource)

// workerLimit and workerWindowUs are the rules of workerPolicies, for the
// textbook contender.
const (
	workerLimit    = 100000
	workerWindowUs = 1000000
)

// workerContender is one of the servers measured: wrap returns the handler
// it runs around the counting one; ctx ends with the round.
type workerContender struct {
	name, about string
	wrap        func(ctx context.Context, h asynq.Handler) (asynq.Handler, error)
}

// workerContenders returns the servers that runWorker compares, plain
// first: the handler alone; with a floor script call a task; with the
// textbook script on the task's two rules; and behind a Throttle on a
// limiter under limiterPrefix with the rules of parsed, through the fair
// lines as worker.NewServer runs it, and first come, first served.
func workerContenders(rdb *redis.Client, limiterPrefix string, parsed *policies.Policies) []workerContender {
	before := func(h asynq.Handler, call func(ctx context.Context, task *asynq.Task) error) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
			if err := call(ctx, task); err != nil {
				return err
			}
			return h.ProcessTask(ctx, task)
		})
	}
	throttled := func(fairness worker.Fairness) func(context.Context, asynq.Handler) (asynq.Handler, error) {
		return func(ctx context.Context, h asynq.Handler) (asynq.Handler, error) {
			// A Throttle of its own each round, as a worker that starts,
			// on a limiter as worker.NewServer's: the default, batching.
			l := throttle.NewLimiter(rdb, throttle.WithPrefix(limiterPrefix))
			t, err := worker.NewThrottle(l, policies.Static(parsed), &worker.ThrottleConfig{
				DelayedTaskCheckInterval: workerDelayedInterval,
				FetchInterval:            workerFetchInterval,
				QueueRedis:               rdb,
				Fairness:                 fairness,
				Logger:                   slog.New(slog.DiscardHandler),
			})
			if err != nil {
				return nil, err
			}
			go t.RunLines(ctx)
			return t.Middleware(h), nil
		}
	}
	return []workerContender{{
		name:  "plain",
		about: "asynq running the handler",
		wrap:  func(_ context.Context, h asynq.Handler) (asynq.Handler, error) { return h, nil },
	}, {
		name:  "floor",
		about: "plain, and before the handler one call of the cheapest script (`return 1`) on the task's tenant key: one round trip more",
		wrap: func(_ context.Context, h asynq.Handler) (asynq.Handler, error) {
			return before(h, func(ctx context.Context, task *asynq.Task) error {
				key := limiterPrefix + "floor:" + task.Headers()[producer.HeaderTenant]
				return floorScript.Run(ctx, rdb, []string{key}).Err()
			}), nil
		},
	}, {
		name: "textbook",
		about: "plain, and before the handler one call of the textbook sliding-window log on the task's two rules " +
			"(TIME, ZREMRANGEBYSCORE and ZCARD a rule, then ZADD and PEXPIRE a rule): the fewest commands an exact log needs",
		wrap: func(_ context.Context, h asynq.Handler) (asynq.Handler, error) {
			return before(h, func(ctx context.Context, task *asynq.Task) error {
				id, _ := asynq.GetTaskID(ctx)
				keys := []string{limiterPrefix + "{textbook}:tenant:" + task.Headers()[producer.HeaderTenant], limiterPrefix + "{textbook}:global"}
				return textbookScript.Run(ctx, rdb, keys, workerLimit, workerWindowUs, id).Err()
			}), nil
		},
	}, {
		name: "sluice",
		about: "the handler behind `worker.Throttle`'s `Middleware` as `worker.NewServer` sets it up: " +
			"the fair lines (their dispatch loop running), on a limiter that batches",
		wrap: throttled(worker.FairnessOn),
	}, {
		name:  "sluice fcfs",
		about: "the same with `Fairness: worker.FairnessOff`: the limiter's own line, first come, first served",
		wrap:  throttled(worker.FairnessOff),
	}}
}
