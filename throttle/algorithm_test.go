package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/throttle"
)

// The tests in this file run the functions of lua/counters.lua through a
// driver of their own, at times of their choosing: every figure is then
// known to the microsecond. The end-to-end tests through the Limiter are in
// algorithm_limiter_test.go.

// counterDriver calls counter_check on KEYS[1] and, when it allows and
// ARGV[6] is "1", counter_record, and replies {allowed, count, retry, reset}.
// ARGV: algorithm, limit, window (µs), cost, now (µs), record.
const counterDriver = `
define_counters()
local alg, key = ARGV[1], KEYS[1]
local limit, window, cost, now = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local allowed, count, retry, reset, state = counter_check(alg, key, limit, window, cost, now)
if allowed == 1 and ARGV[6] == '1' then
  count, reset = counter_record(alg, key, limit, window, cost, now, state)
end
return {allowed, count, retry, reset}
`

var counterScript = redis.NewScript(lua.CountersSource() + "\n" + counterDriver)

// counterReply is the driver's reply.
type counterReply struct {
	Allowed             bool
	Count, Retry, Reset int64 // Retry and Reset in µs
}

// counterCall is one call of the driver.
type counterCall struct {
	alg                 throttle.Algorithm
	limit, window, cost int64 // window in µs
	now                 int64 // µs
	record              bool  // record when allowed; false: check only, as Peek
}

func runCounter(t *testing.T, rdb redis.UniversalClient, key string, c counterCall) counterReply {
	t.Helper()
	rec := "0"
	if c.record {
		rec = "1"
	}
	return counterReplyOf(t, counterScript.Run(context.Background(), rdb, []string{key}, string(c.alg), c.limit, c.window, c.cost, c.now, rec))
}

// counterReplyOf reads the driver's reply.
func counterReplyOf(t *testing.T, cmd *redis.Cmd) counterReply {
	t.Helper()
	raw, err := cmd.Int64Slice()
	if err != nil {
		t.Fatalf("counters: %v", err)
	}
	if len(raw) != 4 {
		t.Fatalf("driver replied %v", raw)
	}
	return counterReply{raw[0] == 1, raw[1], raw[2], raw[3]}
}

// t0 is the fixed clock of the tests, in µs of the Unix epoch: a multiple
// of an hour, so windows of 1 s, 10 s, 1 min and 1 h start at it.
const t0 = 1_800_000_000_000_000

// step is one call of a sequence at t0 + at, and what it must reply.
type step struct {
	at     int64 // µs after t0
	cost   int64
	peek   bool // check only
	want   counterReply
	fields map[string]string // when set, the key's hash after the call
}

func allowed(count, reset int64) counterReply { return counterReply{true, count, 0, reset} }
func denied(count, retry, reset int64) counterReply {
	return counterReply{false, count, retry, reset}
}

// counterSequence is a case of TestCounterSequences: an algorithm, its
// limit and window (µs), and the steps of a sequence on one key.
type counterSequence struct {
	name          string
	alg           throttle.Algorithm
	limit, window int64
	steps         []step
}

