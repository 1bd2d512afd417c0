package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

func TestAllowCountsUpToLimit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		policy throttle.Policy
		costs  []int
		want   []bool // Allowed, per call
		counts []int  // Count, per call
	}{
		{"one at a time", throttle.PerMinute(3), []int{1, 1, 1, 1, 1}, []bool{true, true, true, false, false}, []int{1, 2, 3, 3, 3}},
		{"costs fill exactly", throttle.PerMinute(5), []int{2, 3, 1}, []bool{true, true, false}, []int{2, 5, 5}},
		{"too big a cost is denied, a smaller one fits", throttle.PerMinute(5), []int{4, 2, 1, 1}, []bool{true, false, true, false}, []int{4, 4, 5, 5}},
		{"cost equal to limit", throttle.PerHour(7), []int{7, 1}, []bool{true, false}, []int{7, 7}},
		{"limit one", throttle.PerSecond(1), []int{1, 1}, []bool{true, false}, []int{1, 1}},
	}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var allowed []bool
				var counts []int
				for _, n := range tc.costs {
					d := mustAllowN(t, l, tc.name, tc.policy, n)
					allowed = append(allowed, d.Allowed)
					counts = append(counts, d.Count)
					if got, want := d.Remaining, max(0, tc.policy.Limit-d.Count); got != want {
						t.Errorf("Remaining = %d, want %d", got, want)
					}
					if got, want := d.Limit, tc.policy.Limit; got != want {
						t.Errorf("Limit = %d, want %d", got, want)
					}
					if d.Allowed && d.RetryAfter != 0 {
						t.Errorf("allowed with RetryAfter %v", d.RetryAfter)
					}
					if !d.Allowed && (d.RetryAfter <= 0 || d.RetryAfter > tc.policy.Window) {
						t.Errorf("denied with RetryAfter %v, want in (0, %v]", d.RetryAfter, tc.policy.Window)
					}
					if d.ResetAfter <= 0 || d.ResetAfter > tc.policy.Window {
						t.Errorf("ResetAfter %v, want in (0, %v]", d.ResetAfter, tc.policy.Window)
					}
				}
				if diff := cmp.Diff(tc.want, allowed); diff != "" {
					t.Errorf("Allowed per call (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.counts, counts); diff != "" {
					t.Errorf("Count per call (-want +got):\n%s", diff)
				}
				// Denied requests are not recorded: the set holds what was admitted.
				if got, want := int(rdb.ZCard(context.Background(), redisKey(t, l, tc.name)).Val()), counts[len(counts)-1]; got != want {
					t.Errorf("ZCARD = %d, want %d", got, want)
				}
			})
		}
	})
}

// TestWindowSlides shows the window is a sliding one: each entry leaves the
// window on its own, one Window after it was admitted, and a request denied
// with RetryAfter r is admitted after waiting r.
func TestWindowSlides(t *testing.T) {
	t.Parallel()
	p := throttle.Policy{Limit: 2, Window: 600 * time.Millisecond}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		rkey := redisKey(t, l, "k")
		mustAllowN(t, l, "k", p, 1) // a
		time.Sleep(200 * time.Millisecond)
		mustAllowN(t, l, "k", p, 1) // b, 200 ms after a
		admitted := scores(t, rdb, rkey)

		d := mustAllowN(t, l, "k", p, 1)
		if d.Allowed {
			t.Fatalf("third request in the window was allowed: %+v", d)
		}
		// Sleeping RetryAfter lets a leave the window, and only a.
		time.Sleep(d.RetryAfter)
		d = mustAllowN(t, l, "k", p, 1) // c
		if !d.Allowed {
			t.Fatalf("denied after waiting the RetryAfter: %+v", d)
		}
		before := redisNow(t, rdb)
		d = mustAllowN(t, l, "k", p, 1)
		after := redisNow(t, rdb)
		if d.Allowed {
			t.Fatalf("b and c fill the window, yet allowed: %+v", d)
		}
		// Now b is the oldest entry: the retry is when b leaves.
		wantLo := time.Duration(admitted[1]+p.Window.Microseconds()-after) * time.Microsecond
		wantHi := time.Duration(admitted[1]+p.Window.Microseconds()-before) * time.Microsecond
		if d.RetryAfter < wantLo || d.RetryAfter > wantHi {
			t.Errorf("RetryAfter = %v, want b's exit in [%v, %v]", d.RetryAfter, wantLo, wantHi)
		}
		if n := rdb.ZCard(ctx, rkey).Val(); n != 2 {
			t.Errorf("ZCARD = %d, want 2 (b and c)", n)
		}
	})
}

