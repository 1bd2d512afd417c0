package throttle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of BatchConfig.
const (
	DefaultMaxBatch     = 64
	DefaultMaxPipelines = 4
)

// BatchConfig configures WithBatching. Zero fields take the defaults given;
// negative ones are an error (ErrInvalidConfig).
type BatchConfig struct {
	// MaxBatch is the most decisions sent in one pipeline; default
	// DefaultMaxBatch, 64. Redis runs a pipeline's scripts one after
	// another without serving other clients in between, so a larger batch
	// saves round trips at the cost of longer stalls for everyone else.
	MaxBatch int

	// MaxPipelines is the most pipelines the Limiter has in flight at
	// once; default DefaultMaxPipelines, 4 (at 8 callers, 2 left Redis
	// waiting between pipelines: docs/LIMITER.md, "The hot path"). A
	// decision that arrives while
	// that many are in flight waits for one of them to return, and goes
	// in the next pipeline with every decision that arrived meanwhile.
	// Each pipeline in flight holds a connection of the client.
	MaxPipelines int
}

// WithBatching sets how the Limiter sends decisions that are asked for at
// the same time to Redis together, as one pipeline of script calls, instead
// of one round trip each: fewer system calls in Redis and in the client, so
// more decisions a second when many goroutines share a Limiter. A Limiter
// batches with the defaults unless WithoutBatching says otherwise. Nothing
// waits for a batch to fill: a decision asked for while fewer than
// MaxPipelines pipelines are in flight is sent at once, alone if need be, and
// the ones asked for while the pipelines are busy go together in the next.
// Each decision is still its own atomic script, with its own reply, and
// decides exactly what it would unbatched. The batching runs in the callers'
// goroutines: there is no background goroutine and nothing to close. A nil
// cfg takes every default.
//
// Contexts: a call whose context ends before its decision was sent returns
// the context's error and is not sent. A call whose context ends after it
// was sent returns the context's error at once, but its decision may have
// been recorded (as when a context ends during an unbatched call); the
// pipeline itself goes on for the sake of the others, until Redis replies
// or the latest deadline of its calls passes. The caller whose goroutine
// sends a pipeline returns when the pipeline does.
//
// Errors: a Redis error of one script call goes to its caller alone; an
// error of the whole pipeline (the connection failed) to every caller in
// it. A script missing from Redis's cache (after a restart or SCRIPT FLUSH)
// is sent again with EVAL, which loads it, as the unbatched call does.
func WithBatching(cfg *BatchConfig) Option {
	return optionFunc(func(l *Limiter) {
		var c BatchConfig
		if cfg != nil {
			c = *cfg
		}
		if c.MaxBatch < 0 || c.MaxPipelines < 0 {
			l.err = fmt.Errorf("throttle: %w: batching with MaxBatch %d and MaxPipelines %d: neither may be negative",
				ErrInvalidConfig, c.MaxBatch, c.MaxPipelines)
			return
		}
		if c.MaxBatch == 0 {
			c.MaxBatch = DefaultMaxBatch
		}
		if c.MaxPipelines == 0 {
			c.MaxPipelines = DefaultMaxPipelines
		}
		l.batch = &batcher{rdb: l.rdb, maxBatch: c.MaxBatch, maxPipelines: c.MaxPipelines}
	})
}

// WithoutBatching makes the Limiter send every decision alone, one round
// trip each, as it did before batching was the default: for comparison,
// or for a caller that wants no call to share a pipeline with another.
func WithoutBatching() Option {
	return optionFunc(func(l *Limiter) { l.batch = nil })
}

// batcher sends concurrent decisions to Redis together (WithBatching), by
// group commit: a caller that finds fewer than maxPipelines pipelines in
// flight sends its decision at once; the others queue in pending. The
// caller that sent a pipeline, when it returns, takes the oldest pending
// calls (up to maxBatch) as the next batch and hands it to the first of
// them, which sends it and hands on in turn. So pending is never left
// without a sender, every caller sends at most one pipeline, and no
// goroutine outlives its call.
type batcher struct {
	rdb          redis.UniversalClient
	maxBatch     int
	maxPipelines int

	mu        sync.Mutex
	pipelines int     // pipelines in flight or being built; pending is empty unless it is maxPipelines
	pending   []*call // calls waiting for a batch, oldest first
}

// call is one decision and its way through the batcher.
type call struct {
	ctx  context.Context
	keys []string
	args []any

	// wake gets one value: true when the call must send batch, false when
	// its reply and err are set. A call is woken at most once.
	wake  chan bool
	reply []int64
	err   error

	state callState // guarded by batcher.mu
	batch []*call   // the batch to send, from when state is leading; guarded by batcher.mu
}

// callState is where a call is; every change is made under batcher.mu.
type callState uint8

const (
	waiting   callState = iota // in pending
	queued                     // in a batch that has not been sent yet
	leading                    // in a batch that it is to send
	sent                       // in a pipeline; the reply comes with wake
	abandoned                  // its context ended before it was sent; never sent
)

// errSenderPanicked is the error of the calls of a pipeline whose sender
// panicked; the panic goes on in the sender's goroutine.
var errSenderPanicked = errors.New("the goroutine sending the pipeline panicked")