// windowSequences are the sequences of the fixed and sliding windows.
func windowSequences() []counterSequence {
	const s = 1_000_000 // µs
	return []counterSequence{
		{"fixed window: 3 per 10 s", throttle.FixedWindow, 3, 10 * s, []step{
			{at: 1 * s, cost: 1, want: allowed(1, 9*s), fields: map[string]string{"s": fmt.Sprint(t0), "c": "1"}},
			{at: 2 * s, cost: 2, want: allowed(3, 8*s)},
			{at: 3 * s, cost: 1, want: denied(3, 7*s, 7*s)},
			{at: 10*s - 1, cost: 1, want: denied(3, 1, 1)},
			// The next window starts at 0, whatever the last one held.
			{at: 10 * s, cost: 1, peek: true, want: allowed(0, 0)},
			{at: 10 * s, cost: 3, want: allowed(3, 10*s), fields: map[string]string{"s": fmt.Sprint(t0 + 10*s), "c": "3"}},
			{at: 25 * s, cost: 1, want: allowed(1, 5*s)},
			{at: 26 * s, cost: 3, want: denied(1, 4*s, 4*s)},
			{at: 26 * s, cost: 2, want: allowed(3, 4*s)},
		}},
		{"sliding window: 10 per 10 s", throttle.SlidingWindow, 10, 10 * s, []step{
			// Window W0 = [t0, t0+10s). reset: to the end of the window
			// after the current one, while the current one holds units.
			{at: 1 * s, cost: 4, want: allowed(4, 19*s), fields: map[string]string{"s": fmt.Sprint(t0), "c": "4", "p": "0", "w": "10000000"}},
			{at: 2 * s, cost: 6, want: allowed(10, 18*s)},
			// Full. The previous window is empty, so the request fits once
			// the next window is far enough in for 10 units to weigh 9:
			// ceil(10 × 9 s / 10 s) = 9 at 11 s, 10 a microsecond before.
			{at: 3 * s, cost: 1, want: denied(10, 8*s, 17*s)},
			{at: 11*s - 1, cost: 1, want: denied(10, 1, 9*s+1)},
			{at: 11 * s, cost: 1, want: allowed(10, 19*s), fields: map[string]string{"s": fmt.Sprint(t0 + 10*s), "c": "1", "p": "10", "w": "10000000"}},
			// Halfway: the previous 10 weigh 5, plus 1 current.
			{at: 15 * s, cost: 1, peek: true, want: allowed(6, 15*s)},
			{at: 15 * s, cost: 1, want: allowed(7, 15*s)},
			// Cost 4 needs the previous window to weigh 4: at 4 s left.
			{at: 15 * s, cost: 4, want: denied(7, 1*s, 15*s)},
			{at: 16*s - 1, cost: 4, want: denied(7, 1, 14*s+1)},
			{at: 16 * s, cost: 4, want: allowed(10, 14*s)},
			// Two windows later nothing counts.
			{at: 35 * s, cost: 10, want: allowed(10, 15*s)},
			// Cost = limit with units in the current window: not before
			// the window after the next.
			{at: 35*s + 1, cost: 10, want: denied(10, 15*s-1, 15*s-1)},
		}},
		{"sliding window rounds the weight up", throttle.SlidingWindow, 3, 1 * s, []step{
			{at: 0, cost: 3, want: allowed(3, 2*s)},
			// Next window: 3 × (1 s - e) / 1 s, rounded up, is 3 until a
			// third of the window has passed, then 2 until two thirds.
			{at: 1*s + 1, cost: 1, peek: true, want: denied(3, 333_333, 999_999)},
			{at: 1*s + 333_333, cost: 1, peek: true, want: denied(3, 1, 666_667)},
			{at: 1*s + 333_334, cost: 1, want: allowed(3, 2*s-333_334)},
		}},
	}
}

