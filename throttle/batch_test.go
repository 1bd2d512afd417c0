package throttle

// White-box tests of the batcher: they look at its pending calls to know
// when callers are queued, and stop pipelines in a client hook to know what
// is in flight, so that every batch they check is made on purpose rather
// than by luck of scheduling.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/lua"
)

// gate is a client hook that stops every pipeline, and every script call
// outside one, before it is sent, until the test lets it pass: the test
// sees each batch arrive, with its commands, and decides when it goes.
type gate struct {
	arrived chan []redis.Cmder
	pass    chan struct{}
	done    chan struct{} // closed at the end of the test: everything passes
}

// addGate adds a gate to rdb, opened for good when t ends. It loads the
// decision script first (on every node of a cluster), so that no call
// fails with NOSCRIPT and goes again with EVAL, which would be a batch more.
func addGate(t *testing.T, rdb redis.UniversalClient) *gate {
	t.Helper()
	if err := lua.Decide.Load(context.Background(), rdb).Err(); err != nil {
		t.Fatalf("load the script: %v", err)
	}
	g := &gate{arrived: make(chan []redis.Cmder), pass: make(chan struct{}), done: make(chan struct{})}
	rdb.AddHook(g)
	t.Cleanup(func() { close(g.done) })
	return g
}

func (g *gate) stop(cmds []redis.Cmder) {
	if !slices.ContainsFunc(cmds, isScript) {
		return // such as the CLIENT SETINFO of a new connection
	}
	select {
	case g.arrived <- cmds:
		select {
		case <-g.pass:
		case <-g.done:
		}
	case <-g.done:
	}
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		g.stop([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		g.stop(cmds)
		return next(ctx, cmds)
	}
}

// next returns the commands of the next batch to arrive, which waits.
func (g *gate) next(t *testing.T) []redis.Cmder {
	t.Helper()
	select {
	case cmds := <-g.arrived:
		return cmds
	case <-time.After(10 * time.Second):
		t.Fatal("no batch arrived in 10 s")
		return nil
	}
}

// open lets the batch that arrived last go.
func (g *gate) open() { g.pass <- struct{}{} }

// isScript reports whether cmd runs a script.
func isScript(cmd redis.Cmder) bool { return cmd.Name() == "evalsha" || cmd.Name() == "eval" }

// names returns the command names of cmds: "evalsha" or "eval".
func names(cmds []redis.Cmder) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = c.Name()
	}
	return out
}

// waiting returns the number of calls waiting for a batch.
func (b *batcher) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// idle reports whether no pipeline is in flight and no call waits.
func (b *batcher) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pipelines == 0 && len(b.pending) == 0
}

// waitFor waits until cond holds, polling, or fails t after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// result is what one call returned.
type result struct {
	d   Decision
	err error
}

// goAllow calls l.Allow in a goroutine of its own; the result comes on the
// channel.
func goAllow(ctx context.Context, l *Limiter, key string, p Policy) <-chan result {
	ch := make(chan result, 1)
	go func() {
		d, err := l.Allow(ctx, key, p)
		ch <- result{d, err}
	}()
	return ch
}

// get waits for a result, or fails t after 10 s.
func get(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no result in 10 s")
		return result{}
	}
}

// ownClient returns a client of a Redis of t's own, for tests that flush
// its scripts or pause it.
func ownClient(t *testing.T, opt func(*redis.Options)) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(redistest.Own(t))
	if err != nil {
		t.Fatal(err)
	}
	if opt != nil {
		opt(o)
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// queue starts a call of Allow on each key, one after another, each once
// the one before waits for a batch: pending then holds them in this order.
func queue(t *testing.T, ctxs []context.Context, l *Limiter, keys []string, p Policy) []<-chan result {
	t.Helper()
	before := l.batch.waiting()
	out := make([]<-chan result, len(keys))
	for i, k := range keys {
		ctx := context.Background()
		if ctxs != nil {
			ctx = ctxs[i]
		}
		out[i] = goAllow(ctx, l, k, p)
		waitFor(t, fmt.Sprintf("%d calls waiting", before+i+1), func() bool { return l.batch.waiting() == before+i+1 })
	}
	return out
}

func TestWithBatchingConfig(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{})
	cases := []struct {
		name          string
		cfg           *BatchConfig
		batch, flight int
		bad           bool
	}{
		{"nil takes the defaults", nil, DefaultMaxBatch, DefaultMaxPipelines, false},
		{"zero fields take the defaults", &BatchConfig{MaxBatch: 5}, 5, DefaultMaxPipelines, false},
		{"both set", &BatchConfig{MaxBatch: 1, MaxPipelines: 7}, 1, 7, false},
		{"negative batch", &BatchConfig{MaxBatch: -1}, 0, 0, true},
		{"negative pipelines", &BatchConfig{MaxPipelines: -2}, 0, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := NewLimiter(rdb, WithBatching(tc.cfg))
			if tc.bad {
				if _, err := l.Allow(context.Background(), "k", PerSecond(1)); !errors.Is(err, ErrInvalidConfig) {
					t.Errorf("Allow: error = %v, want ErrInvalidConfig", err)
				}
				return
			}
			if l.err != nil {
				t.Fatal(l.err)
			}
			if got, want := l.batch.maxBatch, tc.batch; got != want {
				t.Errorf("max batch %d, want %d", got, want)
			}
			if got, want := l.batch.maxPipelines, tc.flight; got != want {
				t.Errorf("max pipelines %d, want %d", got, want)
			}
		})
	}
}