// TestRetryAfterIsExact seeds a window with entries one second apart and
// checks that RetryAfter is the exit time of the entry at index
// count - limit + cost - 1, not of the oldest one.
func TestRetryAfterIsExact(t *testing.T) {
	t.Parallel()
	const window = 10 * time.Second
	cases := []struct {
		name  string
		limit int
		cost  int
		index int // entry whose exit admits the request
	}{
		{"full window, cost 1: the oldest", 5, 1, 0},
		{"lowered limit", 2, 1, 3},
		{"cost above one", 5, 3, 2},
		{"lowered limit and cost", 3, 2, 3},
		{"limit lowered to one", 1, 1, 4},
	}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				rkey := redisKey(t, l, tc.name)
				now := redisNow(t, rdb)
				var seeded []int64
				for i := range 5 { // entries at now-9s, now-8s, ..., now-5s
					score := now - int64(9-i)*time.Second.Microseconds()
					seeded = append(seeded, score)
					if err := rdb.ZAdd(ctx, rkey, redis.Z{Score: float64(score), Member: fmt.Sprint("seed-", i)}).Err(); err != nil {
						t.Fatal(err)
					}
				}
				rdb.PExpire(ctx, rkey, window)

				p := throttle.Policy{Limit: tc.limit, Window: window}
				before := redisNow(t, rdb)
				d := mustAllowN(t, l, tc.name, p, tc.cost)
				after := redisNow(t, rdb)
				if d.Allowed {
					t.Fatalf("allowed with 5 entries against limit %d: %+v", tc.limit, d)
				}
				exit := seeded[tc.index] + window.Microseconds()
				lo, hi := time.Duration(exit-after)*time.Microsecond, time.Duration(exit-before)*time.Microsecond
				if d.RetryAfter < lo || d.RetryAfter > hi {
					t.Errorf("RetryAfter = %v, want the exit of entry %d, in [%v, %v]", d.RetryAfter, tc.index, lo, hi)
				}
				if got, want := d.Count, 5; got != want {
					t.Errorf("Count = %d, want %d", got, want)
				}
				resetLo := time.Duration(seeded[4]+window.Microseconds()-after) * time.Microsecond
				resetHi := time.Duration(seeded[4]+window.Microseconds()-before) * time.Microsecond
				if d.ResetAfter < resetLo || d.ResetAfter > resetHi {
					t.Errorf("ResetAfter = %v, want the newest entry's exit, in [%v, %v]", d.ResetAfter, resetLo, resetHi)
				}
			})
		}
	})
}

// TestSameMicrosecondEntriesAreDistinct: the units of one AllowN share a
// timestamp and must still be counted one by one.
func TestSameMicrosecondEntriesAreDistinct(t *testing.T) {
	t.Parallel()
	p := throttle.PerMinute(2000)
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		for _, n := range []int{1, 2, 500, 501, 1000} {
			key := fmt.Sprint("n=", n)
			d := mustAllowN(t, l, key, p, n)
			if !d.Allowed || d.Count != n {
				t.Fatalf("AllowN(%d) = %+v, want allowed with Count %d", n, d, n)
			}
			got := scores(t, rdb, redisKey(t, l, key))
			if len(got) != n {
				t.Fatalf("AllowN(%d) left %d entries", n, len(got))
			}
			for _, s := range got {
				if s != got[0] {
					t.Fatalf("AllowN(%d) entries have different times %d and %d", n, got[0], s)
				}
			}
		}
	})
}