// gcraSequences are the sequences of GCRA.
func gcraSequences() []counterSequence {
	const s = 1_000_000 // µs
	return []counterSequence{
		{"gcra: 4 per 10 s", throttle.GCRA, 4, 10 * s, []step{
			// Emission interval 2.5 s. count: units' worth of TAT ahead.
			{at: 0, cost: 1, want: allowed(1, 2_500_000), fields: map[string]string{"t": fmt.Sprint(t0 + 2_500_000), "f": "0", "l": "4"}},
			{at: 0, cost: 3, want: allowed(4, 10*s)},
			{at: 1, cost: 1, want: denied(4, 2_499_999, 10*s-1)},
			{at: 2_500_000, cost: 1, peek: true, want: allowed(3, 7_500_000)},
			{at: 2_500_000, cost: 1, want: allowed(4, 10*s)},
			{at: 2_500_000, cost: 2, want: denied(4, 5*s, 10*s)},
			// Long after: a full burst again.
			{at: 30 * s, cost: 4, want: allowed(4, 10*s)},
		}},
		{"gcra keeps a fractional emission interval exactly", throttle.GCRA, 3, 1 * s, []step{
			// T = 333,333⅓ µs.
			{at: 0, cost: 1, want: allowed(1, 333_334), fields: map[string]string{"t": fmt.Sprint(t0 + 333_333), "f": "1", "l": "3"}},
			{at: 0, cost: 1, want: allowed(2, 666_667)},
			{at: 0, cost: 1, want: allowed(3, 1*s), fields: map[string]string{"t": fmt.Sprint(t0 + 1*s), "f": "0", "l": "3"}},
			// Fits once TAT - now <= 2T = 666,666⅔: at 333,333⅓, so from
			// the whole microsecond 333,334.
			{at: 0, cost: 1, want: denied(3, 333_334, 1*s)},
			{at: 333_333, cost: 1, want: denied(3, 1, 666_667)},
			{at: 333_334, cost: 1, want: allowed(3, 1*s)},
		}},
	}
}

// TestCounterSequences runs each algorithm through a sequence of calls on
// one key, to the microsecond: admissions up to the limit, costs above 1,
// exact retry and reset times, window rollover, and peeks that change
// nothing.
func TestCounterSequences(t *testing.T) {
	t.Parallel()
	cases := append(windowSequences(), gcraSequences()...)
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				runCounterSequence(t, rdb, rawKey(prefix, tc.name), tc)
			})
		}
	})
}

// runCounterSequence runs tc's steps on key, checking each reply, that a
// call that records nothing leaves the key as it was, and the key's hash
// where a step gives it.
func runCounterSequence(t *testing.T, rdb redis.UniversalClient, key string, tc counterSequence) {
	t.Helper()
	for i, st := range tc.steps {
		c := counterCall{tc.alg, tc.limit, tc.window, st.cost, t0 + st.at, !st.peek}
		before := snapshot(t, rdb, key)
		got := runCounter(t, rdb, key, c)
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Errorf("step %d (at %d µs, cost %d, peek %v) (-want +got):\n%s", i, st.at, st.cost, st.peek, diff)
		}
		after := snapshot(t, rdb, key)
		if (st.peek || !got.Allowed) && before != after {
			t.Errorf("step %d: a check that records nothing changed the key: %+v, then %+v", i, before, after)
		}
		if st.fields != nil {
			if diff := cmp.Diff(st.fields, after.hash()); diff != "" {
				t.Errorf("step %d: the key's hash (-want +got):\n%s", i, diff)
			}
		}
	}
}

// keyState is a key's hash, as sorted "field=value" pairs, and its
// PEXPIRETIME in ms (-2 when there is no key).
type keyState struct {
	fields   string
	expireAt int64
}

func (k keyState) hash() map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Fields(k.fields) {
		f, v, _ := strings.Cut(kv, "=")
		m[f] = v
	}
	return m
}

func snapshot(t *testing.T, rdb redis.UniversalClient, key string) keyState {
	t.Helper()
	ctx := context.Background()
	h, err := rdb.HGetAll(ctx, key).Result()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", key, err)
	}
	pairs := make([]string, 0, len(h))
	for f, v := range h {
		pairs = append(pairs, f+"="+v)
	}
	slices.Sort(pairs)
	at, err := rdb.PExpireTime(ctx, key).Result()
	if err != nil {
		t.Fatalf("PEXPIRETIME %s: %v", key, err)
	}
	return keyState{strings.Join(pairs, " "), at.Milliseconds()}
}

