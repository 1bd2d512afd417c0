package worker

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// SyncHook is a go-redis hook for the Redis client of an asynq server,
// which works around a bug of asynq v0.26: when Redis is unreachable as a
// task ends, asynq retries the write that ends it (done, retry or archive)
// every few seconds until the task's lease ends, but with a context it has
// already cancelled, so no retry can succeed. The task then stays active
// until asynq's recoverer takes it, a minute or more after the outage, and
// runs it again: a task sent during the outage is sent twice, and one sent
// back by the limiter comes back late and spends a retry (the recoverer
// counts a failure).
//
// With the hook, a command or pipeline whose context is already done when
// it starts runs with that context's values but without its cancellation
// or deadline, bounded by the client's ReadTimeout and WriteTimeout. A
// call with a context still live is untouched, so the limiter's decision
// timeout holds. NewServer adds the hook to its client; add it with
// rdb.AddHook(worker.SyncHook{}) to the client of your own asynq server.
type SyncHook struct{}

var _ redis.Hook = SyncHook{}

// live returns ctx, or when it is done a context with its values that is
// never done.
func live(ctx context.Context) context.Context {
	if ctx.Err() != nil {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// DialHook returns next unchanged: the pool dials with the context the
// other two hooks have already replaced.
func (SyncHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook runs a command whose context is done without it.
func (SyncHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { return next(live(ctx), cmd) }
}

// ProcessPipelineHook runs a pipeline whose context is done without it.
func (SyncHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { return next(live(ctx), cmds) }
}
