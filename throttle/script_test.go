package throttle_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/throttle"
)

// The tests in this file run decide.lua directly, with the raw KEYS and ARGV
// of its header, on a copy whose clock is fixed: every figure of the reply is
// then known to the microsecond, and a change of one microsecond or one
// member in the script fails them.

// clockLine is the line of logs_head.lua that reads the Redis clock.
const clockLine = "local t = redis.call('TIME')"

// limiterScripts are decide.lua and peek.lua: a call is run by the one its
// mode (ARGV[1]) belongs to, as the limiter runs them.
type limiterScripts struct{ decide, peek *redis.Script }

// of returns the script that runs a call of args.
func (s limiterScripts) of(args []any) *redis.Script {
	if args[0] == "0" || args[0] == "3" {
		return s.peek
	}
	return s.decide
}

func (s limiterScripts) Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return s.of(args).Run(ctx, c, keys, args...)
}

// Load loads both scripts.
func (s limiterScripts) Load(ctx context.Context, c redis.Scripter) error {
	if err := s.decide.Load(ctx, c).Err(); err != nil {
		return err
	}
	return s.peek.Load(ctx, c).Err()
}

// fixedClock returns the limiter's scripts with their clock fixed at now, in
// microseconds of the Unix epoch, then each edit applied. Each now is a
// distinct pair of scripts, loaded on first use.
func fixedClock(t *testing.T, now int64, edits ...func(name, src string) string) limiterScripts {
	t.Helper()
	build := func(name, src string) *redis.Script {
		if n := strings.Count(src, clockLine); n != 1 {
			t.Fatalf("%s has %d lines %q, want 1: the clock cannot be fixed", name, n, clockLine)
		}
		src = strings.Replace(src, clockLine, fmt.Sprintf("local t = {'%d', '%d'}", now/1e6, now%1e6), 1)
		if strings.Contains(src, "'TIME'") {
			t.Fatalf("%s with a fixed clock still reads TIME", name)
		}
		for _, edit := range edits {
			src = edit(name, src)
		}
		return redis.NewScript(src)
	}
	return limiterScripts{decide: build("decide.lua", lua.DecideSource()), peek: build("peek.lua", lua.PeekSource())}
}

// check is one check of a raw script call: its ARGV of a sliding-log check.
type check struct{ limit, window, cost int64 }

// reply is decide.lua's reply, read by its header.
type reply struct {
	allowed bool
	checks  []checkReply
	wait    int64 // denied: microseconds until the request's time (its place)
	line    int   // denied: the check that set that time, 1-based
	early   bool  // line mode: back before its place
	at      int64 // admitted: the time its entries stand at; else 0
}

type checkReply struct {
	Allowed           bool
	Count             int64
	Retry, ResetAfter int64 // microseconds
}

// runAt runs decide.lua with its clock at now over keys (the windows) in the
// given mode, with caller id and tolerance for line mode.
func runAt(t *testing.T, rdb redis.UniversalClient, now int64, keys []string, mode, id string, tolerance int64, checks ...check) reply {
	t.Helper()
	args := []any{mode, id, tolerance}
	var windows []int64
	for _, c := range checks {
		args = append(args, c.limit, c.window, c.cost, "sliding-log")
		windows = append(windows, c.window)
	}
	raw, err := throttle.ScriptReply(fixedClock(t, now).Run(context.Background(), rdb, throttle.WithFrontiers(keys), args...), windows...)
	if err != nil {
		t.Fatalf("decide.lua %v %v: %v", keys, args, err)
	}
	n := len(checks)
	if len(raw) != 5+4*n {
		t.Fatalf("decide.lua replied %d values for %d checks", len(raw), n)
	}
	r := reply{allowed: raw[0] == 1, wait: raw[4*n+1], line: int(raw[4*n+2]), early: raw[4*n+3] == 1, at: raw[4*n+4]}
	for i := range n {
		c := raw[1+4*i:]
		r.checks = append(r.checks, checkReply{c[0] == 1, c[1], c[2], c[3]})
	}
	return r
}