// TestBatchingByDefault: a Limiter batches with the defaults unless
// WithoutBatching is given; of the two options the last wins.
func TestBatchingByDefault(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{})
	cases := []struct {
		name    string
		opts    []Option
		batches bool
	}{
		{"no option", nil, true},
		{"WithoutBatching", []Option{WithoutBatching()}, false},
		{"WithBatching after WithoutBatching", []Option{WithoutBatching(), WithBatching(&BatchConfig{MaxBatch: 3})}, true},
		{"WithoutBatching after WithBatching", []Option{WithBatching(nil), WithoutBatching()}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := NewLimiter(rdb, tc.opts...)
			if got := l.batch != nil; got != tc.batches {
				t.Fatalf("batches %v, want %v", got, tc.batches)
			}
			if l.batch != nil && tc.opts == nil && (l.batch.maxBatch != DefaultMaxBatch || l.batch.maxPipelines != DefaultMaxPipelines) {
				t.Errorf("batcher %d a batch, %d pipelines; want the defaults", l.batch.maxBatch, l.batch.maxPipelines)
			}
		})
	}
}

// TestBatchingAdmitsExactlyTheLimit hammers one key from many goroutines
// through one batching Limiter: exactly Limit calls get through, each
// admitted call sees a count of its own, and every call is answered.
func TestBatchingAdmitsExactlyTheLimit(t *testing.T) {
	t.Parallel()
	const goroutines, each, limit = 64, 20, 100
	p := PerMinute(limit)
	for _, b := range []struct {
		name string
		rdb  redis.UniversalClient
	}{{"single", redistest.Client(t)}, {"cluster", redistest.Cluster(t)}} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			// Loaded, so that no call goes again with EVAL.
			if err := lua.Decide.Load(context.Background(), b.rdb).Err(); err != nil {
				t.Fatal(err)
			}
			var pipelines, cmds atomic.Int64
			b.rdb.AddHook(countPipelines{&pipelines, &cmds})
			l := NewLimiter(b.rdb, WithPrefix(redistest.Prefix(t)), WithBatching(&BatchConfig{MaxBatch: 16}))
			var mu sync.Mutex
			var counts []int
			var denied int
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for range goroutines {
				wg.Go(func() {
					for range each {
						d, err := l.Allow(context.Background(), "hot", p)
						if err != nil {
							errs <- err
							return
						}
						mu.Lock()
						if d.Allowed {
							counts = append(counts, d.Count)
						} else {
							denied++
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if got := len(counts); got != limit {
				t.Errorf("%d of %d calls allowed, want exactly %d", got, goroutines*each, limit)
			}
			if got, want := len(counts)+denied, goroutines*each; got != want {
				t.Errorf("%d calls answered, want %d", got, want)
			}
			// The k-th admission saw k units in the window: a reply given to
			// the wrong caller, or to two, would repeat or skip a count.
			slices.Sort(counts)
			for i, c := range counts {
				if c != i+1 {
					t.Fatalf("admitted calls saw counts %v, want 1 to %d once each", counts, limit)
				}
			}
			rk, err := l.redisKey("hot")
			if err != nil {
				t.Fatal(err)
			}
			if got := b.rdb.ZCard(context.Background(), rk.window).Val(); got != limit {
				t.Errorf("ZCARD = %d, want %d", got, limit)
			}
			if got, want := cmds.Load(), int64(goroutines*each); got != want {
				t.Errorf("%d script calls sent, want one a call: %d", got, want)
			}
			if !l.batch.idle() {
				t.Error("the batcher is not idle after every call returned")
			}
			t.Logf("%d calls in %d pipelines", cmds.Load(), pipelines.Load())
		})
	}
}

// countPipelines counts the pipelines a client sends and the script calls
// in them.
type countPipelines struct{ pipelines, cmds *atomic.Int64 }

func (h countPipelines) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countPipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			h.pipelines.Add(1)
			h.cmds.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h countPipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if n := int64(len(slices.DeleteFunc(slices.Clone(cmds), func(c redis.Cmder) bool { return !isScript(c) }))); n > 0 {
			h.pipelines.Add(1)
			h.cmds.Add(n)
		}
		return next(ctx, cmds)
	}
}

