package throttle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// frontierLine is the line of decide.lua that reads a log's frontier note.
const frontierLine = "known = frontier(i)"

// lastingScripts returns the limiter's scripts with their clock fixed at
// now, as they are and with their frontier notes never read (every search
// then starts where it is asked to), both giving their keys an hour more to
// live: the TTLs run in real time, which outruns the fixed clock, and the
// two sides' logs must not expire a moment apart. Pruning, not the TTL,
// decides.
func lastingScripts(t *testing.T, now int64) (noted, plain limiterScripts) {
	t.Helper()
	lasting := func(name, src string) string {
		if n := strings.Count(src, "/ 1000) + 1)"); n < 1 || (name == "decide.lua" && n < 5) {
			t.Fatalf("%s has %d TTLs of the form \"/ 1000) + 1)\": they cannot be lengthened", name, n)
		}
		return strings.ReplaceAll(src, "/ 1000) + 1)", "/ 1000) + 3600001)")
	}
	unnoted := func(name, src string) string {
		if strings.Count(src, frontierLine) != 1 {
			t.Fatalf("%s has not one line %q: its frontier cannot be turned off", name, frontierLine)
		}
		return strings.Replace(src, frontierLine, "known = now", 1)
	}
	return fixedClock(t, now, lasting), fixedClock(t, now, lasting, unnoted)
}

// noteKey is the key of the frontier note beside the log at key.
func noteKey(key string) string { return strings.Replace(key, "}:", "}p:", 1) }

// noteAhead reports whether the log at key has a frontier note that lies
// ahead of now.
func noteAhead(t *testing.T, rdb redis.UniversalClient, key string, now int64) bool {
	t.Helper()
	v, err := rdb.Get(context.Background(), noteKey(key)).Result()
	if err == redis.Nil {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := strconv.ParseInt(strings.Split(v, ":")[0], 10, 64)
	if err != nil {
		t.Fatalf("note %q: %v", v, err)
	}
	return f > now
}

// TestFrontierAgrees: a line whose searches start at the logs' frontier
// notes gives every caller the place, and every reply, that the same line
// gives without them, call by call: callers of four tenants join the line
// of their own rule and a shared one, come back early, on time or late
// (and are placed again), are decided by Allow and Peek, and the shared
// limit changes halfway. The notes must have been used: some search
// started at one.
func TestFrontierAgrees(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		ctx := context.Background()
		const window, tolerance = int64(1_000_000), int64(50_000)
		now := redisNow(t, rdb)
		t.Logf("seed %d", now)
		rng := rand.New(rand.NewPCG(uint64(now), 23))
		type pending struct {
			tenant int
			place  int64
		}
		waiting := map[string]pending{}
		shared, used := int64(4), 0
		for step := range 400 {
			now += rng.Int64N(150_000)
			if step == 200 {
				shared = 5
			}
			tenant := rng.IntN(4)
			mode, id := "2", fmt.Sprint("c", step)
			switch r := rng.IntN(20); {
			case r < 8 && len(waiting) < 30:
				// a new caller
			case r < 16 && len(waiting) > 0:
				ids := make([]string, 0, len(waiting))
				for w := range waiting {
					ids = append(ids, w)
				}
				slices.Sort(ids)
				id = ids[rng.IntN(len(ids))]
				tenant = waiting[id].tenant
				if rng.IntN(2) == 0 && waiting[id].place > now {
					now = waiting[id].place + rng.Int64N(tolerance*2) // on time, or late
				}
			case r < 18:
				mode, id = "1", ""
			default:
				mode, id = "0", ""
			}
			args := []any{mode, id, tolerance, 2, window, 1, "sliding-log", shared, window, 1, "sliding-log"}
			if noteAhead(t, rdb, rawKey(prefix, "noted-provider"), now) {
				used++
			}
			var replies [2][]int64
			noted, plain := lastingScripts(t, now)
			for side, script := range []limiterScripts{noted, plain} {
				name := []string{"noted", "plain"}[side]
				r, err := throttle.ScriptReply(script.Run(ctx, rdb, throttle.WithFrontiers(frontierKeys(prefix, name, tenant)), args...), window, window)
				if err != nil {
					t.Fatalf("step %d, %s: %v", step, name, err)
				}
				replies[side] = r
			}
			if diff := cmp.Diff(replies[1], replies[0]); diff != "" {
				t.Fatalf("step %d (mode %s, caller %q of tenant %d): the reply with notes differs (-without +with):\n%s", step, mode, id, tenant, diff)
			}
			if mode == "2" {
				delete(waiting, id)
				if n := len(replies[0]); replies[0][0] == 0 && replies[0][n-1] == 0 {
					waiting[id] = pending{tenant, now + replies[0][n-3]}
				}
			}
			frontierLogsAgree(t, rdb, prefix, step)
		}
		if used < 20 {
			t.Errorf("the shared log had a note ahead before %d calls of 400, want at least 20: the notes were not exercised", used)
		}
	})
}