// TestConcurrentCallersNeverExceedTheLimit hammers one key from many
// goroutines: exactly Limit requests get through.
func TestConcurrentCallersNeverExceedTheLimit(t *testing.T) {
	t.Parallel()
	const goroutines, each, limit = 64, 20, 100
	p := throttle.PerMinute(limit)
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		var allowed atomic.Int64
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
					if d.Allowed {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if got := allowed.Load(); got != limit {
			t.Errorf("%d of %d requests allowed, want exactly %d", got, goroutines*each, limit)
		}
		if got := rdb.ZCard(context.Background(), redisKey(t, l, "hot")).Val(); got != limit {
			t.Errorf("ZCARD = %d, want %d", got, limit)
		}
	})
}

// TestReconfigurationAppliesAtOnce changes the policy of a key that holds
// entries: a lowered limit denies at once, a raised one admits at once, a
// shorter window drops old entries at once, and a longer one keeps the key
// alive for its whole length.
func TestReconfigurationAppliesAtOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		five := throttle.PerMinute(5)
		for range 5 {
			mustAllowN(t, l, "k", five, 1)
		}
		if d := mustAllowN(t, l, "k", throttle.PerMinute(3), 1); d.Allowed || d.Count != 5 || d.Remaining != 0 {
			t.Errorf("lowered limit: %+v, want denied with Count 5, Remaining 0", d)
		}
		eight := throttle.PerMinute(8)
		for i := range 3 {
			if d := mustAllowN(t, l, "k", eight, 1); !d.Allowed || d.Count != 6+i {
				t.Errorf("raised limit, request %d: %+v, want allowed with Count %d", i, d, 6+i)
			}
		}
		if d := mustAllowN(t, l, "k", eight, 1); d.Allowed {
			t.Errorf("raised limit, ninth request allowed: %+v", d)
		}

		// A longer window: the key lives until the newest entry leaves it.
		rkey := redisKey(t, l, "k")
		long := throttle.Policy{Limit: 8, Window: time.Hour}
		if _, err := l.Peek(ctx, "k", long); err != nil {
			t.Fatal(err)
		}
		if ttl := rdb.PTTL(ctx, rkey).Val(); ttl < 59*time.Minute || ttl > time.Hour+time.Millisecond {
			t.Errorf("PTTL after lengthening the window to an hour = %v", ttl)
		}

		// A window shorter than the age of every entry empties it.
		time.Sleep(5 * time.Millisecond)
		short := throttle.Policy{Limit: 8, Window: 2 * time.Millisecond}
		d, err := l.Peek(ctx, "k", short)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed || d.Count != 0 || d.ResetAfter != 0 {
			t.Errorf("Peek with a window shorter than every entry's age = %+v, want allowed, Count 0", d)
		}
		if n := rdb.Exists(ctx, rkey).Val(); n != 0 {
			t.Errorf("key still exists after all its entries left the window")
		}
	})
}

func TestPeekConsumesNothing(t *testing.T) {
	t.Parallel()
	p := throttle.PerMinute(2)
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		d, err := l.Peek(ctx, "k", p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(throttle.Decision{Allowed: true, Limit: 2, Remaining: 2}, d); diff != "" {
			t.Errorf("Peek on an empty window (-want +got):\n%s", diff)
		}
		if keys := redistest.Keys(t, rdb, prefix); len(keys) != 0 {
			t.Errorf("Peek on an empty window created %v", keys)
		}
		mustAllowN(t, l, "k", p, 2)
		for range 3 {
			d, err := l.Peek(ctx, "k", p)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed || d.Count != 2 || d.RetryAfter <= 0 {
				t.Errorf("Peek on a full window = %+v, want denied with Count 2 and a RetryAfter", d)
			}
		}
		if n := rdb.ZCard(ctx, redisKey(t, l, "k")).Val(); n != 2 {
			t.Errorf("ZCARD after Peeks = %d, want 2", n)
		}
	})
}