// TestBatchingSendsWaitingCallsTogether: calls that arrive while the
// pipelines are busy go together in the next pipeline, at most MaxBatch to
// a pipeline, oldest first; and each caller gets the reply of its own key,
// which holds a count unlike any other's.
func TestBatchingSendsWaitingCallsTogether(t *testing.T) {
	t.Parallel()
	for _, b := range []struct {
		name string
		rdb  redis.UniversalClient
	}{{"single", redistest.Client(t)}, {"cluster", redistest.Cluster(t)}} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			prefix := redistest.Prefix(t)
			p := PerMinute(100)
			// Key i holds i units before the test: its call sees i+1.
			const n = 7
			keys := make([]string, n)
			unbatched := NewLimiter(b.rdb, WithPrefix(prefix), WithoutBatching())
			for i := range keys {
				keys[i] = fmt.Sprintf("key-%d", i)
				if i > 0 {
					if _, err := unbatched.AllowN(ctx, keys[i], p, i); err != nil {
						t.Fatal(err)
					}
				}
			}
			g := addGate(t, b.rdb)
			l := NewLimiter(b.rdb, WithPrefix(prefix), WithBatching(&BatchConfig{MaxBatch: 3, MaxPipelines: 1}))

			first := goAllow(ctx, l, "first", p)
			if got := g.next(t); len(got) != 1 {
				t.Fatalf("first pipeline has %d commands, want 1: nothing waits for a batch to fill", len(got))
			}
			results := queue(t, nil, l, keys, p)
			g.open()
			if r := get(t, first); r.err != nil || r.d.Count != 1 {
				t.Fatalf("first call = %+v, %v", r.d, r.err)
			}
			var sizes []int
			for len(sizes) < 3 {
				sizes = append(sizes, len(g.next(t)))
				g.open()
			}
			if want := []int{3, 3, 1}; !slices.Equal(sizes, want) {
				t.Errorf("pipelines of %v commands, want %v", sizes, want)
			}
			for i, ch := range results {
				r := get(t, ch)
				if r.err != nil {
					t.Errorf("%s: %v", keys[i], r.err)
					continue
				}
				if !r.d.Allowed || r.d.Count != i+1 || r.d.Remaining != 100-(i+1) {
					t.Errorf("%s: got %+v, want allowed with count %d: its own key's reply", keys[i], r.d, i+1)
				}
			}
			if !l.batch.idle() {
				t.Error("the batcher is not idle after every call returned")
			}
		})
	}
}