// frontierKeys are the keys of TestFrontierAgrees's logs of a tenant on one
// side, "noted" or "plain": the tenant's own and the shared provider's.
func frontierKeys(prefix, side string, tenant int) []string {
	return []string{rawKey(prefix, fmt.Sprintf("%s-tenant-%d", side, tenant)), rawKey(prefix, side+"-provider")}
}

// frontierLogsAgree fails the test unless, after the given step, every
// log of the noted side holds what its plain twin holds.
func frontierLogsAgree(t *testing.T, rdb redis.UniversalClient, prefix string, step int) {
	t.Helper()
	ctx := context.Background()
	for tn := range 4 {
		for i, k := range frontierKeys(prefix, "noted", tn) {
			with := rdb.ZRangeWithScores(ctx, k, 0, -1).Val()
			without := rdb.ZRangeWithScores(ctx, frontierKeys(prefix, "plain", tn)[i], 0, -1).Val()
			if diff := cmp.Diff(without, with); diff != "" {
				t.Fatalf("step %d: %s differs (-without +with):\n%s", step, k, diff)
			}
		}
	}
}

// TestFrontierForgotten: what frees room in a log ahead of now deletes its
// note, and what does not leaves it: a caller that comes back late and is
// placed again, Reset and a fair-lines grant dropped delete it; Peek
// never writes one, and a parked task dropped leaves it.
func TestFrontierForgotten(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		const window = int64(1_000_000)
		now := redisNow(t, rdb)
		key := rawKey(prefix, "late")
		line := func(at int64, mode, id string) reply {
			return runAt(t, rdb, at, []string{key}, mode, id, 0, check{2, window, 1})
		}
		// Two admitted, then three callers placed; the third searched past
		// the first two places and noted it.
		line(now, "2", "a")
		line(now, "2", "b")
		first := line(now, "2", "c")
		line(now, "2", "d")
		line(now, "2", "e")
		if !noteAhead(t, rdb, key, now) {
			t.Fatalf("no note ahead after three callers placed in a full log")
		}
		if err := rdb.Del(ctx, noteKey(key)).Err(); err != nil {
			t.Fatal(err)
		}
		line(now, "0", "")
		if n := rdb.Exists(ctx, noteKey(key)).Val(); n != 0 {
			t.Errorf("Peek wrote a note")
		}
		line(now, "2", "f")
		if !noteAhead(t, rdb, key, now) {
			t.Fatalf("no note ahead after a fourth caller placed")
		}
		// c comes back long after its place and is placed again: its
		// place left the windows ending from then on, and so did the
		// note. A note far ahead, had it stayed, would have placed c
		// after it.
		late := now + first.wait + window/2
		far := late + 100*window
		if err := rdb.Set(ctx, noteKey(key), fmt.Sprintf("%d:2:%d", far, window), time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		if r := line(late, "2", "c"); r.allowed || late+r.wait >= far {
			t.Errorf("a late caller placed again: %+v; want a place before the note's %d µs (the note forgotten)", r, far-late)
		}

		frontierForgottenByMove(t, rdb, prefix, now, window)
		frontierForgottenByReset(t, rdb, l)
	})
}