// TestCounterChangedPolicies: a key written under one limit or window and
// read under another. GCRA keeps its arrival time (its fraction rounded up
// to the new limit's units); the window counters keep a count only while the
// window it was counted in started within the new current or previous
// window.
func TestCounterChangedPolicies(t *testing.T) {
	t.Parallel()
	const s = 1_000_000
	type call struct {
		limit, window, at, cost int64
		peek                    bool
		want                    counterReply
	}
	cases := []struct {
		name   string
		alg    throttle.Algorithm
		calls  []call
		fields map[string]string // the key's hash at the end, when set
	}{
		{"gcra: lowered limit", throttle.GCRA, []call{
			// T = 333,333⅓ µs, then 500,000 µs: TAT t0 + 333,333⅓ becomes
			// t0 + 333,333½, and one unit more t0 + 833,333½.
			{3, 1 * s, 0, 1, false, allowed(1, 333_334)},
			{2, 1 * s, 0, 1, false, allowed(2, 833_334)},
		}, map[string]string{"t": fmt.Sprint(t0 + 833_333), "f": "1", "l": "2"}},
		{"gcra: shorter window", throttle.GCRA, []call{
			{10, 10 * s, 0, 10, false, allowed(10, 10*s)},
			// TAT 10 s ahead is 100 emission intervals of 100 ms.
			{10, 1 * s, 0, 1, false, denied(100, 9*s+100_000, 10*s)},
		}, nil},
		{"fixed window: a longer window keeps a count that started in it", throttle.FixedWindow, []call{
			{5, 1 * s, 5*s + 1, 2, false, allowed(2, s-1)},
			{5, 10 * s, 5*s + 2, 1, false, allowed(3, 5*s-2)},
		}, map[string]string{"s": fmt.Sprint(t0), "c": "3"}},
		{"fixed window: a shorter window forgets a count that started before it", throttle.FixedWindow, []call{
			{5, 10 * s, 1, 5, false, allowed(5, 10*s-1)},
			{5, 1 * s, 3*s + 1, 5, false, allowed(5, s-1)},
		}, nil},
		{"sliding window: a longer window", throttle.SlidingWindow, []call{
			// Counted in the 1 s windows at 4 s and 5 s: both started in the
			// 10 s window at t0, and are current there.
			{10, 1 * s, 4 * s, 3, false, allowed(3, 2*s)},
			{10, 1 * s, 5 * s, 2, false, allowed(5, 2*s)},
			{10, 10 * s, 5*s + 1, 1, false, allowed(6, 15*s-1)},
		}, map[string]string{"s": fmt.Sprint(t0), "c": "6", "p": "0", "w": "10000000"}},
		{"sliding window: a shorter window", throttle.SlidingWindow, []call{
			{10, 10 * s, 1, 8, false, allowed(8, 20*s-1)},
			// The 8 were counted in a window that started at t0: the
			// previous 1 s window at 1.5 s, where they weigh 4; before the
			// previous one at 2.5 s, where they count no more.
			{10, 1 * s, 1*s + 500_000, 7, true, denied(4, 125_000, 500_000)},
			{10, 1 * s, 2*s + 500_000, 10, false, allowed(10, 1*s+500_000)},
		}, nil},
	}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				key := rawKey(prefix, tc.name)
				for i, c := range tc.calls {
					got := runCounter(t, rdb, key, counterCall{tc.alg, c.limit, c.window, c.cost, t0 + c.at, !c.peek})
					if diff := cmp.Diff(c.want, got); diff != "" {
						t.Errorf("call %d (limit %d, window %d µs) (-want +got):\n%s", i, c.limit, c.window, diff)
					}
				}
				if tc.fields != nil {
					if diff := cmp.Diff(tc.fields, snapshot(t, rdb, key).hash()); diff != "" {
						t.Errorf("the key's hash (-want +got):\n%s", diff)
					}
				}
			})
		}
	})
}