// TestBatchingReloadsAFlushedScript: after SCRIPT FLUSH (or a restart) the
// pipeline's EVALSHA calls fail with NOSCRIPT; they go again with EVAL, all
// in one pipeline, and every caller gets its decision. Not parallel: the
// flush empties the cache of the test cluster, which other tests share.
func TestBatchingReloadsAFlushedScript(t *testing.T) {
	for _, b := range []struct {
		name string
		rdb  redis.UniversalClient
	}{{"single", ownClient(t, nil)}, {"cluster", redistest.Cluster(t)}} {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			p := PerMinute(10)
			g := addGate(t, b.rdb)
			l := NewLimiter(b.rdb, WithPrefix(redistest.Prefix(t)), WithBatching(&BatchConfig{MaxPipelines: 1}))
			first := goAllow(ctx, l, "first", p)
			g.next(t)
			keys := []string{"a", "b", "c"}
			results := queue(t, nil, l, keys, p)
			g.open()
			if r := get(t, first); r.err != nil {
				t.Fatal(r.err)
			}

			batch := g.next(t)
			if got, want := names(batch), []string{"evalsha", "evalsha", "evalsha"}; !slices.Equal(got, want) {
				t.Fatalf("batch = %v, want %v", got, want)
			}
			flush(t, b.rdb)
			g.open()
			again := g.next(t)
			if got, want := names(again), []string{"eval", "eval", "eval"}; !slices.Equal(got, want) {
				t.Fatalf("after NOSCRIPT the batch went again as %v, want %v", got, want)
			}
			for _, c := range batch {
				if err := c.Err(); !isNoScript(err) {
					t.Errorf("first attempt: error %v, want NOSCRIPT", err)
				}
			}
			g.open()
			for i, ch := range results {
				if r := get(t, ch); r.err != nil || !r.d.Allowed || r.d.Count != 1 {
					t.Errorf("%s: %+v, %v", keys[i], r.d, r.err)
				}
			}
			// EVAL cached the script: the next batch runs as EVALSHA.
			next := goAllow(ctx, l, "a", p)
			if got := names(g.next(t)); !slices.Equal(got, []string{"evalsha"}) {
				t.Errorf("next batch = %v, want [evalsha]", got)
			}
			g.open()
			if r := get(t, next); r.err != nil || r.d.Count != 2 {
				t.Errorf("a again: %+v, %v", r.d, r.err)
			}
		})
	}
}

// flush empties the script cache of every node of rdb.
func flush(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.ScriptFlush(ctx).Err() })
	case *redis.Client:
		err = c.ScriptFlush(ctx).Err()
	}
	if err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
}

// TestBatchingCancelledWhileWaitingIsNotSent: a caller whose context ends
// while it waits for a batch returns at once, with the context's error, and
// its decision is never sent.
func TestBatchingCancelledWhileWaitingIsNotSent(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	ctx := context.Background()
	p := PerMinute(10)
	g := addGate(t, rdb)
	l := NewLimiter(rdb, WithPrefix(redistest.Prefix(t)), WithBatching(&BatchConfig{MaxPipelines: 1}))

	first := goAllow(ctx, l, "first", p)
	g.next(t)
	cctx, cancel := context.WithCancel(ctx)
	results := queue(t, []context.Context{ctx, cctx, ctx}, l, []string{"a", "cancelled", "c"}, p)
	cancel()
	// While the first pipeline is still held.
	if r := get(t, results[1]); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled call: %+v, %v; want context.Canceled", r.d, r.err)
	}
	g.open()
	if got, want := len(g.next(t)), 2; got != want {
		t.Errorf("next batch has %d calls, want %d: the cancelled one left", got, want)
	}
	g.open()
	for _, i := range []int{0, 2} {
		if r := get(t, results[i]); r.err != nil || !r.d.Allowed {
			t.Errorf("call %d: %+v, %v", i, r.d, r.err)
		}
	}
	if r := get(t, first); r.err != nil {
		t.Error(r.err)
	}
	rk, _ := l.redisKey("cancelled")
	if n := rdb.Exists(ctx, rk.window).Val(); n != 0 {
		t.Error("the cancelled call was recorded")
	}
	if !l.batch.idle() {
		t.Error("the batcher is not idle after every call returned")
	}
}

// TestBatchingCancelledAfterSending: a caller whose context ends after its
// decision was sent returns at once with the context's error; its decision
// was recorded nonetheless, and the others of its pipeline get theirs.
func TestBatchingCancelledAfterSending(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	ctx := context.Background()
	p := PerMinute(10)
	g := addGate(t, rdb)
	l := NewLimiter(rdb, WithPrefix(redistest.Prefix(t)), WithBatching(&BatchConfig{MaxPipelines: 1}))

	first := goAllow(ctx, l, "first", p)
	g.next(t)
	cctx, cancel := context.WithCancel(ctx)
	results := queue(t, []context.Context{ctx, cctx}, l, []string{"sender", "cancelled"}, p)
	g.open()
	if got := len(g.next(t)); got != 2 {
		t.Fatalf("batch of %d calls, want 2", got)
	}
	cancel() // the pipeline is held in the hook, its calls sent
	if r := get(t, results[1]); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled call: %+v, %v; want context.Canceled", r.d, r.err)
	}
	g.open()
	if r := get(t, results[0]); r.err != nil || !r.d.Allowed {
		t.Errorf("sender: %+v, %v", r.d, r.err)
	}
	if r := get(t, first); r.err != nil {
		t.Error(r.err)
	}
	rk, _ := l.redisKey("cancelled")
	if n := rdb.ZCard(ctx, rk.window).Val(); n != 1 {
		t.Errorf("the cancelled call's window holds %d entries, want 1: it was sent", n)
	}
}

