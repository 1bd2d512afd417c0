package bench

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// roundTrips is a go-redis hook that counts the round trips of a client:
// one a command, one a pipeline or transaction, whoever sends it (asynq's
// server as well as the limiter when they share the client). A script
// call that Redis answers NOSCRIPT, and that go-redis sends again as EVAL,
// counts two.
type roundTrips struct{ n atomic.Int64 }

var _ redis.Hook = (*roundTrips)(nil)

// count returns the round trips so far.
func (r *roundTrips) count() int64 { return r.n.Load() }

// DialHook returns next unchanged: dialing is not a round trip of a call.
func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts one round trip a command.
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts one round trip a pipeline.
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}