func TestResetEmptiesTheWindow(t *testing.T) {
	t.Parallel()
	p := throttle.PerHour(1)
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		mustAllowN(t, l, "a", p, 1)
		mustAllowN(t, l, "b", p, 1)
		if err := l.Reset(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if d := mustAllowN(t, l, "a", p, 1); !d.Allowed {
			t.Errorf("denied after Reset: %+v", d)
		}
		if d := mustAllowN(t, l, "b", p, 1); d.Allowed {
			t.Errorf("Reset of a emptied b: %+v", d)
		}
		if err := l.Reset(ctx, "never-used"); err != nil {
			t.Errorf("Reset of an unused key: %v", err)
		}
	})
}

// TestEveryKeyExpires checks that every key the limiter writes has a TTL just
// past the exit of its newest entry, and is gone once its entries have left.
func TestEveryKeyExpires(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		minute := throttle.PerMinute(3)
		mustAllowN(t, l, "allowed", minute, 1)
		mustAllowN(t, l, "full", minute, 3)
		mustAllowN(t, l, "full", minute, 1) // denied
		if _, err := l.Peek(ctx, "full", minute); err != nil {
			t.Fatal(err)
		}
		if _, err := l.AllowMulti(ctx, []throttle.Check{{Key: "m1", Policy: minute, Cost: 1}, {Key: "m2", Policy: throttle.PerHour(5), Cost: 2}}); err != nil {
			t.Fatal(err)
		}
		keys := redistest.Keys(t, rdb, prefix)
		if len(keys) != 4 {
			t.Errorf("keys = %q, want 4", keys)
		}
		for _, k := range keys {
			ttl := rdb.PTTL(ctx, k).Val()
			limit := time.Minute + time.Millisecond
			if k == redisKey(t, l, "m2") {
				limit = time.Hour + time.Millisecond
			}
			if ttl <= limit-2*time.Second || ttl > limit {
				t.Errorf("PTTL(%s) = %v, want just under %v", k, ttl, limit)
			}
		}

		short := throttle.Policy{Limit: 1, Window: 50 * time.Millisecond}
		mustAllowN(t, l, "short", short, 1)
		rkey := redisKey(t, l, "short")
		deadline := time.Now().Add(5 * time.Second)
		for rdb.Exists(ctx, rkey).Val() == 1 {
			if time.Now().After(deadline) {
				t.Fatalf("key of a 50 ms window still exists after 5 s, PTTL %v", rdb.PTTL(ctx, rkey).Val())
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// badInputCase is a case of TestBadInputIsRejectedBeforeRedis: a call with
// bad input, and the error it must match.
type badInputCase struct {
	name string
	call func(ctx context.Context, e env) error
	want error
}

// badKeyOrPolicyCases are the bad keys, policies and costs of one check,
// where ok is a good policy of 5 per second.
func badKeyOrPolicyCases(ok throttle.Policy) []badInputCase {
	return []badInputCase{
		{"empty key", func(ctx context.Context, e env) error { _, err := e.l.Allow(ctx, "", ok); return err }, throttle.ErrInvalidKey},
		{"empty key peek", func(ctx context.Context, e env) error { _, err := e.l.Peek(ctx, "", ok); return err }, throttle.ErrInvalidKey},
		{"empty key reset", func(ctx context.Context, e env) error { return e.l.Reset(ctx, "") }, throttle.ErrInvalidKey},
		{"zero limit", func(ctx context.Context, e env) error {
			_, err := e.l.Allow(ctx, "k", throttle.Policy{Window: time.Second})
			return err
		}, throttle.ErrInvalidPolicy},
		{"negative limit", func(ctx context.Context, e env) error {
			_, err := e.l.Allow(ctx, "k", throttle.Policy{Limit: -1, Window: time.Second})
			return err
		}, throttle.ErrInvalidPolicy},
		{"limit above maximum", func(ctx context.Context, e env) error {
			_, err := e.l.Allow(ctx, "k", throttle.Policy{Limit: throttle.MaxLimit + 1, Window: time.Second})
			return err
		}, throttle.ErrInvalidPolicy},
		{"zero window", func(ctx context.Context, e env) error {
			_, err := e.l.Allow(ctx, "k", throttle.Policy{Limit: 1})
			return err
		}, throttle.ErrInvalidPolicy},
		{"negative window", func(ctx context.Context, e env) error {
			_, err := e.l.Allow(ctx, "k", throttle.Policy{Limit: 1, Window: -time.Second})
			return err
		}, throttle.ErrInvalidPolicy},
		{"window under 1ms", func(ctx context.Context, e env) error {
			_, err := e.l.Peek(ctx, "k", throttle.Policy{Limit: 1, Window: 999 * time.Microsecond})
			return err
		}, throttle.ErrInvalidPolicy},
		{"window above maximum", func(ctx context.Context, e env) error {
			_, err := e.l.Allow(ctx, "k", throttle.Policy{Limit: 1, Window: throttle.MaxWindow + 1})
			return err
		}, throttle.ErrInvalidPolicy},
		{"zero cost", func(ctx context.Context, e env) error { _, err := e.l.AllowN(ctx, "k", ok, 0); return err }, throttle.ErrInvalidCost},
		{"negative cost", func(ctx context.Context, e env) error { _, err := e.l.AllowN(ctx, "k", ok, -3); return err }, throttle.ErrInvalidCost},
		{"cost above limit", func(ctx context.Context, e env) error { _, err := e.l.AllowN(ctx, "k", ok, 6); return err }, throttle.ErrInvalidCost},
	}
}

// badChecksOrConfigCases are the bad lists of checks of AllowMulti and
// AllowInLine, and the bad limiter settings, where ok is a good policy.
func badChecksOrConfigCases(ok throttle.Policy) []badInputCase {
	return []badInputCase{
		{"multi: no checks", func(ctx context.Context, e env) error { _, err := e.l.AllowMulti(ctx, nil); return err }, throttle.ErrInvalidKey},
		{"multi: one bad policy among good", func(ctx context.Context, e env) error {
			_, err := e.l.AllowMulti(ctx, []throttle.Check{{Key: "a", Policy: ok, Cost: 1}, {Key: "b", Policy: throttle.Policy{Limit: 1}, Cost: 1}})
			return err
		}, throttle.ErrInvalidPolicy},
		{"multi: negative cost", func(ctx context.Context, e env) error {
			_, err := e.l.AllowMulti(ctx, []throttle.Check{{Key: "a", Policy: ok, Cost: 1}, {Key: "b", Policy: ok, Cost: -1}})
			return err
		}, throttle.ErrInvalidCost},
		{"multi: zero cost", func(ctx context.Context, e env) error {
			_, err := e.l.AllowMulti(ctx, []throttle.Check{{Key: "a", Policy: ok, Cost: 1}, {Key: "b", Policy: ok}})
			return err
		}, throttle.ErrInvalidCost},
		{"in line: zero cost", func(ctx context.Context, e env) error {
			_, err := e.l.AllowInLine(ctx, "task", []throttle.Check{{Key: "a", Policy: ok}})
			return err
		}, throttle.ErrInvalidCost},
		{"in line: no checks", func(ctx context.Context, e env) error { _, err := e.l.AllowInLine(ctx, "task", nil); return err }, throttle.ErrInvalidKey},
		{"in line: empty caller id", func(ctx context.Context, e env) error {
			_, err := e.l.AllowInLine(ctx, "", []throttle.Check{{Key: "a", Policy: ok, Cost: 1}})
			return err
		}, throttle.ErrInvalidKey},
		{"multi: duplicate key", func(ctx context.Context, e env) error {
			_, err := e.l.AllowMulti(ctx, []throttle.Check{{Key: "a", Policy: ok, Cost: 1}, {Key: "b", Policy: ok, Cost: 1}, {Key: "a", Policy: throttle.PerDay(9), Cost: 1}})
			return err
		}, throttle.ErrDuplicateKey},
		{"multi: mixed groups", func(ctx context.Context, e env) error {
			l := throttle.NewLimiter(e.rdb, throttle.WithPrefix(e.prefix), throttle.WithGroup(throttle.KeyGroup))
			_, err := l.AllowMulti(ctx, []throttle.Check{{Key: "a", Policy: ok, Cost: 1}, {Key: "b", Policy: ok, Cost: 1}})
			return err
		}, throttle.ErrMixedGroups},
		{"empty group", func(ctx context.Context, e env) error {
			l := throttle.NewLimiter(e.rdb, throttle.WithPrefix(e.prefix), throttle.WithGroup(func(string) string { return "" }))
			_, err := l.Allow(ctx, "a", ok)
			return err
		}, throttle.ErrInvalidKey},
		{"nil client", func(ctx context.Context, e env) error {
			_, err := throttle.NewLimiter(nil).Allow(ctx, "a", ok)
			return err
		}, throttle.ErrInvalidConfig},
		{"prefix with a brace", func(ctx context.Context, e env) error {
			_, err := throttle.NewLimiter(e.rdb, throttle.WithPrefix(e.prefix+"{x}")).Allow(ctx, "a", ok)
			return err
		}, throttle.ErrInvalidConfig},
		{"nil group function", func(ctx context.Context, e env) error {
			return throttle.NewLimiter(e.rdb, throttle.WithPrefix(e.prefix), throttle.WithGroup(nil)).Reset(ctx, "a")
		}, throttle.ErrInvalidConfig},
	}
}

// TestBadInputIsRejectedBeforeRedis checks each kind of bad input for a clear
// error that errors.Is matches, and that nothing reaches Redis.
func TestBadInputIsRejectedBeforeRedis(t *testing.T) {
	t.Parallel()
	ok := throttle.PerSecond(5)
	cases := append(badKeyOrPolicyCases(ok), badChecksOrConfigCases(ok)...)
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			checkBadInputs(t, b, ok, cases)
		})
	}
}