// eval runs the decision script with keys and args, in a pipeline with
// those of other callers, and returns its reply.
func (b *batcher) eval(ctx context.Context, keys []string, args []any) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.pipelines < b.maxPipelines {
		// Nothing is pending: send at once, alone, as an unbatched call
		// does. Then hand on what arrived meanwhile.
		b.pipelines++
		b.mu.Unlock()
		defer b.done()
		return scriptReply(scriptFor(args).Run(ctx, b.rdb, keys, args...))
	}
	c := &call{ctx: ctx, keys: keys, args: args, wake: make(chan bool, 1), state: waiting}
	b.pending = append(b.pending, c)
	b.mu.Unlock()

	select {
	case lead := <-c.wake:
		if lead {
			b.send(c, c.batch)
		}
		return c.reply, c.err
	case <-ctx.Done():
		return b.abandon(c)
	}
}

// abandon returns for a waiting call whose context has ended: it leaves
// pending, or its batch, or, when its batch was handed to it to send, hands
// it on; once sent, it is only no longer waited for.
func (b *batcher) abandon(c *call) ([]int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch c.state {
	case waiting:
		i := slices.Index(b.pending, c)
		b.pending = slices.Delete(b.pending, i, i+1)
	case leading:
		c.state = abandoned
		b.handOn(c.batch)
	case sent:
		select {
		case <-c.wake:
			return c.reply, c.err // the reply came after all
		default:
			return nil, c.ctx.Err()
		}
	}
	c.state = abandoned
	return nil, c.ctx.Err()
}

// send sends batch, whose sender is self, as one pipeline, and wakes every
// call in it with its reply; then it hands the next batch on. Calls
// abandoned meanwhile are left out, and so is any whose context has ended:
// it returns the context's error.
func (b *batcher) send(self *call, batch []*call) {
	defer b.done()
	b.mu.Lock()
	calls := batch[:0]
	for _, c := range batch {
		if c.state == abandoned {
			continue
		}
		if err := c.ctx.Err(); err != nil {
			// Its caller sees the context end and returns.
			c.state, c.err = abandoned, err
			continue
		}
		c.state = sent
		calls = append(calls, c)
	}
	b.mu.Unlock()

	replied := false
	defer func() {
		if !replied {
			// The pipeline panicked (in a hook of the client, say): its
			// callers must not wait for ever. The panic goes on.
			for _, c := range calls {
				c.reply, c.err = nil, errSenderPanicked
				if c != self {
					c.wake <- false
				}
			}
		}
	}()
	if len(calls) > 0 {
		b.run(self.ctx, calls)
	}
	replied = true
	for _, c := range calls {
		if c != self {
			c.wake <- false
		}
	}
}

// done ends the turn of a sender: it hands the next batch on.
func (b *batcher) done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next()
}

// run sends calls as one pipeline of EVALSHA and sets each call's reply or
// error; the calls whose script Redis did not have go again with EVAL. ctx
// is the sender's.
func (b *batcher) run(ctx context.Context, calls []*call) {
	if len(calls) == 1 {
		// A pipeline of one is a plain call, with its caller's context.
		c := calls[0]
		c.reply, c.err = scriptReply(scriptFor(c.args).Run(c.ctx, b.rdb, c.keys, c.args...))
		return
	}
	ctx, cancel := pipelineContext(ctx, calls)
	defer cancel()
	cmds := make([]*redis.Cmd, len(calls))
	pipe := b.rdb.Pipeline()
	for i, c := range calls {
		cmds[i] = scriptFor(c.args).EvalSha(c.ctx, pipe, c.keys, c.args...)
	}
	_, err := pipe.Exec(ctx)
	var again []int
	for i, c := range calls {
		if isNoScript(cmds[i].Err()) {
			again = append(again, i)
			continue
		}
		c.reply, c.err = reply(cmds[i], err)
	}
	if len(again) == 0 {
		return
	}
	pipe = b.rdb.Pipeline()
	for _, i := range again {
		c := calls[i]
		cmds[i] = scriptFor(c.args).Eval(c.ctx, pipe, c.keys, c.args...)
	}
	_, err = pipe.Exec(ctx)
	for _, i := range again {
		calls[i].reply, calls[i].err = reply(cmds[i], err)
	}
}

// pipelineContext returns the context of the pipeline of calls sent with
// the sender's ctx: the values of ctx, no cancellation (every call's reply
// rides on the pipeline), and the latest deadline of the calls when every
// one has a deadline.
func pipelineContext(ctx context.Context, calls []*call) (context.Context, context.CancelFunc) {
	ctx = context.WithoutCancel(ctx)
	var latest time.Time
	for _, c := range calls {
		d, ok := c.ctx.Deadline()
		if !ok {
			return ctx, func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(ctx, latest)
}

// reply reads the reply of one script call of a pipeline whose Exec
// returned err.
func reply(cmd *redis.Cmd, err error) ([]int64, error) {
	if cmd.Err() == nil && cmd.Val() == nil && err != nil {
		// Never sent: the pipeline failed before it.
		return nil, err
	}
	return scriptReply(cmd)
}

// isNoScript reports whether err is Redis's NOSCRIPT: the script is not in
// its cache.
func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// next hands the oldest pending calls to the first of them to send, or
// ends a pipeline's turn when none are pending. b.mu must be held.
func (b *batcher) next() {
	if len(b.pending) == 0 {
		b.pipelines--
		return
	}
	n := min(len(b.pending), b.maxBatch)
	batch := slices.Clone(b.pending[:n])
	rest := copy(b.pending, b.pending[n:])
	clear(b.pending[rest:])
	b.pending = b.pending[:rest]
	for _, c := range batch {
		c.state = queued
	}
	b.handOn(batch)
}

// handOn gives batch to its first call still queued to send, or, when every
// call of it was abandoned, takes the next. b.mu must be held.
func (b *batcher) handOn(batch []*call) {
	for _, c := range batch {
		if c.state == queued {
			c.state = leading
			c.batch = batch
			c.wake <- true
			return
		}
	}
	b.next()
}
