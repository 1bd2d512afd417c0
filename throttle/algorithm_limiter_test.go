package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// The tests in this file hold keys to the counter algorithms through the
// Limiter: Policy.Algorithm chooses the algorithm, and its state lives in
// the key RedisKeyFor names. algorithm_test.go tests the Lua functions
// themselves, to the microsecond.

// counterAlgorithms are the algorithms that keep a few numbers per key.
// Tests whose counts must not move use MaxWindow: no fixed window ends and
// no GCRA unit frees while they run.
var counterAlgorithms = []throttle.Algorithm{throttle.SlidingWindow, throttle.GCRA, throttle.FixedWindow}

func keyFor(t *testing.T, l *throttle.Limiter, key string, a throttle.Algorithm) string {
	t.Helper()
	rkey, err := l.RedisKeyFor(key, a)
	if err != nil {
		t.Fatalf("RedisKeyFor(%q, %s): %v", key, a, err)
	}
	return rkey
}

// TestAlgorithmsThroughAllowN fills a key of 5 an hour under each counter
// algorithm and checks the denial that follows: its Count, its RetryAfter
// (bounded by the Redis clock read around the calls), and that the state is
// a hash at the algorithm's key with a TTL of the ResetAfter, the log's key
// untouched.
func TestAlgorithmsThroughAllowN(t *testing.T) {
	t.Parallel()
	const limit = 5
	w := time.Hour
	hour := w.Microseconds()
	// retry returns the RetryAfter each algorithm gives, in µs, when the 5
	// units were admitted at first and the denial comes at now.
	retry := map[throttle.Algorithm]func(first, now int64) int64{
		// Emission interval 12 min: the burst's TAT is first + 1 h, and
		// one more unit fits when it is 48 min ahead.
		throttle.GCRA: func(first, now int64) int64 { return first + hour/limit - now },
		// The next hour.
		throttle.FixedWindow: func(_, now int64) int64 { return now - now%hour + hour - now },
		// The next hour, once its weight of the 5 is 4: 12 min in.
		throttle.SlidingWindow: func(_, now int64) int64 { return now - now%hour + hour - now + hour/limit },
	}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		for _, alg := range counterAlgorithms {
			t.Run(string(alg), func(t *testing.T) {
				p := throttle.Policy{Limit: limit, Window: w, Algorithm: alg}
				key := "tenant:" + string(alg)
				before := redisNow(t, rdb)
				if d := mustAllowN(t, l, key, p, 2); !d.Allowed || d.Count != 2 || d.Remaining != 3 {
					t.Fatalf("AllowN 2 = %+v, want allowed, Count 2", d)
				}
				afterFirst := redisNow(t, rdb)
				if d := mustAllowN(t, l, key, p, 3); !d.Allowed || d.Count != 5 || d.Remaining != 0 {
					t.Fatalf("AllowN 3 = %+v, want allowed, Count 5", d)
				}
				beforeDenial := redisNow(t, rdb)
				d := mustAllowN(t, l, key, p, 1)
				after := redisNow(t, rdb)
				if d.Allowed || d.Count != limit || d.Remaining != 0 || d.Limit != limit {
					t.Fatalf("Allow on a full key = %+v, want denied, Count %d", d, limit)
				}
				// The figure depends on when the calls ran: it lies between
				// the values for the earliest and the latest clock.
				lo, hi := retry[alg](before, after), retry[alg](afterFirst, beforeDenial)
				if got := d.RetryAfter.Microseconds(); got < lo || got > hi {
					t.Errorf("RetryAfter = %v, want %v to %v", d.RetryAfter, time.Duration(lo)*time.Microsecond, time.Duration(hi)*time.Microsecond)
				}
				if d.ResetAfter <= 0 || d.ResetAfter > 2*w {
					t.Errorf("ResetAfter = %v", d.ResetAfter)
				}

				rkey := keyFor(t, l, key, alg)
				if typ := rdb.Type(ctx, rkey).Val(); typ != "hash" {
					t.Errorf("TYPE %s = %q, want hash", rkey, typ)
				}
				if n := rdb.Exists(ctx, redisKey(t, l, key)).Val(); n != 0 {
					t.Errorf("the sliding log's key of %q exists: the policy's algorithm was not used", key)
				}
				// The TTL was set in whole milliseconds at the last admission,
				// and Redis counts it down on its millisecond clock: up to 2 ms
				// over the ResetAfter of the later denial, plus how long that
				// admission's call took (its PEXPIRE may run after its TIME).
				slack := 2*time.Millisecond + us(beforeDenial-afterFirst)
				if ttl := rdb.PTTL(ctx, rkey).Val(); ttl <= 0 || ttl > d.ResetAfter+slack {
					t.Errorf("PTTL = %v, want up to the ResetAfter %v and %v", ttl, d.ResetAfter, slack)
				}
			})
		}
	})
}