// checkBadInputs runs the cases on backend b through a client that counts
// what it sends, then checks that the count sees a good call's commands.
func checkBadInputs(t *testing.T, b backend, ok throttle.Policy, cases []badInputCase) {
	t.Helper()
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	// A client of this test's own, so that the hook counts only what
	// the cases send; b.rdb looks for keys.
	var counted redis.UniversalClient
	if _, ok := b.rdb.(*redis.ClusterClient); ok {
		counted = redistest.Cluster(t)
	} else {
		counted = redistest.Client(t)
	}
	var sent atomic.Int64
	counted.AddHook(countHook{&sent})
	l := throttle.NewLimiter(counted, throttle.WithPrefix(prefix))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sent.Store(0)
			err := tc.call(ctx, env{l, counted, prefix})
			if !errors.Is(err, tc.want) {
				t.Fatalf("error = %v, want one matching %v", err, tc.want)
			}
			if n := sent.Load(); n != 0 {
				t.Errorf("bad input sent %d commands to Redis", n)
			}
			if keys := redistest.Keys(t, b.rdb, prefix); len(keys) != 0 {
				t.Errorf("bad input wrote %q", keys)
			}
		})
	}
	// The hook does see what a good call sends.
	sent.Store(0)
	if _, err := l.Allow(ctx, "k", ok); err != nil {
		t.Fatal(err)
	}
	if sent.Load() == 0 {
		t.Errorf("the counting hook saw no command of a good call")
	}
}