// frontierForgottenByMove: a caller placed again after its first log (of
// window µs) was reset moves its place in the second log later: that log's
// note goes, and the gap the move opened is given.
func frontierForgottenByMove(t *testing.T, rdb redis.UniversalClient, prefix string, now, window int64) {
	t.Helper()
	ctx := context.Background()
	one, two := rawKey(prefix, "first"), rawKey(prefix, "second")
	both := []check{{1, window, 1}, {1, 10 * window, 1}}
	pair := func(at int64, id string) reply {
		return runAt(t, rdb, at, []string{one, two}, "2", id, 0, both...)
	}
	pair(now, "u")                                // admitted in both
	if r := pair(now, "x"); r.wait != 10*window { // placed by the second log
		t.Fatalf("x placed %d µs ahead, want %d", r.wait, 10*window)
	}
	if err := rdb.Del(ctx, one).Err(); err != nil {
		t.Fatal(err)
	}
	pair(now, "y") // placed at now + 20 windows, noting the second log full up to it
	if !noteAhead(t, rdb, two, now) {
		t.Fatalf("no note ahead in the second log")
	}
	pair(now+1, "x") // placed again at now + 30 windows: its place at now + 10 moves there
	if n := rdb.Exists(ctx, noteKey(two)).Val(); n != 0 {
		t.Errorf("a place moved later in the second log left its note")
	}
	if r := pair(now+2, "z"); r.allowed || now+2+r.wait != now+10*window {
		t.Errorf("z after x's place moved: %+v; want a place at the gap, %d µs ahead", r, 10*window-2)
	}
}

// frontierForgottenByReset: Reset deletes a log's note with the key.
func frontierForgottenByReset(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter) {
	t.Helper()
	ctx := context.Background()
	p := throttle.Policy{Limit: 1, Window: time.Minute}
	for _, id := range []string{"r1", "r2", "r3"} {
		if _, err := l.AllowInLine(ctx, id, []throttle.Check{{Key: "reset", Policy: p, Cost: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	rk, err := l.RedisKey("reset")
	if err != nil {
		t.Fatal(err)
	}
	if !noteAhead(t, rdb, rk, redisNow(t, rdb)) {
		t.Fatalf("no note ahead after three callers of a limit of one")
	}
	if err := l.Reset(ctx, "reset"); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, noteKey(rk)).Val(); n != 0 {
		t.Errorf("Reset left the note")
	}
}

// TestFrontierForgottenByLines: the fair lines delete a log's note when a
// grant's place leaves it (the task dropped), and leave it when a task
// that holds no place is dropped.
func TestFrontierForgottenByLines(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		ctx := context.Background()
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 1, Window: 100 * time.Millisecond})
		ids := s.enqueue("acme", 3, 3) // the first admitted, two parked
		s.now += 100_000               // its unit leaves the window
		s.setClock()
		if _, err := s.ls.Dispatch(ctx); err != nil {
			t.Fatal(err)
		}
		var granted, parked []string
		for _, id := range ids[1:] {
			g, err := s.ls.Granted(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if g {
				granted = append(granted, id)
			} else {
				parked = append(parked, id)
			}
		}
		if len(granted) != 1 || len(parked) != 1 {
			t.Fatalf("granted %v and parked %v after a dispatch, want one of each", granted, parked)
		}
		rk, err := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)).RedisKey("provider")
		if err != nil {
			t.Fatal(err)
		}
		note := noteKey(rk)
		if err := rdb.Set(ctx, note, fmt.Sprintf("%d:1:100000", simStart+time.Hour.Microseconds()), time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.ls.Drop(ctx, parked[0]); err != nil {
			t.Fatal(err)
		}
		if n := rdb.Exists(ctx, note).Val(); n != 1 {
			t.Errorf("dropping a parked task deleted the note")
		}
		if err := s.ls.Drop(ctx, granted[0]); err != nil {
			t.Fatal(err)
		}
		if n := rdb.Exists(ctx, note).Val(); n != 0 {
			t.Errorf("dropping a granted task left the note")
		}
	})
}
