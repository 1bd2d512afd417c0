package throttle_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// TestRestamp: a task admitted by the lines is moved to now in every log of
// its checks, cost and all, keeping the count; one moved by hand into a
// spot where the move would put a later window over its limit, or one
// whose log was reset, is not moved in any log and is reported so.
func TestRestamp(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		ls := l.Lines(throttle.LinesConfig{})
		second := throttle.Policy{Limit: 3, Window: time.Second}
		checks := []throttle.LineCheck{
			{Check: throttle.Check{Key: "rule/a", Policy: second, Cost: 2}},
			{Check: throttle.Check{Key: "rule/b", Policy: throttle.Policy{Limit: 5, Window: time.Hour}, Cost: 1}, Shared: true},
			{Check: throttle.Check{Key: "rule/c", Policy: throttle.Policy{Limit: 5, Window: time.Second, Algorithm: throttle.GCRA}, Cost: 1}},
		}
		keyA, keyB := redisKey(t, l, "rule/a"), redisKey(t, l, "rule/b")
		turn, err := ls.Arrive(ctx, throttle.Arrival{Class: "sms", Tenant: "acme", Queue: "q", ID: "t1", Checks: checks})
		if err != nil || turn.Outcome != throttle.Admitted {
			t.Fatalf("arrive: %v, %v", turn.Outcome, err)
		}
		before := memberScores(t, rdb, keyA, keyB)
		checkRecord(t, before, turn.At, "the arrival")
		time.Sleep(20 * time.Millisecond)
		stamped, moved, err := ls.Restamp(ctx, "t1", checks, time.Second)
		if err != nil || !moved {
			t.Fatalf("restamp: %v, %v", moved, err)
		}
		after := memberScores(t, rdb, keyA, keyB)
		checkRecord(t, after, stamped, "the restamp")
		if len(after) != 3 || len(before) != 3 {
			t.Fatalf("members before %v, after %v: want 3 each (cost 2 and 1)", before, after)
		}
		for m, at := range after {
			member, _, _ := strings.Cut(m, " ")
			stamp, rest, _ := strings.Cut(member, "-c")
			if rest != "t1#1" && rest != "t1#2" || stamp != fmt.Sprint(int64(at)) {
				t.Errorf("member %s at %v: want '<its score>-ct1#j'", m, at)
			}
			for _, was := range before {
				if at < was+20_000 {
					t.Errorf("member %s at %v, want 20 ms or more after its admission at %v", m, at, was)
				}
			}
		}
		if ttl := rdb.PTTL(ctx, keyA).Val(); ttl < 900*time.Millisecond {
			t.Errorf("log a's TTL %v after the move, want about its window", ttl)
		}

		// t2's admission 600 ms ago, two more since, and one placed 500 ms
		// ahead: a window ending there would hold t2 moved to now, the two,
		// and itself, 4 of 3.
		now := redisNow(t, rdb)
		rdb.Del(ctx, keyA)
		rdb.ZAdd(ctx, keyA,
			redis.Z{Score: float64(now - 600_000), Member: fmt.Sprintf("%d-ct2#1", now-600_000)},
			redis.Z{Score: float64(now - 300_000), Member: fmt.Sprintf("%d-cx#1", now-300_000)},
			redis.Z{Score: float64(now - 200_000), Member: fmt.Sprintf("%d-cy#1", now-200_000)},
			redis.Z{Score: float64(now + 500_000), Member: "@z#1"})
		rdb.PExpire(ctx, keyA, 2*time.Second)
		one := checks[:1]
		one[0].Cost = 1
		want := memberScores(t, rdb, keyA)
		if _, moved, err := ls.Restamp(ctx, "t2", one, time.Second); err != nil || moved {
			t.Errorf("restamp of t2 into a full window: %v, %v; want false", moved, err)
		}
		if got := memberScores(t, rdb, keyA); !maps.Equal(got, want) {
			t.Errorf("log after a refused move: %v, want %v", got, want)
		}
		// Without the place ahead it may move: 3 in any window.
		rdb.ZRem(ctx, keyA, "@z#1")
		if _, moved, err := ls.Restamp(ctx, "t2", one, time.Second); err != nil || !moved {
			t.Errorf("restamp of t2: %v, %v; want true", moved, err)
		}
		// A task whose log was reset is not moved, nor one never admitted.
		rdb.Del(ctx, keyA)
		if _, moved, err := ls.Restamp(ctx, "t2", one, time.Second); err != nil || moved {
			t.Errorf("restamp of t2 after a reset: %v, %v; want false", moved, err)
		}
		// Counter rules alone: nothing to move.
		if _, moved, err := ls.Restamp(ctx, "t3", checks[2:], time.Second); err != nil || !moved {
			t.Errorf("restamp of counter rules only: %v, %v; want true", moved, err)
		}
	})
}

// checkRecord fails t unless every member of scores stands at `at`, the
// time that what recorded it said.
func checkRecord(t *testing.T, scores map[string]float64, at time.Time, what string) {
	t.Helper()
	for m, score := range scores {
		if int64(score) != at.UnixMicro() {
			t.Errorf("member %s at %v, but %s's record says %v", m, score, what, at.UnixMicro())
		}
	}
}

// memberScores returns every member of keys, as "<member> <key>", with
// its score.
func memberScores(t *testing.T, rdb redis.UniversalClient, keys ...string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, k := range keys {
		zs, err := rdb.ZRangeWithScores(context.Background(), k, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range zs {
			out[z.Member.(string)+" "+k] = z.Score
		}
	}
	return out
}