// TestBatchingCancelledSender: a caller picked to send a batch whose
// context has ended does not send its own decision. Either it sees its
// context end first and hands the batch to the next caller in it, or it
// sees the batch first and sends the others. The test plays the part of the
// callers' goroutines, whose race between the two wake-ups it cannot steer.
func TestBatchingCancelledSender(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	p := PerMinute(10)
	ctx := context.Background()
	cases := []struct {
		name string
		// picked plays the cancelled caller picked to send; it returns
		// that caller's error.
		picked func(t *testing.T, b *batcher, cancelled, next *call) error
	}{{
		name: "hands the batch on",
		picked: func(t *testing.T, b *batcher, cancelled, next *call) error {
			_, err := b.abandon(cancelled)
			select {
			case lead := <-next.wake:
				if !lead {
					t.Fatal("the next call was woken with a reply, not the batch")
				}
			default:
				t.Fatal("the batch was not handed on")
			}
			b.send(next, next.batch)
			return err
		},
	}, {
		name: "sends the others",
		picked: func(t *testing.T, b *batcher, cancelled, next *call) error {
			b.send(cancelled, cancelled.batch)
			if lead := <-next.wake; lead {
				t.Fatal("the next call was handed the batch, not its reply")
			}
			return cancelled.err
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := NewLimiter(rdb, WithPrefix(redistest.Prefix(t)))
			cctx, cancel := context.WithCancel(ctx)
			cancelled, next := request(t, l, cctx, "cancelled", p), request(t, l, ctx, "next", p)
			// A batcher whose one pipeline is returning, with the two calls
			// waiting.
			b := &batcher{rdb: rdb, maxBatch: 8, maxPipelines: 1, pipelines: 1, pending: []*call{cancelled, next}}
			b.done()
			if lead := <-cancelled.wake; !lead {
				t.Fatal("the first waiting call was not picked to send the batch")
			}
			cancel()
			if err := tc.picked(t, b, cancelled, next); !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled call: error %v, want context.Canceled", err)
			}
			if next.err != nil || len(next.reply) == 0 || next.reply[0] != 1 {
				t.Errorf("next: reply %v, error %v", next.reply, next.err)
			}
			for key, want := range map[string]int64{"cancelled": 0, "next": 1} {
				rk, _ := l.redisKey(key)
				if got := rdb.Exists(ctx, rk.window).Val(); got != want {
					t.Errorf("%s: EXISTS = %d, want %d", key, got, want)
				}
			}
			if !b.idle() {
				t.Error("the batcher is not idle")
			}
		})
	}
}

// request returns a waiting call of Allow(ctx, key, p) on l, with the keys
// and arguments of the script as decide makes them. It catches them in a
// batcher that never sends, and lets that call go.
func request(t *testing.T, l *Limiter, ctx context.Context, key string, p Policy) *call {
	t.Helper()
	catch := *l
	catch.batch = &batcher{} // no pipelines: every call waits
	cctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := catch.Allow(cctx, key, p)
		done <- err
	}()
	waitFor(t, "the call to wait", func() bool { return catch.batch.waiting() == 1 })
	catch.batch.mu.Lock()
	c := catch.batch.pending[0]
	catch.batch.mu.Unlock()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caught call returned %v", err)
	}
	return &call{ctx: ctx, keys: c.keys, args: c.args, wake: make(chan bool, 1), state: waiting}
}