// TestAlgorithmsAreAllOrNothing combines a log check and a counter check in
// one AllowMulti: when either denies, neither records anything.
func TestAlgorithmsAreAllOrNothing(t *testing.T) {
	t.Parallel()
	log := throttle.PerHour(1)
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		for _, alg := range counterAlgorithms {
			t.Run(string(alg), func(t *testing.T) {
				counter := throttle.Policy{Limit: 1, Window: throttle.MaxWindow, Algorithm: alg}
				call := func(logKey, counterKey string) throttle.MultiDecision {
					t.Helper()
					md, err := l.AllowMulti(ctx, []throttle.Check{
						{Key: logKey, Policy: log, Cost: 1},
						{Key: counterKey, Policy: counter, Cost: 1},
					})
					if err != nil {
						t.Fatal(err)
					}
					return md
				}
				k := func(name string) string { return string(alg) + ":" + name }
				if md := call(k("log-a"), k("counter-a")); !md.Allowed {
					t.Fatalf("first call: %+v, want allowed", md)
				}
				// The counter is full: the fresh log records nothing.
				if md := call(k("log-b"), k("counter-a")); md.Allowed || md.Denied != 1 {
					t.Errorf("full counter: %+v, want denied by check 1", md)
				}
				if n := rdb.Exists(ctx, redisKey(t, l, k("log-b"))).Val(); n != 0 {
					t.Errorf("the log recorded a request the %s check denied", alg)
				}
				// The log is full: the fresh counter records nothing.
				if md := call(k("log-a"), k("counter-b")); md.Allowed || md.Denied != 0 {
					t.Errorf("full log: %+v, want denied by check 0", md)
				}
				if n := rdb.Exists(ctx, keyFor(t, l, k("counter-b"), alg)).Val(); n != 0 {
					t.Errorf("the %s check recorded a request the log denied", alg)
				}
			})
		}
	})
}

// TestAlgorithmsKeepStatesApart holds one key to the same limit under each
// algorithm in turn: no call meets another's key (no WRONGTYPE), each
// algorithm admits its own unit, and Reset clears them all.
func TestAlgorithmsKeepStatesApart(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		const key = "shared"
		for round := range 2 {
			for _, alg := range throttle.Algorithms() {
				p := throttle.Policy{Limit: 1, Window: throttle.MaxWindow, Algorithm: alg}
				d, err := l.Allow(ctx, key, p)
				if err != nil {
					t.Fatalf("round %d, %s: %v", round, alg, err)
				}
				if want := round == 0; d.Allowed != want {
					t.Errorf("round %d, %s: Allowed %v, want %v", round, alg, d.Allowed, want)
				}
			}
		}
		if keys := rdbKeys(t, rdb, prefix); len(keys) != len(throttle.Algorithms()) {
			t.Errorf("keys = %q, want one per algorithm", keys)
		}
		if err := l.Reset(ctx, key); err != nil {
			t.Fatal(err)
		}
		if keys := rdbKeys(t, rdb, prefix); len(keys) != 0 {
			t.Errorf("keys after Reset = %q, want none", keys)
		}
		for _, alg := range throttle.Algorithms() {
			if d := mustAllowN(t, l, key, throttle.Policy{Limit: 1, Window: throttle.MaxWindow, Algorithm: alg}, 1); !d.Allowed {
				t.Errorf("%s after Reset: %+v, want allowed", alg, d)
			}
		}
	})
}

// TestPeekOfCounters: Peek reports a counter's count and records nothing.
func TestPeekOfCounters(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		for _, alg := range counterAlgorithms {
			p := throttle.Policy{Limit: 3, Window: throttle.MaxWindow, Algorithm: alg}
			key := "peek:" + string(alg)
			mustAllowN(t, l, key, p, 2)
			before := snapshot(t, rdb, keyFor(t, l, key, alg))
			for range 3 {
				d, err := l.Peek(ctx, key, p)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed || d.Count != 2 || d.Remaining != 1 {
					t.Errorf("%s: Peek = %+v, want allowed with Count 2", alg, d)
				}
			}
			if after := snapshot(t, rdb, keyFor(t, l, key, alg)); after != before {
				t.Errorf("%s: Peek changed the key: %+v, then %+v", alg, before, after)
			}
		}
	})
}