// TestCounterLargeFigures runs the counters at MaxCounterLimit and
// MaxWindow, where products of counts and windows pass 2^53, against the
// same figures computed with big integers.
func TestCounterLargeFigures(t *testing.T) {
	t.Parallel()
	const limit = throttle.MaxCounterLimit - 9 // 9,999,991: the emission interval is no whole microsecond
	w := throttle.MaxWindow.Microseconds()
	// ceilDiv returns ceil(a * b / c) for positive a, b, c.
	ceilDiv := func(a, b, c int64) int64 {
		n := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
		n.Add(n, big.NewInt(c-1))
		return n.Quo(n, big.NewInt(c)).Int64()
	}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		now := t0 - t0%w + 1_234_567 // 1,234,567 µs into a window
		call := func(alg throttle.Algorithm, key string, at, cost int64, record bool) counterReply {
			return runCounter(t, rdb, rawKey(prefix, key), counterCall{alg, limit, w, cost, at, record})
		}
		// The keys would live for ten years.
		t.Cleanup(func() { rdb.Del(context.Background(), rawKey(prefix, "gcra"), rawKey(prefix, "sw")) })

		// GCRA: a full burst, then one unit an emission interval later.
		if got, want := call(throttle.GCRA, "gcra", now, limit, true), allowed(limit, w); got != want {
			t.Errorf("gcra burst = %+v, want %+v", got, want)
		}
		interval := ceilDiv(1, w, limit) // ceil(T)
		if got, want := call(throttle.GCRA, "gcra", now, 1, true), denied(limit, interval, w); got != want {
			t.Errorf("gcra after the burst = %+v, want %+v", got, want)
		}
		// Halfway through the burst's window TAT - now is w/2: it counts
		// ceil(limit / 2) units, and a request of the whole limit waits
		// for the rest.
		half := ceilDiv(w/2, limit, w)
		if got, want := call(throttle.GCRA, "gcra", now+w/2, 1, false), allowed(half, w/2); got != want {
			t.Errorf("gcra halfway, cost 1 = %+v, want %+v", got, want)
		}
		if got, want := call(throttle.GCRA, "gcra", now+w/2, limit, false), denied(half, w/2, w/2); got != want {
			t.Errorf("gcra halfway, cost %d = %+v, want %+v", limit, got, want)
		}

		// Sliding window: the previous window full, weighed at every
		// point.
		if got := call(throttle.SlidingWindow, "sw", now, limit, true); !got.Allowed || got.Count != limit {
			t.Fatalf("sliding window burst = %+v", got)
		}
		next := now - 1_234_567 + w // the start of the next window
		for _, e := range []int64{0, 1, 7, w / 3, w / 2, w - 12_345, w - 1} {
			d := w - e
			weighted := ceilDiv(limit, d, w)
			got := call(throttle.SlidingWindow, "sw", next+e, 1, false)
			if got.Count != weighted || got.Allowed != (weighted+1 <= limit) {
				t.Errorf("sliding window %d µs into the next window: %+v, want count %d", e, got, weighted)
			}
			if !got.Allowed {
				// The request fits when the weight drops to limit - 1, at
				// floor((limit-1) × w / limit) µs left.
				left := new(big.Int).Quo(new(big.Int).Mul(big.NewInt(limit-1), big.NewInt(w)), big.NewInt(limit)).Int64()
				if want := d - left; got.Retry != want {
					t.Errorf("sliding window %d µs in: retry %d, want %d", e, got.Retry, want)
				}
			}
		}
	})
}