// TestBatchingErrors: a Redis error of one script call goes to its caller
// alone; a failure of the whole pipeline reaches every caller in it.
func TestBatchingErrors(t *testing.T) {
	t.Parallel()
	rdb := ownClient(t, func(o *redis.Options) {
		o.ReadTimeout = 200 * time.Millisecond
		o.MaxRetries = -1
	})
	ctx := context.Background()
	p := PerMinute(10)
	g := addGate(t, rdb)
	l := NewLimiter(rdb, WithPrefix(redistest.Prefix(t)), WithBatching(&BatchConfig{MaxPipelines: 1}))

	// A window key that holds a list, which no limiter script uses: its
	// script call fails with WRONGTYPE.
	rk, _ := l.redisKey("wrongtype")
	if err := rdb.LPush(ctx, rk.window, "x").Err(); err != nil {
		t.Fatal(err)
	}
	first := goAllow(ctx, l, "first", p)
	g.next(t)
	results := queue(t, nil, l, []string{"a", "wrongtype", "c"}, p)
	g.open()
	if got := len(g.next(t)); got != 3 {
		t.Fatalf("batch of %d calls, want 3", got)
	}
	g.open()
	for i, want := range []bool{false, true, false} {
		r := get(t, results[i])
		if failed := r.err != nil; failed != want {
			t.Errorf("call %d: %+v, %v; want an error: %v", i, r.d, r.err, want)
		}
		if want && !redis.HasErrorPrefix(r.err, "WRONGTYPE") && !errors.As(r.err, new(redis.Error)) {
			t.Errorf("call %d: error %v, want Redis's", i, r.err)
		}
	}
	if r := get(t, first); r.err != nil {
		t.Fatal(r.err)
	}

	// Redis stops answering while a batch is in flight: every caller in it
	// gets the time-out.
	first = goAllow(ctx, l, "first", p)
	g.next(t)
	results = queue(t, nil, l, []string{"a", "b", "c"}, p)
	g.open()
	if r := get(t, first); r.err != nil {
		t.Fatal(r.err)
	}
	if got := len(g.next(t)); got != 3 {
		t.Fatalf("batch of %d calls, want 3", got)
	}
	admin := redis.NewClient(rdb.Options())
	defer admin.Close()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", 5000, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	defer admin.Do(ctx, "CLIENT", "UNPAUSE")
	g.open()
	for i := range results {
		r := get(t, results[i])
		var ne net.Error
		if !errors.As(r.err, &ne) || !ne.Timeout() {
			t.Errorf("call %d: %+v, %v; want a time-out", i, r.d, r.err)
		}
	}
	if !l.batch.idle() {
		t.Error("the batcher is not idle after every call returned")
	}
}

// TestBatchingAnswersAsUnbatched: AllowMulti, AllowInLine and Peek go
// through the batcher and decide as they do without it.
func TestBatchingAnswersAsUnbatched(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	ctx := context.Background()
	checks := []Check{{Key: "x", Policy: PerMinute(2), Cost: 1}, {Key: "y", Policy: PerMinute(3), Cost: 1}}
	var got [2][]MultiDecision
	for i, opts := range [][]Option{{WithoutBatching()}, nil} {
		l := NewLimiter(rdb, append(opts, WithPrefix(redistest.Prefix(t)))...)
		for range 3 {
			md, err := l.AllowInLine(ctx, "task", checks)
			if err != nil {
				t.Fatal(err)
			}
			got[i] = append(got[i], md)
		}
		md, err := l.AllowMulti(ctx, checks)
		if err != nil {
			t.Fatal(err)
		}
		d, err := l.Peek(ctx, "y", checks[1].Policy)
		if err != nil {
			t.Fatal(err)
		}
		got[i] = append(got[i], md, MultiDecision{Decision: d})
	}
	// Times differ by the microseconds between the runs.
	for i := range got[0] {
		a, b := got[0][i], got[1][i]
		if a.Allowed != b.Allowed || a.Count != b.Count || a.Denied != b.Denied || a.Remaining != b.Remaining || len(a.Checks) != len(b.Checks) {
			t.Errorf("decision %d: unbatched %+v, batched %+v", i, a, b)
		}
	}
}

// BenchmarkAllowBatched measures Allow over 10,000 keys with and without
// batching; bench/cmd/bench compares them with the round-trip floor.
func BenchmarkAllowBatched(b *testing.B) {
	opt, err := redis.ParseURL(redistest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	opt.PoolSize = 256
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	prefix := redistest.Prefix(b)
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%d", i)
	}
	ctx := context.Background()
	if err := lua.Decide.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, k := range redistest.Keys(b, rdb, prefix) {
			rdb.Del(ctx, k)
		}
	}()
	p := PerSecond(100)
	for _, batched := range []bool{false, true} {
		opts := []Option{WithPrefix(prefix)}
		if !batched {
			opts = append(opts, WithoutBatching())
		}
		l := NewLimiter(rdb, opts...)
		for _, callers := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("batched=%v/callers=%d", batched, callers), func(b *testing.B) {
				b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				var i atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := l.Allow(ctx, keys[i.Add(1)%int64(len(keys))], p); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
