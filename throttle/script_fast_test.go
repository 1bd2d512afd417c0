package throttle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// fastLine is the line of decide.lua that enters its common cases.
const fastLine = "if mode == '1' or mode == '2' then"

// withoutFastPaths returns the limiter's scripts with their clock fixed at
// now and decide.lua's common cases turned off, so that the rest of the
// script decides every call.
func withoutFastPaths(t *testing.T, now int64) limiterScripts {
	t.Helper()
	return fixedClock(t, now, func(name, src string) string {
		if name != "decide.lua" {
			return src
		}
		if strings.Count(src, fastLine) != 1 {
			t.Fatalf("decide.lua has not one line %q: its common cases cannot be turned off", fastLine)
		}
		return strings.Replace(src, fastLine, "if false then", 1)
	})
}

// TestScriptFastPathsAgree: decide.lua's common cases (an admission of one
// unit a check, a denial in Allow with nothing ahead) decide exactly what
// the rest of the script decides on the same windows: the same reply, once
// the short reply is read in full, the same members with the same scores,
// and the same TTLs. The windows are random: admissions in and out of the
// window, places of other callers ahead, the caller's own place, one or
// two checks, costs of one or two.
func TestScriptFastPathsAgree(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		ctx := context.Background()
		now := redisNow(t, rdb)
		fast := fixedClock(t, now)
		slow := withoutFastPaths(t, now)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("seed %d: the clock and the random windows", now)
			}
		})
		rng := rand.New(rand.NewPCG(uint64(now), 17))
		for trial := range 300 {
			n := 1 + rng.IntN(2)
			mode, id := []string{"1", "2"}[rng.IntN(2)], "c"
			args := []any{mode, id, 0}
			var windows []int64
			var keys [2][]string
			for i := range n {
				limit, window, cost := 1+rng.Int64N(5), []int64{1_000_000, 10_000_000}[rng.IntN(2)], int64(1)
				if rng.IntN(8) == 0 {
					cost = min(2, limit)
				}
				args = append(args, limit, window, cost, "sliding-log")
				windows = append(windows, window)
				var members []redis.Z
				for j := range rng.IntN(int(limit) + 2) {
					members = append(members, redis.Z{Score: float64(now - rng.Int64N(window*3/2)), Member: fmt.Sprint("seed-", j)})
				}
				if rng.IntN(3) == 0 {
					members = append(members, redis.Z{Score: float64(now + 1 + rng.Int64N(2*window)), Member: "@other#1"})
				}
				if mode == "2" && i == 0 && rng.IntN(3) == 0 {
					members = append(members, redis.Z{Score: float64(now + rng.Int64N(window) - window/2), Member: "@" + id + "#1"})
				}
				for side, name := range []string{"fast", "slow"} {
					k := rawKey(prefix, fmt.Sprintf("%s-%d-%d", name, trial, i))
					keys[side] = append(keys[side], k)
					if len(members) > 0 {
						if err := rdb.ZAdd(ctx, k, members...).Err(); err != nil {
							t.Fatal(err)
						}
						if err := rdb.PExpire(ctx, k, time.Minute).Err(); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			call := fmt.Sprintf("trial %d %v", trial, args)
			got, gotZ, gotTTL := runAndRead(t, rdb, fast, keys[0], args, windows, call)
			want, wantZ, wantTTL := runAndRead(t, rdb, slow, keys[1], args, windows, call+", common cases off")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("trial %d %v: reply (-rest of the script +common cases):\n%s", trial, args, diff)
			}
			for i := range n {
				if diff := cmp.Diff(wantZ[i], gotZ[i]); diff != "" {
					t.Fatalf("trial %d %v: check %d's members (-rest of the script +common cases):\n%s", trial, args, i+1, diff)
				}
				g, w := gotTTL[i], wantTTL[i]
				if d := g - w; d < -time.Second || d > time.Second || ttlKind(g) != ttlKind(w) {
					t.Fatalf("trial %d %v: check %d's TTL %v, %v with the common cases off", trial, args, i+1, g, w)
				}
			}
		}
	})
}

// runAndRead runs script over keys (call names it in errors) and reads each key's members and TTL in
// the same MULTI/EXEC. Redis 7 checks expiry against one frozen clock for the
// whole transaction: a key the script gave 1 ms to live (its newest member
// at the window's edge) is read as the script left it, not found gone
// because the test read it a few milliseconds later than the other side.
func runAndRead(t *testing.T, rdb redis.UniversalClient, script limiterScripts, keys []string, args []any, windows []int64, call string) ([]int64, [][]redis.Z, []time.Duration) {
	t.Helper()
	ctx := context.Background()
	var run *redis.Cmd
	zs := make([]*redis.ZSliceCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		run = script.of(args).Eval(ctx, p, throttle.WithFrontiers(keys), args...)
		for i, k := range keys {
			zs[i] = p.ZRangeWithScores(ctx, k, 0, -1)
			ttls[i] = p.PTTL(ctx, k)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	reply, err := throttle.ScriptReply(run, windows...)
	if err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	members, left := make([][]redis.Z, len(keys)), make([]time.Duration, len(keys))
	for i := range keys {
		members[i], left[i] = zs[i].Val(), ttls[i].Val()
	}
	return reply, members, left
}

// ttlKind tells a missing key (PTTL -2) and one without a TTL (-1) from
// one with a TTL, which PTTL may read as 0 at the end of its last
// millisecond.
func ttlKind(d time.Duration) time.Duration { return min(d, 0) }