// TestCounterExpiry: counter_record sets the key to expire at
// floor(reset / 1000) + 1 ms, just after the key stops limiting.
func TestCounterExpiry(t *testing.T) {
	t.Parallel()
	cases := []struct {
		alg           throttle.Algorithm
		limit, window int64
		cost          int64
	}{
		{throttle.SlidingWindow, 10, 10_000_000, 1},
		{throttle.SlidingWindow, 10, 1_000, 10},
		{throttle.GCRA, 3, 1_000_000, 1},
		{throttle.GCRA, 7, 10_000, 3},
		{throttle.FixedWindow, 10, 10_000_000, 4},
		{throttle.FixedWindow, 10, 1_500, 1},
	}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		for _, tc := range cases {
			name := fmt.Sprintf("%s %d per %d µs, cost %d", tc.alg, tc.limit, tc.window, tc.cost)
			t.Run(name, func(t *testing.T) {
				var reset int64
				setup := func(attempt int) string {
					// Loaded here, the script is not compiled within the
					// millisecond that pexpireOf measures.
					if err := counterScript.Load(context.Background(), rdb).Err(); err != nil {
						t.Fatal(err)
					}
					return rawKey(prefix, fmt.Sprint(name, attempt))
				}
				ttl := pexpireOf(t, rdb, setup, func(key string) scriptCall {
					now := redisNow(t, rdb)
					return scriptCall{counterScript, []string{key}, []any{string(tc.alg), tc.limit, tc.window, tc.cost, now, "1"}}
				}, func(res *redis.Cmd) {
					r := counterReplyOf(t, res)
					if !r.Allowed || r.Reset <= 0 {
						t.Fatalf("first call on an empty key = %+v", r)
					}
					reset = r.Reset
				})
				if want := reset/1000 + 1; ttl != want {
					t.Errorf("TTL = %d ms, want %d (reset %d µs)", ttl, want, reset)
				}
			})
		}
	})
}

// TestCounterCheckOfAnEmptyKeyWritesNothing: a check that does not record
// leaves no key behind.
func TestCounterCheckOfAnEmptyKeyWritesNothing(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		for _, alg := range []throttle.Algorithm{throttle.SlidingWindow, throttle.GCRA, throttle.FixedWindow} {
			key := rawKey(prefix, string(alg))
			if got, want := runCounter(t, rdb, key, counterCall{alg, 5, 1_000_000, 5, t0, false}), allowed(0, 0); got != want {
				t.Errorf("%s: check of an empty key = %+v, want %+v", alg, got, want)
			}
			if n := rdb.Exists(context.Background(), key).Val(); n != 0 {
				t.Errorf("%s: a check made the key", alg)
			}
		}
	})
}

// TestCounterUnknownAlgorithm: the functions refuse an algorithm they do
// not know rather than guess.
func TestCounterUnknownAlgorithm(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	err := counterScript.Run(context.Background(), rdb, []string{rawKey(redistest.Prefix(t), "k")}, "leaky-bucket", 1, 1000, 1, t0, "1").Err()
	if err == nil || !strings.Contains(err.Error(), "unknown algorithm leaky-bucket") {
		t.Errorf("error = %v, want one naming the unknown algorithm", err)
	}
}