// countHook counts the commands and pipelines a client sends.
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// env is what a case of TestBadInputIsRejectedBeforeRedis works with.
type env struct {
	l      *throttle.Limiter
	rdb    redis.UniversalClient
	prefix string
}

func TestBadInputErrorsNameTheProblem(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	l := throttle.NewLimiter(rdb, throttle.WithPrefix(redistest.Prefix(t)))
	byTenant := throttle.NewLimiter(rdb, throttle.WithPrefix(redistest.Prefix(t)), throttle.WithGroup(func(key string) string {
		tenant, _, _ := strings.Cut(key, "/")
		return tenant
	}))
	ctx := context.Background()
	cases := []struct {
		err  func() error
		want string
	}{
		{func() error { _, err := l.Allow(ctx, "", throttle.PerSecond(1)); return err }, `throttle: allow "": invalid key: the key is empty`},
		{func() error { _, err := l.Allow(ctx, "sms:acme", throttle.PerSecond(0)); return err }, `throttle: allow "sms:acme": invalid policy: limit 0 is below 1`},
		{func() error { _, err := l.AllowN(ctx, "sms:acme", throttle.PerSecond(3), 4); return err }, `throttle: allow "sms:acme": invalid cost: cost 4 is not 1 to the limit 3`},
		{func() error {
			_, err := l.Peek(ctx, "k", throttle.Policy{Limit: 1, Window: time.Microsecond})
			return err
		}, `throttle: peek "k": invalid policy: window 1µs is shorter than 1ms`},
		{func() error {
			_, err := l.AllowMulti(ctx, []throttle.Check{{Key: "a", Policy: throttle.PerSecond(5), Cost: 1}, {Key: "b", Policy: throttle.PerSecond(5)}})
			return err
		}, `throttle: allow "a" and 1 more: key "b": invalid cost: cost 0 is not 1 to the limit 5`},
		{func() error { _, err := l.AllowMulti(ctx, nil); return err }, `throttle: allow no keys: invalid key: no checks`},
		{func() error {
			_, err := byTenant.AllowMulti(ctx, []throttle.Check{{Key: "acme/sms", Policy: throttle.PerSecond(5), Cost: 1}, {Key: "{globex}/sms", Policy: throttle.PerSecond(5), Cost: 1}})
			return err
		}, `throttle: allow "acme/sms" and 1 more: keys in different groups: key "acme/sms" is in group "acme", key "{globex}/sms" in "{globex}"`},
		{func() error {
			_, err := throttle.NewLimiter(rdb, throttle.WithGroup(func(string) string { return "" })).Allow(ctx, "a", throttle.PerSecond(1))
			return err
		}, `throttle: allow "a": invalid key: the key's group is empty`},
		// A long key is cut at 64 bytes, backing off to the start of the
		// three-byte character that the 64th byte is in.
		{func() error {
			_, err := l.Allow(ctx, strings.Repeat("a", 63)+"日本", throttle.PerSecond(0))
			return err
		}, `throttle: allow "` + strings.Repeat("a", 63) + `"... (69 bytes): invalid policy: limit 0 is below 1`},
	}
	for _, tc := range cases {
		if err := tc.err(); err == nil || err.Error() != tc.want {
			t.Errorf("error = %v\nwant    %s", err, tc.want)
		}
	}
}

// TestRedisFailureIsAnError: when Redis cannot answer, the caller gets an
// error, never a Decision that looks like an answer.
func TestRedisFailureIsAnError(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	closed := redis.NewClient(rdb.Options())
	_ = closed.Close()
	l := throttle.NewLimiter(closed)
	if d, err := l.Allow(context.Background(), "k", throttle.PerSecond(1)); err == nil {
		t.Errorf("Allow on a closed client = %+v, nil error", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l = throttle.NewLimiter(rdb, throttle.WithPrefix(redistest.Prefix(t)))
	if _, err := l.Allow(ctx, "k", throttle.PerSecond(1)); !errors.Is(err, context.Canceled) {
		t.Errorf("Allow with a canceled context: error = %v, want context.Canceled", err)
	}
}