// seed adds entries to a sorted set at the given scores, named seed-0,
// seed-1, ...
func seed(t *testing.T, rdb redis.UniversalClient, key string, scores ...int64) {
	t.Helper()
	for i, s := range scores {
		if err := rdb.ZAdd(context.Background(), key, redis.Z{Score: float64(s), Member: fmt.Sprint("seed-", i)}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// rawKey is a raw key of a script test: all share the hash tag {s}, so one
// script call may use any of them on a cluster.
func rawKey(prefix, name string) string { return prefix + "{s}:" + name }

// TestScriptPruneBoundary: an entry admitted exactly one window before now
// has left the window; one a microsecond later has not.
func TestScriptPruneBoundary(t *testing.T) {
	t.Parallel()
	const w = 10_000_000
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		now := redisNow(t, rdb)
		for _, mode := range []string{"0", "1"} {
			key := rawKey(prefix, "mode"+mode)
			// seed-0 is out, seed-1 in; seed-2, the newest, keeps the key
			// alive for a window after the call (with seed-1 the newest, the
			// script would give the key 1 ms to live, and the check below
			// could find it gone).
			seed(t, rdb, key, now-w, now-w+1, now)
			r := runAt(t, rdb, now, []string{key}, mode, "", 0, check{10, w, 1})
			wantCount := int64(2)
			if mode == "1" {
				wantCount = 3
			}
			if got := r.checks[0].Count; got != wantCount {
				t.Errorf("mode %s: Count = %d, want %d", mode, got, wantCount)
			}
			members := rdb.ZRange(context.Background(), key, 0, 0).Val()
			if len(members) != 1 || members[0] != "seed-1" {
				t.Errorf("mode %s: oldest member = %q, want seed-1 (seed-0, at now-window, pruned)", mode, members)
			}
		}
	})
}

// member is the name decide.lua gives the unit it admits at now (µs) when
// the log holds seq members.
func member(now int64, seq int) string {
	return fmt.Sprintf("%d.%d-%d", now/1e6, now%1e6, seq)
}

// TestScriptSameMicrosecond: calls admitted in one microsecond each add
// members of their own, named <seconds>.<microseconds>-<n> with n counting
// those already there.
func TestScriptSameMicrosecond(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		ctx := context.Background()
		now := redisNow(t, rdb)/1e6*1e6 + 4_321 // a microsecond part of fewer than 6 digits
		key := rawKey(prefix, "k")
		var counts []int64
		for _, cost := range []int64{1, 1, 2} {
			r := runAt(t, rdb, now, []string{key}, "1", "", 0, check{10, time.Minute.Microseconds(), cost})
			if !r.allowed {
				t.Fatalf("cost %d denied: %+v", cost, r)
			}
			counts = append(counts, r.checks[0].Count)
		}
		if diff := cmp.Diff([]int64{1, 2, 4}, counts); diff != "" {
			t.Errorf("Count per call (-want +got):\n%s", diff)
		}
		var want []redis.Z
		for i := range 4 {
			want = append(want, redis.Z{Score: float64(now), Member: member(now, i)})
		}
		got := rdb.ZRangeWithScores(ctx, key, 0, -1).Val()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("members (-want +got):\n%s", diff)
		}
	})
}

// TestScriptShortReply: an admission of one unit in every check, none of
// them holding a place ahead of now, replies with the counts and the
// admission's time alone, and the Limiter reads it as the full reply: the
// newest member is this admission, so the reset-after is one window. A
// place ahead, a cost above one, a counter check or a denial reply in full,
// with the exact reset-after, and the admission's time last (0 denied).
func TestScriptShortReply(t *testing.T) {
	t.Parallel()
	const w = 10_000_000
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		now := redisNow(t, rdb)
		k1, k2 := rawKey(prefix, "short-1"), rawKey(prefix, "short-2")
		seed(t, rdb, k1, now-5, now-4)
		cases := []struct {
			name string
			keys []string
			args []any
			want any
		}{
			{"one check", []string{k1}, []any{"1", "", 0, 10, w, 1, "sliding-log"}, []any{int64(3), now}},
			{"two checks", []string{k1, k2}, []any{"1", "", 0, 10, w, 1, "sliding-log", 5, w, 1, "sliding-log"}, []any{int64(4), int64(1), now}},
			{"line mode", []string{k2}, []any{"2", "a", 0, 5, w, 1, "sliding-log"}, []any{int64(2), now}},
			{"cost above one", []string{k2}, []any{"1", "", 0, 5, w, 2, "sliding-log"},
				[]any{int64(1), int64(1), int64(4), int64(0), int64(w), int64(0), int64(0), int64(0), now}},
			// A limit of 4 is full: placed a window after the first
			// admission in it.
			{"denied in line", []string{k2}, []any{"2", "b", 0, 4, w, 1, "sliding-log"},
				[]any{int64(0), int64(0), int64(5), int64(w), int64(2 * w), int64(w), int64(1), int64(0), int64(0)}},
			// b's place is a window ahead, so the key lives until it leaves.
			{"a place ahead", []string{k2}, []any{"1", "", 0, 10, w, 1, "sliding-log"},
				[]any{int64(1), int64(1), int64(6), int64(0), int64(2 * w), int64(0), int64(0), int64(0), now}},
		}
		for _, c := range cases {
			got, err := fixedClock(t, now).Run(context.Background(), rdb, throttle.WithFrontiers(c.keys), c.args...).Result()
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("%s: reply (-want +got):\n%s", c.name, diff)
			}
		}
		// b comes back at its place: admitted as of it.
		r := runAt(t, rdb, now+w, []string{k2}, "2", "b", 0, check{4, w, 1})
		if !r.allowed || r.at != now+w {
			t.Errorf("back at its place: allowed %v at %d, want admitted at the place, %d", r.allowed, r.at, now+w)
		}
	})
}