// TestPolicyAlgorithm checks what Validate accepts of each algorithm and
// how a policy prints.
func TestPolicyAlgorithm(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		policy  throttle.Policy
		wantErr string // "" when valid
		str     string
	}{
		{"default", throttle.PerSecond(10), "", "10/1s"},
		{"sliding log named", throttle.Policy{Limit: 10, Window: time.Second, Algorithm: throttle.SlidingLog}, "", "10/1s"},
		{"sliding window", throttle.Policy{Limit: 10, Window: time.Second, Algorithm: throttle.SlidingWindow}, "", "10/1s sliding-window"},
		{"gcra", throttle.Policy{Limit: 10, Window: time.Second, Algorithm: throttle.GCRA}, "", "10/1s gcra"},
		{"fixed window", throttle.Policy{Limit: 10, Window: time.Second, Algorithm: throttle.FixedWindow}, "", "10/1s fixed-window"},
		{"unknown", throttle.Policy{Limit: 10, Window: time.Second, Algorithm: "leaky-bucket"},
			`unknown algorithm "leaky-bucket": use "sliding-log", "sliding-window", "gcra", "fixed-window"`, ""},
		{"capitals", throttle.Policy{Limit: 10, Window: time.Second, Algorithm: "GCRA"}, `unknown algorithm "GCRA"`, ""},
		{"log above its maximum", throttle.Policy{Limit: throttle.MaxLimit + 1, Window: time.Second},
			"limit 100001 is above the maximum of 100000", ""},
		{"counter above the log's maximum", throttle.Policy{Limit: throttle.MaxLimit + 1, Window: time.Second, Algorithm: throttle.GCRA}, "", "100001/1s gcra"},
		{"counter at its maximum", throttle.Policy{Limit: throttle.MaxCounterLimit, Window: throttle.MaxWindow, Algorithm: throttle.FixedWindow}, "", ""},
		{"counter above its maximum", throttle.Policy{Limit: throttle.MaxCounterLimit + 1, Window: time.Second, Algorithm: throttle.SlidingWindow},
			"limit 10000001 is above the maximum of 10000000 for sliding-window", ""},
		{"counter window too short", throttle.Policy{Limit: 1, Window: time.Microsecond, Algorithm: throttle.GCRA}, "shorter than 1ms", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.policy.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !errors.Is(err, throttle.ErrInvalidPolicy) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate() = %v, want ErrInvalidPolicy with %q", err, tc.wantErr)
			}
			if tc.str != "" {
				if got := tc.policy.String(); got != tc.str {
					t.Errorf("String() = %q, want %q", got, tc.str)
				}
			}
		})
	}
	if got, want := throttle.Algorithm("").String(), "sliding-log"; got != want {
		t.Errorf(`Algorithm("").String() = %q, want %q`, got, want)
	}
}

// TestRedisKeyFor: every algorithm keeps a key's state in a key of its own,
// beside the log in the same hash tag, for hostile keys too.
func TestRedisKeyFor(t *testing.T) {
	t.Parallel()
	l := throttle.NewLimiter(redis.NewClient(&redis.Options{}))
	for a, want := range map[throttle.Algorithm]string{
		"":                     "sluice:{limits}:sms:acme",
		throttle.SlidingLog:    "sluice:{limits}:sms:acme",
		throttle.SlidingWindow: "sluice:{limits}sw:sms:acme",
		throttle.GCRA:          "sluice:{limits}gcra:sms:acme",
		throttle.FixedWindow:   "sluice:{limits}fw:sms:acme",
	} {
		if got, err := l.RedisKeyFor("sms:acme", a); err != nil || got != want {
			t.Errorf("RedisKeyFor(sms:acme, %q) = %q, %v; want %q", a, got, err, want)
		}
	}
	if _, err := l.RedisKeyFor("k", "leaky-bucket"); !errors.Is(err, throttle.ErrInvalidPolicy) {
		t.Errorf("RedisKeyFor of an unknown algorithm: %v, want ErrInvalidPolicy", err)
	}
	if _, err := l.RedisKeyFor("", throttle.GCRA); !errors.Is(err, throttle.ErrInvalidKey) {
		t.Errorf("RedisKeyFor of an empty key: %v, want ErrInvalidKey", err)
	}

	seen := map[string]string{}
	for _, k := range throttle.HostileKeys() {
		log, err := l.RedisKey(k)
		if err != nil {
			t.Fatal(err)
		}
		tag := log[:strings.Index(log, "}")+1]
		for _, a := range throttle.Algorithms() {
			rkey, err := l.RedisKeyFor(k, a)
			if err != nil {
				t.Fatal(err)
			}
			if a == throttle.SlidingLog && rkey != log {
				t.Errorf("RedisKeyFor(%.40q, sliding-log) = %.80q, not RedisKey's %.80q", k, rkey, log)
			}
			if !strings.HasPrefix(rkey, tag) {
				t.Errorf("key %.80q of %.40q under %s is not in the hash tag %q", rkey, k, a, tag)
			}
			if other, dup := seen[rkey]; dup {
				t.Errorf("%.40q under %s and %s share the Redis key %.80q", k, a, other, rkey)
			}
			seen[rkey] = fmt.Sprintf("%.40q under %s", k, a)
		}
	}
}
