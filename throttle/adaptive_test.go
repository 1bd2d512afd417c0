package throttle_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// waitRedisPast waits until the Redis clock is past t.
func waitRedisPast(t *testing.T, rdb redis.UniversalClient, at time.Time) {
	t.Helper()
	for redisNow(t, rdb) <= at.UnixMicro() {
		time.Sleep(2 * time.Millisecond)
	}
}

// TestAdaptBounds: an adaptive rule of ceiling 40 and floor 4 starts at
// 10, falls by a tenth on a slow answer once a cooldown, rises only while
// its log is full, stops under the level that failed, and never leaves
// [4, 40] whatever it is told.
func TestAdaptBounds(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		c := throttle.Check{Key: "provider", Policy: throttle.Policy{Limit: 40, Window: 30 * time.Millisecond}, Cost: 1}
		adapt := func(a throttle.Answer) throttle.Adaptive {
			t.Helper()
			s, err := l.Adapt(ctx, c, 4, a)
			if err != nil {
				t.Fatal(err)
			}
			if s.Limit < 4 || s.Limit > 40 {
				t.Fatalf("limit in force %v, outside [4, 40]", s.Limit)
			}
			return s
		}
		if s, err := l.LimitInForce(ctx, c, 4); err != nil || s.Limit != 10 {
			t.Fatalf("limit in force at the start = %v, %v; want 10 (a quarter of 40)", s.Limit, err)
		}
		s := adapt(throttle.SlowDown)
		if s.Limit != 9 {
			t.Fatalf("after a slow answer: %v, want 9", s.Limit)
		}
		if again := adapt(throttle.SlowDown); again.Limit != 9 {
			t.Errorf("a second slow answer within the cooldown moved it to %v", again.Limit)
		}
		waitRedisPast(t, rdb, s.Fell.Add(30*time.Millisecond))
		if up := adapt(throttle.Accepted); up.Limit != 9 {
			t.Errorf("an accepted send while the log is not full raised it to %v", up.Limit)
		}
		// The log full at 9: it rises by 1 (at least one), then stops at
		// 10 × 0.98, under the level that failed.
		fillLog(t, l, c, 9)
		up := adapt(throttle.Accepted)
		if up.Limit != 9.8 {
			t.Errorf("full, after the cooldown: %v, want 9.8 (+1, at most 0.98 of the level that failed, 10)", up.Limit)
		}
		// A slow answer after a rise takes it back to where it rose from;
		// more take it to the floor, and no further.
		waitRedisPast(t, rdb, up.Rose.Add(30*time.Millisecond))
		if back := adapt(throttle.SlowDown); back.Limit != 9 {
			t.Errorf("slow after a rise from 9 to 9.8: %v, want back at 9", back.Limit)
		}
		for range 30 {
			s, err := l.LimitInForce(ctx, c, 4)
			if err != nil {
				t.Fatal(err)
			}
			waitRedisPast(t, rdb, s.Fell.Add(30*time.Millisecond))
			adapt(throttle.SlowDown)
		}
		if s := adapt(throttle.SlowDown); s.Limit != 4 {
			t.Errorf("after 30 falls: %v, want the floor 4", s.Limit)
		}
	})
}

// TestAdaptRisesToCeiling: with no level failed, an adaptive rule rises by
// at least 1 a cooldown while its log is full, up to its ceiling and no
// further.
func TestAdaptRisesToCeiling(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		small := throttle.Check{Key: "small", Policy: throttle.Policy{Limit: 3, Window: 30 * time.Millisecond}, Cost: 1}
		var got []float64
		for range 5 {
			s, err := l.LimitInForce(ctx, small, 1)
			if err != nil {
				t.Fatal(err)
			}
			waitRedisPast(t, rdb, s.Rose.Add(30*time.Millisecond))
			fillLog(t, l, small, s.InForce())
			if s, err = l.Adapt(ctx, small, 1, throttle.Accepted); err != nil {
				t.Fatal(err)
			}
			got = append(got, s.Limit)
		}
		if want := []float64{2, 3, 3, 3, 3}; !slices.Equal(got, want) {
			t.Errorf("rises of a rule of ceiling 3 from 1: %v, want %v", got, want)
		}
	})
}

// fillLog admits n callers to c's log.
func fillLog(t *testing.T, l *throttle.Limiter, c throttle.Check, n int) {
	t.Helper()
	for i := range n {
		id := "f" + strconv.Itoa(i) + "-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		if _, err := l.AllowInLine(context.Background(), id, []throttle.Check{c}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAdaptAcrossShards: a global adaptive rule of ceiling 40 leased to a
// shard keeps its state in the pool; the shard's log holds what the lease
// is worth there (5 of the limit in force, 10), so Leases.HeldBack says
// the rule holds tasks back, and an accepted send told so raises the
// pool's limit, where told otherwise it does not. The pool's own log,
// empty, is not read.
func TestAdaptAcrossShards(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		c := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 40, Window: time.Minute}, Cost: 1, Leased: true}
		leases := l.Leases()
		if _, err := leases.Open(ctx, c); err != nil {
			t.Fatal(err)
		}
		if _, err := leases.Move(ctx, c, throttle.DefaultGroup, "sms.0", throttle.LeaseParts/2); err != nil {
			t.Fatal(err)
		}
		inForce := c
		inForce.Policy.Limit = 10 // where the state starts: a quarter of 40
		shard := l.InGroup("sms.0")
		for i := range 4 {
			if md, err := shard.AllowInLine(ctx, strconv.Itoa(i), []throttle.Check{inForce}); err != nil || !md.Allowed {
				t.Fatalf("admission %d under a lease worth 5 of 10: %v, %v", i, md.Allowed, err)
			}
		}
		if held, err := leases.HeldBack(ctx, inForce, "sms.0"); err != nil || held {
			t.Fatalf("4 of 5 held: held back %v, %v; want not", held, err)
		}
		fillLog(t, shard, inForce, 1)
		held, err := leases.HeldBack(ctx, inForce, "sms.0")
		if err != nil || !held {
			t.Fatalf("5 of 5 held: held back %v, %v; want held back", held, err)
		}
		c.Leased = false
		if s, err := l.AdaptHeldBack(ctx, c, 4, throttle.Accepted, false); err != nil || s.Limit != 10 {
			t.Errorf("an accepted send, not held back: %v, %v; want 10 still", s.Limit, err)
		}
		if s, err := l.AdaptHeldBack(ctx, c, 4, throttle.Accepted, held); err != nil || s.Limit != 11 {
			t.Errorf("an accepted send, held back in the shard: %v, %v; want 11 (10 + 1)", s.Limit, err)
		}
	})
}
