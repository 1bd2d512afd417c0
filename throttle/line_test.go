package throttle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/throttle"
)

// TestLineSpreadsReturns: a backlog denied at once is sent back one freed slot
// at a time. With a full window of 5 entries admitted at s0..s4, caller k in
// line comes back when exit k frees: s[k] + W for k < 5, then the exits of
// the units admitted at those times, s[k-5] + 2W, and so on.
func TestLineSpreadsReturns(t *testing.T) {
	t.Parallel()
	p := throttle.Policy{Limit: 5, Window: 10 * time.Second}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		checks := []throttle.Check{{Key: "tenant", Policy: p, Cost: 1}}
		for i := range 5 {
			md, err := l.AllowInLine(ctx, fmt.Sprint("first-", i), checks)
			if err != nil || !md.Allowed {
				t.Fatalf("request %d: %+v, %v", i, md, err)
			}
			time.Sleep(2 * time.Millisecond) // distinct admission times
		}
		s := scores(t, rdb, redisKey(t, l, "tenant"))
		w := p.Window.Microseconds()
		for k := range 12 {
			before := redisNow(t, rdb)
			md, err := l.AllowInLine(ctx, fmt.Sprint("backlog-", k), checks)
			after := redisNow(t, rdb)
			if err != nil {
				t.Fatal(err)
			}
			if md.Allowed || md.Denied != 0 {
				t.Fatalf("backlog %d: %+v, want denied at check 0", k, md)
			}
			at := s[k%5] + int64(k/5+1)*w
			lo, hi := time.Duration(at-after)*time.Microsecond, time.Duration(at-before)*time.Microsecond
			if md.RetryAfter < lo || md.RetryAfter > hi {
				t.Errorf("backlog %d: RetryAfter %v, want its place at s[%d]+%dW, in [%v, %v]", k, md.RetryAfter, k%5, k/5+1, lo, hi)
			}
			exact := md.Checks[0].RetryAfter
			if lo0, hi0 := time.Duration(s[0]+w-after)*time.Microsecond, time.Duration(s[0]+w-before)*time.Microsecond; exact < lo0 || exact > hi0 {
				t.Errorf("backlog %d: the check's own RetryAfter %v is not the oldest entry's exit [%v, %v]", k, exact, lo0, hi0)
			}
		}
	})
}

// TestLinePlaces: a caller holds one place; denied again it moves to the
// back, admitted it leaves; an empty line gives the exact RetryAfter.
func TestLinePlaces(t *testing.T) {
	t.Parallel()
	p := throttle.Policy{Limit: 1, Window: 300 * time.Millisecond}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		checks := []throttle.Check{{Key: "k", Policy: p, Cost: 1}}
		line := func() []string {
			rkey := redisKey(t, l, "k")
			// The line's key sits beside the window's: "}line:" for "}:".
			lk := rkey[:len(prefix)] + "{" + throttle.DefaultGroup + "}line:k"
			return rdb.ZRange(ctx, lk, 0, -1).Val()
		}
		if md, err := l.AllowInLine(ctx, "a", checks); err != nil || !md.Allowed {
			t.Fatalf("a: %+v, %v", md, err)
		}
		mdB, err := l.AllowInLine(ctx, "b", checks)
		if err != nil || mdB.Allowed {
			t.Fatalf("b: %+v, %v", mdB, err)
		}
		if mdB.RetryAfter != mdB.Checks[0].RetryAfter {
			t.Errorf("first in an empty line: RetryAfter %v, want the exact %v", mdB.RetryAfter, mdB.Checks[0].RetryAfter)
		}
		mdC, _ := l.AllowInLine(ctx, "c", checks)
		if mdC.RetryAfter < mdB.RetryAfter+p.Window-10*time.Millisecond {
			t.Errorf("second in line: RetryAfter %v, want one window after the first's %v", mdC.RetryAfter, mdB.RetryAfter)
		}
		if got := line(); len(got) != 2 {
			t.Errorf("line = %q, want b and c", got)
		}
		// b back before its place keeps it.
		mdB2, _ := l.AllowInLine(ctx, "b", checks)
		if mdB2.Allowed || mdB2.RetryAfter > mdB.RetryAfter || mdB2.RetryAfter < mdB.RetryAfter-100*time.Millisecond {
			t.Errorf("b back early: %+v, want denied with its place, %v from the first answer", mdB2, mdB.RetryAfter)
		}
		if got := line(); len(got) != 2 || got[0] != "b" || got[1] != "c" {
			t.Errorf("line = %q, want [b c]", got)
		}
		// At b's time another caller takes the slot first: b, denied after
		// its place came, keeps its rank at the front, so it waits only for
		// the next exit.
		time.Sleep(mdB2.RetryAfter)
		if md, err := l.Allow(ctx, "k", p); err != nil || !md.Allowed {
			t.Fatalf("the caller outside the line at b's time: %+v, %v", md, err)
		}
		mdB3, _ := l.AllowInLine(ctx, "b", checks)
		if mdB3.Allowed || mdB3.RetryAfter != mdB3.Checks[0].RetryAfter {
			t.Errorf("b after its slot was taken: %+v, want denied with the exact RetryAfter", mdB3)
		}
		if got := line(); len(got) != 2 {
			t.Errorf("line = %q, want b and c", got)
		}
		time.Sleep(mdB3.RetryAfter)
		if md, err := l.AllowInLine(ctx, "b", checks); err != nil || !md.Allowed {
			t.Fatalf("b at its new place: %+v, %v", md, err)
		}
		if got := line(); len(got) != 1 || got[0] != "c" {
			t.Errorf("line after b was admitted = %q, want [c]", got)
		}
		if _, err := l.AllowInLine(ctx, "", checks); err == nil {
			t.Errorf("empty caller id accepted")
		}
	})
}

// TestLineForgetsAbandonedPlaces: a place whose caller never comes back is
// dropped after the grace, and the line's key expires.
func TestLineForgetsAbandonedPlaces(t *testing.T) {
	t.Parallel()
	p := throttle.Policy{Limit: 1, Window: 50 * time.Millisecond}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		ctx := context.Background()
		l := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix), throttle.WithLineGrace(50*time.Millisecond))
		checks := []throttle.Check{{Key: "k", Policy: p, Cost: 1}}
		l.AllowInLine(ctx, "a", checks)
		md, err := l.AllowInLine(ctx, "gone", checks)
		if err != nil || md.Allowed {
			t.Fatalf("gone: %+v, %v", md, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			keys := len(rdbKeys(t, rdb, prefix))
			if keys == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d keys left 5 s after a 50 ms window and grace", keys)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}