// TestCounterLimitsAboveTheLog: a counter takes limits up to
// MaxCounterLimit, and an AllowN of millions of units, in a key of constant
// size; the log refuses them. The window is as long as a policy allows, so
// the GCRA frees no unit between the two calls (one every 32 s, not 8.6 ms).
func TestCounterLimitsAboveTheLog(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		for _, alg := range counterAlgorithms {
			p := throttle.Policy{Limit: throttle.MaxCounterLimit, Window: throttle.MaxWindow, Algorithm: alg}
			key := "big:" + string(alg)
			// One unit first: were the policy's algorithm not used, the
			// whole limit would be ten million members of a sorted set,
			// written in one script that holds Redis for many seconds.
			mustAllowN(t, l, key, p, 1)
			if typ := rdb.Type(ctx, keyFor(t, l, key, alg)).Val(); typ != "hash" {
				t.Fatalf("%s: TYPE of the algorithm's key = %q, want hash: the Limiter does not use the policy's algorithm", alg, typ)
			}
			d := mustAllowN(t, l, key, p, throttle.MaxCounterLimit-1)
			if !d.Allowed || d.Count != throttle.MaxCounterLimit {
				t.Errorf("%s: AllowN up to the whole limit = %+v", alg, d)
			}
			if n := rdb.MemoryUsage(ctx, keyFor(t, l, key, alg), 0).Val(); n <= 0 || n > 200 {
				t.Errorf("%s: MEMORY USAGE of a key of %d units = %d bytes, want at most 200", alg, throttle.MaxCounterLimit, n)
			}
		}
		_, err := l.Allow(ctx, "big:log", throttle.Policy{Limit: throttle.MaxLimit + 1, Window: time.Hour})
		if !errors.Is(err, throttle.ErrInvalidPolicy) {
			t.Errorf("the log above MaxLimit: %v, want ErrInvalidPolicy", err)
		}
		_, err = l.Allow(ctx, "bad", throttle.Policy{Limit: 1, Window: time.Hour, Algorithm: "token-bucket"})
		if !errors.Is(err, throttle.ErrInvalidPolicy) {
			t.Errorf("an unknown algorithm: %v, want ErrInvalidPolicy", err)
		}
	})
}

// TestCountersUnderConcurrency: callers racing on one key never get more
// than the limit admitted. The window is as long as a policy allows, so no
// window ends during the test, and the GCRA emission interval (about 6
// weeks) frees nothing either.
func TestCountersUnderConcurrency(t *testing.T) {
	t.Parallel()
	const limit, callers, calls = 50, 16, 10
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		for _, alg := range counterAlgorithms {
			p := throttle.Policy{Limit: limit, Window: throttle.MaxWindow, Algorithm: alg}
			key := "race:" + string(alg)
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					for range calls {
						d, err := l.Allow(context.Background(), key, p)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if got := admitted.Load(); got != limit {
				t.Errorf("%s: %d of %d calls admitted, want %d", alg, got, callers*calls, limit)
			}
			rdb.Del(context.Background(), keyFor(t, l, key, alg)) // it would live for years
		}
	})
}

// TestCountersInLine: a counter check in AllowInLine reserves nothing; a
// denied caller is sent back at the counter's own retry time.
func TestCountersInLine(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		p := throttle.Policy{Limit: 2, Window: time.Hour, Algorithm: throttle.GCRA}
		checks := []throttle.Check{{Key: "line:gcra", Policy: p, Cost: 1}}
		for i := range 2 {
			if md, err := l.AllowInLine(ctx, fmt.Sprint("task-", i), checks); err != nil || !md.Allowed {
				t.Fatalf("task %d: %+v, %v; want allowed", i, md, err)
			}
		}
		before := snapshot(t, rdb, keyFor(t, l, "line:gcra", throttle.GCRA))
		md, err := l.AllowInLine(ctx, "task-2", checks)
		if err != nil {
			t.Fatal(err)
		}
		if md.Allowed || md.Denied != 0 || md.RetryAfter <= 0 || md.RetryAfter > 30*time.Minute || md.RetryAfter != md.Checks[0].RetryAfter {
			t.Errorf("a third task: %+v, want denied with the check's retry, at most one emission interval (30 min)", md)
		}
		if after := snapshot(t, rdb, keyFor(t, l, "line:gcra", throttle.GCRA)); after != before {
			t.Errorf("a denied caller changed the counter: %+v, then %+v", before, after)
		}
		if keys := redistest.Keys(t, rdb, prefix); len(keys) != 1 {
			t.Errorf("keys = %q, want only the counter's", keys)
		}
	})
}