// TestScriptSameMicrosecondTwoWindows: a key called with two windows in one
// microsecond prunes differently for each, so the count that names members
// can repeat; the repeated name is refused and the unit still recorded,
// under a name of the other kind.
func TestScriptSameMicrosecondTwoWindows(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		ctx := context.Background()
		now := redisNow(t, rdb)/1e6*1e6 + 17
		key := rawKey(prefix, "k")
		seed(t, rdb, key, now-5_000_000) // in a 10 s window, out of a 1 s one
		// 10 s: count 1 before, names <stamp>-1. 1 s: prunes the seed,
		// count 1 again, and <stamp>-1 is taken.
		for _, w := range []int64{10_000_000, 1_000_000} {
			if r := runAt(t, rdb, now, []string{key}, "1", "", 0, check{10, w, 1}); !r.allowed {
				t.Fatalf("window %dµs: denied: %+v", w, r)
			}
		}
		got := rdb.ZRange(ctx, key, 0, -1).Val()
		if diff := cmp.Diff([]string{member(now, 1), fmt.Sprintf("%d.%d-z1", now/1e6, now%1e6)}, got); diff != "" {
			t.Errorf("members (-want +got):\n%s", diff)
		}
	})
}

// TestScriptSameMicrosecondNamesTaken: when the name a unit would take is
// taken, and so is its 'z' name (the members at its score can fall within
// a microsecond, as a place there is dropped), the unit takes the next
// free 'z' name: it is never merged into a member already there.
func TestScriptSameMicrosecondNamesTaken(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		ctx := context.Background()
		now := redisNow(t, rdb)
		key := rawKey(prefix, "k")
		z := fmt.Sprintf("%d.%d-z", now/1e6, now%1e6)
		// Two members, so the unit is named <stamp>-2, which is taken; no
		// member is at now, so its 'z' name is <stamp>-z0, taken too.
		if err := rdb.ZAdd(ctx, key, redis.Z{Score: float64(now - 1_000), Member: member(now, 2)},
			redis.Z{Score: float64(now - 2_000), Member: z + "0"}).Err(); err != nil {
			t.Fatal(err)
		}
		r := runAt(t, rdb, now, []string{key}, "1", "", 0, check{10, time.Minute.Microseconds(), 1})
		if !r.allowed || r.checks[0].Count != 3 {
			t.Fatalf("reply %+v, want admitted with a count of 3", r)
		}
		got := rdb.ZRangeWithScores(ctx, key, 0, -1).Val()
		want := []redis.Z{{Score: float64(now - 2_000), Member: z + "0"}, {Score: float64(now - 1_000), Member: member(now, 2)},
			{Score: float64(now), Member: z + "1"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("members (-want +got):\n%s", diff)
		}
	})
}

