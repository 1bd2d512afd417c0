package throttle_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// damagedLogCall is a call of TestDamagedLogScores on the damaged key.
type damagedLogCall struct {
	name string
	call func(ctx context.Context, l *throttle.Limiter, damaged string) error
}

// damagedLogCalls are the calls TestDamagedLogScores makes on a damaged log.
var damagedLogCalls = []damagedLogCall{
	{"Allow with room", func(ctx context.Context, l *throttle.Limiter, damaged string) error {
		_, err := l.Allow(ctx, damaged, throttle.PerSecond(10))
		return err
	}},
	{"Allow full", func(ctx context.Context, l *throttle.Limiter, damaged string) error {
		_, err := l.Allow(ctx, damaged, throttle.PerSecond(5))
		return err
	}},
	{"AllowN of 2", func(ctx context.Context, l *throttle.Limiter, damaged string) error {
		_, err := l.AllowN(ctx, damaged, throttle.PerSecond(10), 2)
		return err
	}},
	{"AllowInLine full", func(ctx context.Context, l *throttle.Limiter, damaged string) error {
		_, err := l.AllowInLine(ctx, "task-1", []throttle.Check{{Key: damaged, Policy: throttle.PerSecond(5), Cost: 1}})
		return err
	}},
	{"AllowMulti, a healthy key first", func(ctx context.Context, l *throttle.Limiter, damaged string) error {
		_, err := l.AllowMulti(ctx, []throttle.Check{
			{Key: "healthy", Policy: throttle.PerSecond(10), Cost: 1},
			{Key: damaged, Policy: throttle.PerSecond(10), Cost: 1},
		})
		return err
	}},
	{"Peek", func(ctx context.Context, l *throttle.Limiter, damaged string) error {
		_, err := l.Peek(ctx, damaged, throttle.PerSecond(10))
		return err
	}},
	{"Usage", func(ctx context.Context, l *throttle.Limiter, damaged string) error {
		_, err := l.Usage(ctx, damaged, throttle.PerSecond(10))
		return err
	}},
}

// TestDamagedLogScores: a log holding members scored +inf, or 2^53 µs on,
// is damaged. Every call that checks it, whichever path of decide.lua
// decides it, returns a Redis error reply naming the key and the score,
// and writes nothing, to it or to the other keys of the call; a call on
// another key is decided as usual.
func TestDamagedLogScores(t *testing.T) {
	t.Parallel()
	damages := []struct {
		name, score string
		value       float64
	}{
		{"+inf", "inf", math.Inf(1)},
		{"2^53 µs, in 2255", "9007199254740992", 1 << 53},
	}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		for _, d := range damages {
			for _, c := range damagedLogCalls {
				damaged := "damaged/" + d.score + "/" + c.name
				rk := redisKey(t, l, damaged)
				var members []redis.Z
				for _, m := range []string{"a", "b", "c", "d", "e"} {
					members = append(members, redis.Z{Score: d.value, Member: m})
				}
				if err := rdb.ZAdd(ctx, rk, members...).Err(); err != nil {
					t.Fatal(err)
				}
				before := rdb.ZRangeWithScores(ctx, rk, 0, -1).Val()

				err := c.call(ctx, l, damaged)
				var re redis.Error
				if !errors.As(err, &re) {
					t.Fatalf("%s, %s on a log scored %s: err = %v, want a Redis error reply", c.name, damaged, d.score, err)
				}
				for _, want := range []string{"ERR damaged log " + rk, "scored " + d.score} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s on a log scored %s: err = %q, want it to say %q", c.name, d.score, err, want)
					}
				}
				if diff := cmp.Diff(before, rdb.ZRangeWithScores(ctx, rk, 0, -1).Val()); diff != "" {
					t.Errorf("%s on a log scored %s changed it (-before +after):\n%s", c.name, d.score, diff)
				}
				if n := rdb.Exists(ctx, redisKey(t, l, "healthy")).Val(); n != 0 {
					t.Errorf("%s on a log scored %s wrote the healthy key of the call", c.name, d.score)
				}
			}
		}
		// Other keys keep working, in the same group.
		for i := range 3 {
			if got := mustAllowN(t, l, "other", throttle.PerSecond(2), 1); got.Allowed != (i < 2) {
				t.Errorf("call %d on another key: Allowed = %t, want %t", i+1, got.Allowed, i < 2)
			}
		}
		if left := rdb.PTTL(ctx, redisKey(t, l, "other")).Val(); left <= 0 || left > 2*time.Second {
			t.Errorf("another key's TTL = %v, want about a second", left)
		}
	})
}