// TestScriptRetryAfterExact: the retry-after of a denied check is the exit of
// the entry at index count - limit + cost - 1, to the microsecond; the
// reset-after is the newest entry's exit.
func TestScriptRetryAfterExact(t *testing.T) {
	t.Parallel()
	const w = 10_000_000
	cases := []struct {
		name        string
		limit, cost int64
		index       int // entry whose exit admits the request
	}{
		{"full window, cost 1: the oldest", 5, 1, 0},
		{"lowered limit", 2, 1, 3},
		{"cost above one", 5, 3, 2},
		{"lowered limit and cost", 3, 2, 3},
		{"limit lowered to one", 1, 1, 4},
		{"room for some of the cost", 7, 4, 1},
	}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		now := redisNow(t, rdb)
		var entries []int64 // 9 s to 5 s old, a few microseconds apart from whole seconds
		for i := range int64(5) {
			entries = append(entries, now-9_000_000+i*1_000_003)
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				key := rawKey(prefix, tc.name)
				seed(t, rdb, key, entries...)
				r := runAt(t, rdb, now, []string{key}, "1", "", 0, check{tc.limit, w, tc.cost})
				want := checkReply{Allowed: false, Count: 5, Retry: entries[tc.index] + w - now, ResetAfter: entries[4] + w - now}
				if diff := cmp.Diff(want, r.checks[0]); r.allowed || diff != "" {
					t.Errorf("allowed %v; check (-want +got):\n%s", r.allowed, diff)
				}
				if n := rdb.ZCard(context.Background(), key).Val(); n != 5 {
					t.Errorf("ZCARD = %d after a denial, want 5", n)
				}
			})
		}
	})
}

// TestScriptSearchBoundaries: a rule holding a member ahead of now is
// searched for the earliest time a unit fits, and a member a microsecond
// inside either end of the span of the windows that would hold now, (now -
// window, now + window), keeps now from fitting; one at the end does not.
// The search counts that span first (room there is room in every window
// holding now), and walks only when it is full: counted on a Redis of the
// test's own, the call runs one ZCOUNT when the span answers, more when
// the walk does. (At now, a member at the lower end itself is pruned
// before the search.)
func TestScriptSearchBoundaries(t *testing.T) {
	t.Parallel()
	const w, limit = 10_000_000, 2
	cases := []struct {
		name    string
		members func(now int64) []int64
		retry   int64 // 0: admitted at once
		span    bool  // the span answers: one ZCOUNT
	}{
		// The window ending at now + w - 1 would hold three; the first
		// time that fits is w after the member at now + 5.
		{"a member ahead, a microsecond inside", func(now int64) []int64 { return []int64{now + 5, now + w - 1} }, w + 5, false},
		{"a member ahead, at the end", func(now int64) []int64 { return []int64{now + 5, now + w} }, 0, true},
		// The window ending at now would hold three; the member at now -
		// w + 1 leaves it a microsecond later. The place 3w ahead makes
		// the rule be searched.
		{"a member behind, a microsecond inside", func(now int64) []int64 { return []int64{now - w + 1, now - 5, now + 3*w} }, 1, false},
		{"a member behind, at the end", func(now int64) []int64 { return []int64{now - w, now - 5, now + 3*w} }, 0, true},
	}
	rdb := redistest.OwnClient(t, 0)
	ctx := context.Background()
	now := redisNow(t, rdb)
	for _, tc := range cases {
		key := rawKey("", tc.name)
		seed(t, rdb, key, tc.members(now)...)
		before, _ := commandStat(t, rdb, "zcount")
		r := runAt(t, rdb, now, []string{key}, "1", "", 0, check{limit, w, 1})
		after, _ := commandStat(t, rdb, "zcount")
		if got, want := r.allowed, tc.retry == 0; got != want {
			t.Errorf("%s: allowed %v, want %v: %+v", tc.name, got, want, r)
		}
		if got := r.checks[0].Retry; got != tc.retry {
			t.Errorf("%s: retry-after %d µs, want %d", tc.name, got, tc.retry)
		}
		if zcounts := after - before; (zcounts == 1) != tc.span {
			t.Errorf("%s: %d ZCOUNTs; the span answering is %v", tc.name, zcounts, tc.span)
		}
		if err := rdb.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// scriptCall is a script call whose effect on a key's TTL pexpireOf
// measures.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
}

// pexpireOf returns the TTL in milliseconds that a script call set on a
// key: the key's PEXPIRETIME less the millisecond the call ran in. The
// call runs in one MULTI between two TIMEs on the key's node, so the two
// are microseconds apart; it retries, with setup giving a fresh key each
// time, until they fall in one millisecond, so the figure is exact. The
// script must be loaded (setup loads it); reply gets the call's reply.
func pexpireOf(t *testing.T, rdb redis.UniversalClient, setup func(attempt int) string, call func(key string) scriptCall, reply func(*redis.Cmd)) int64 {
	t.Helper()
	ctx := context.Background()
	gone := 0 // attempts whose key had expired when read
	for attempt := range 200 {
		key := setup(attempt)
		c := call(key)
		node := nodeOf(t, rdb, key)
		var before, after *redis.TimeCmd
		var res *redis.Cmd
		if _, err := node.TxPipelined(ctx, func(p redis.Pipeliner) error {
			before = p.Time(ctx)
			res = p.EvalSha(ctx, c.script.Hash(), c.keys, c.args...)
			after = p.Time(ctx)
			return nil
		}); err != nil {
			t.Fatalf("TIME, the script and TIME on %s: %v", key, err)
		}
		reply(res)
		if before.Val().UnixMilli() != after.Val().UnixMilli() {
			continue
		}
		at, err := rdb.PExpireTime(ctx, key).Result()
		if err != nil {
			t.Fatalf("PEXPIRETIME %s: %v", key, err)
		}
		if at == -2 {
			// No key: it expired before PEXPIRETIME came, as a key of a
			// window of a few milliseconds does on a loaded machine.
			gone++
			continue
		}
		if at < 0 {
			t.Fatalf("PEXPIRETIME %s = %v: no expiry set", key, at)
		}
		return at.Milliseconds() - before.Val().UnixMilli()
	}
	t.Fatalf("TIME changed its millisecond around the script in every call, or the key had expired when read (%d times)", gone)
	return 0
}

// nodeOf returns the client of the node that holds key: rdb itself unless
// it is a cluster's.
func nodeOf(t *testing.T, rdb redis.UniversalClient, key string) redis.Cmdable {
	t.Helper()
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return rdb
	}
	node, err := cc.MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatalf("the node of %s: %v", key, err)
	}
	return node
}

// TestScriptExpiry: every call sets the window's TTL to floor(reset/1000)+1
// milliseconds, exactly: just past the newest entry's exit.
func TestScriptExpiry(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		window    int64
		newestAge int64 // microseconds; -1 when the call admits, making now the newest
		mode      string
		want      int64 // ms
	}{
		{"admitted: reset is the window", 5_000_000, -1, "1", 5001},
		{"peek, reset with a fraction of a millisecond", 5_000_000, 1_500, "0", 4999},
		{"peek, reset of whole milliseconds", 5_000_000, 2_000_000, "0", 3001},
		{"denied, reset under a millisecond", 5_000_000, 4_999_900, "1", 1},
	}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				limit := int64(1)
				if tc.newestAge < 0 {
					limit = 2
				}
				var now int64
				setup := func(attempt int) string {
					key := rawKey(prefix, fmt.Sprint(tc.name, attempt))
					now = redisNow(t, rdb)
					if tc.newestAge >= 0 {
						seed(t, rdb, key, now-tc.newestAge)
					} else {
						seed(t, rdb, key, now-tc.window/2)
					}
					// Loaded here, the script is not compiled within the
					// millisecond that pexpireOf measures.
					if err := fixedClock(t, now).Load(context.Background(), rdb); err != nil {
						t.Fatal(err)
					}
					return key
				}
				got := pexpireOf(t, rdb, setup, func(key string) scriptCall {
					args := []any{tc.mode, "", 0, limit, tc.window, 1, "sliding-log"}
					return scriptCall{fixedClock(t, now).of(args), throttle.WithFrontiers([]string{key}), args}
				}, func(res *redis.Cmd) {
					if _, err := throttle.ScriptReply(res, tc.window); err != nil {
						t.Fatalf("decide.lua: %v", err)
					}
				})
				if got != tc.want {
					t.Errorf("TTL set = %d ms, want %d", got, tc.want)
				}
			})
		}
	})
}

// TestScriptDeclaresItsNotes: decide.lua takes each log check's frontier
// note in KEYS after the logs, and refuses a call that leaves them out
// rather than build their names (Redis's contract: every key in KEYS).
func TestScriptDeclaresItsNotes(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		key := rawKey(prefix, "notes")
		args := []any{"1", "", 0, 10, 10_000_000, 1, "sliding-log"}
		err := lua.Decide.Run(context.Background(), rdb, []string{key}, args...).Err()
		if err == nil || !strings.Contains(err.Error(), "1 keys for 1 checks: want each log, then each note") {
			t.Fatalf("decide.lua without its note: %v, want it refused", err)
		}
		if n, err := rdb.Exists(context.Background(), key).Result(); err != nil || n != 0 {
			t.Errorf("the refused call wrote its log: EXISTS %d, %v", n, err)
		}
		if err := lua.Decide.Run(context.Background(), rdb, throttle.WithFrontiers([]string{key}), args...).Err(); err != nil {
			t.Errorf("decide.lua with its note: %v", err)
		}
	})
}
