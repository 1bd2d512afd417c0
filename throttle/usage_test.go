package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/throttle"
)

// counts are the figures of a Usage that a test knows exactly.
type counts struct {
	Limit, Used, InLine, InLineSoon, Remaining int
}

func countsOf(u throttle.Usage) counts {
	return counts{u.Limit, u.Used, u.InLine, u.InLineSoon, u.Remaining}
}

// inLine runs one AllowInLine call per id over checks, and fails unless the
// first admitted of them are admitted and the others denied.
func inLine(t *testing.T, l *throttle.Limiter, admitted int, checks []throttle.Check, ids ...string) {
	t.Helper()
	for i, id := range ids {
		md, err := l.AllowInLine(context.Background(), id, checks)
		if err != nil {
			t.Fatalf("AllowInLine(%s): %v", id, err)
		}
		if md.Allowed != (i < admitted) {
			t.Fatalf("AllowInLine(%s): Allowed %v, want %v", id, md.Allowed, i < admitted)
		}
	}
}

// usageTimes are the times on the Redis clock, in microseconds, that a
// Usage's RetryAfter and ResetAfter run to; 0 for a duration of 0.
type usageTimes struct{ retry, reset int64 }

// usageCase is a case of TestUsage.
type usageCase struct {
	name  string
	p     throttle.Policy
	setup func(t *testing.T, l *throttle.Limiter, key string)
	want  counts
	// at gives the times of RetryAfter and ResetAfter from the scores of
	// the log's members, oldest first; nil: both 0.
	at func(s []int64) usageTimes
	// full reports that none fits now: RetryAfter > 0 (for the counters,
	// whose times at does not give).
	full bool
}

// usageWindow is the window of TestUsage's policies that outlast the test.
const usageWindow = time.Hour

// usageLog is a sliding log of limit per usageWindow.
func usageLog(limit int) throttle.Policy { return throttle.Policy{Limit: limit, Window: usageWindow} }

// usageCases are TestUsage's cases: sliding logs, then each counter.
func usageCases() []usageCase {
	cases := append(usageLogCases(), usageLineCases()...)
	for _, alg := range counterAlgorithms {
		cases = append(cases, usageCounterCases(alg)...)
	}
	return cases
}

// usageLogCases are TestUsage's cases of a log with admissions, and one
// line of callers.
func usageLogCases() []usageCase {
	w := usageWindow.Microseconds()
	return []usageCase{
		{
			name: "empty key", p: usageLog(4),
			want: counts{Limit: 4, Remaining: 4},
		},
		{
			name: "admissions only", p: usageLog(4),
			setup: func(t *testing.T, l *throttle.Limiter, key string) {
				for range 3 {
					mustAllowN(t, l, key, usageLog(4), 1)
				}
			},
			want: counts{Limit: 4, Used: 3, Remaining: 1},
			at:   func(s []int64) usageTimes { return usageTimes{0, s[2] + w} },
		},
		{
			name: "full", p: usageLog(4),
			setup: func(t *testing.T, l *throttle.Limiter, key string) {
				mustAllowN(t, l, key, usageLog(4), 1)
				mustAllowN(t, l, key, usageLog(4), 3)
			},
			want: counts{Limit: 4, Used: 4},
			at:   func(s []int64) usageTimes { return usageTimes{s[0] + w, s[3] + w} },
		},
		{
			// Two admitted at s0 and s1; three placed at s0+W, s1+W and
			// s0+2W, two of them within a window from now. A new caller
			// comes after them, at s1+2W.
			name: "places in line", p: usageLog(2),
			setup: func(t *testing.T, l *throttle.Limiter, key string) {
				inLine(t, l, 2, []throttle.Check{{Key: key, Policy: usageLog(2), Cost: 1}}, "a", "b", "c", "d", "e")
			},
			want: counts{Limit: 2, Used: 2, InLine: 3, InLineSoon: 2},
			at:   func(s []int64) usageTimes { return usageTimes{s[1] + 2*w, s[0] + 3*w} },
		},
		{
			// Usage's own example with a window of an hour: 4 admitted at
			// s0..s3, 16 placed at s[k%4]+(k/4+1)W; a new caller comes
			// after them, at s0+5W.
			name: "burst of 20", p: usageLog(4),
			setup: func(t *testing.T, l *throttle.Limiter, key string) {
				var ids []string
				for i := range 20 {
					ids = append(ids, fmt.Sprint("caller-", i))
				}
				inLine(t, l, 4, []throttle.Check{{Key: key, Policy: usageLog(4), Cost: 1}}, ids...)
			},
			want: counts{Limit: 4, Used: 4, InLine: 16, InLineSoon: 4},
			at:   func(s []int64) usageTimes { return usageTimes{s[0] + 5*w, s[3] + 5*w} },
		},
	}
}

// usageLineCases are TestUsage's cases of logs checked together with
// another, and of a log whose members have all left the window.
func usageLineCases() []usageCase {
	w := usageWindow.Microseconds()
	short := throttle.Policy{Limit: 2, Window: 50 * time.Millisecond}
	return []usageCase{
		{
			// Checked with a key of 1 an hour, a key of 2 an hour holds one
			// admission at s0 and places at s0+W and s0+2W: 3 units for a
			// limit of 2, yet room for one now.
			name: "places beyond one window, room now", p: usageLog(2),
			setup: func(t *testing.T, l *throttle.Limiter, key string) {
				inLine(t, l, 1, []throttle.Check{{Key: key + ":hour", Policy: usageLog(1), Cost: 1}, {Key: key, Policy: usageLog(2), Cost: 1}}, "a", "b", "c")
			},
			want: counts{Limit: 2, Used: 1, InLine: 2, InLineSoon: 1, Remaining: 1},
			at:   func(s []int64) usageTimes { return usageTimes{0, s[0] + 3*w} },
		},
		{
			// The key of 1 an hour of the case above: full until a window
			// after its last place.
			name: "places beyond one window, full", p: usageLog(1),
			setup: func(t *testing.T, l *throttle.Limiter, key string) {
				inLine(t, l, 1, []throttle.Check{{Key: key, Policy: usageLog(1), Cost: 1}, {Key: key + ":provider", Policy: usageLog(2), Cost: 1}}, "a", "b", "c")
			},
			want: counts{Limit: 1, Used: 1, InLine: 2, InLineSoon: 1},
			at:   func(s []int64) usageTimes { return usageTimes{s[0] + 3*w, s[0] + 3*w} },
		},
		{
			// Admissions, a place, and 200 ms later all have left the
			// window; Redis may have expired the key.
			name: "expired", p: short,
			setup: func(t *testing.T, l *throttle.Limiter, key string) {
				inLine(t, l, 2, []throttle.Check{{Key: key, Policy: short, Cost: 1}}, "a", "b", "c")
				time.Sleep(200 * time.Millisecond)
			},
			want: counts{Limit: 2, Remaining: 2},
		},
	}
}

// usageCounterCases are TestUsage's cases of the counter alg.
func usageCounterCases(alg throttle.Algorithm) []usageCase {
	p := throttle.Policy{Limit: 4, Window: usageWindow, Algorithm: alg}
	pShort := throttle.Policy{Limit: 2, Window: 50 * time.Millisecond, Algorithm: alg}
	return []usageCase{
		{
			name: string(alg) + " admissions", p: p,
			setup: func(t *testing.T, l *throttle.Limiter, key string) { mustAllowN(t, l, key, p, 3) },
			want:  counts{Limit: 4, Used: 3, Remaining: 1},
		},
		{
			// Denied callers in line take no place in a counter.
			name: string(alg) + " full, callers in line", p: p,
			setup: func(t *testing.T, l *throttle.Limiter, key string) {
				mustAllowN(t, l, key, p, 3)
				inLine(t, l, 1, []throttle.Check{{Key: key, Policy: p, Cost: 1}}, "a", "b", "c")
			},
			want: counts{Limit: 4, Used: 4},
			full: true,
		},
		{
			name: string(alg) + " expired", p: pShort,
			setup: func(t *testing.T, l *throttle.Limiter, key string) {
				mustAllowN(t, l, key, pShort, 2)
				time.Sleep(200 * time.Millisecond)
			},
			want: counts{Limit: 2, Remaining: 2},
		},
	}
}

// TestUsage: what Usage reports of a key, against real Redis: the counts
// exactly, RetryAfter and ResetAfter to the microsecond from the scores of
// the log's members (bounded by the Redis clock read around the call), and
// agreeing with Peek.
func TestUsage(t *testing.T) {
	t.Parallel()
	cases := usageCases()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		batched := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix), throttle.WithBatching(nil))
		for _, tc := range cases {
			checkUsage(t, rdb, l, batched, tc)
		}
		// Usage of a key that holds nothing creates none.
		if n, err := rdb.Exists(ctx, redisKey(t, l, "usage:empty key")).Result(); err != nil || n != 0 {
			t.Errorf("EXISTS of the empty key after Usage: %d, %v; want 0", n, err)
		}
	})
}

// checkUsage sets up tc's key, and checks what Usage reports of it, that
// Peek agrees, and that a second Usage, plain and batched, reports the same.
func checkUsage(t *testing.T, rdb redis.UniversalClient, l, batched *throttle.Limiter, tc usageCase) {
	t.Helper()
	ctx := context.Background()
	key := "usage:" + tc.name
	if tc.setup != nil {
		tc.setup(t, l, key)
	}
	var s []int64
	if tc.p.Algorithm == "" {
		s = scores(t, rdb, redisKey(t, l, key))
	}
	before := redisNow(t, rdb)
	u, err := l.Usage(ctx, key, tc.p)
	after := redisNow(t, rdb)
	if err != nil {
		t.Fatalf("%s: Usage: %v", tc.name, err)
	}
	if diff := cmp.Diff(tc.want, countsOf(u)); diff != "" {
		t.Errorf("%s: Usage (-want +got):\n%s", tc.name, diff)
	}
	checkUsageTimes(t, tc, u, s, before, after)

	// Peek agrees, and Usage recorded nothing: a second Usage, and
	// one through a batching limiter, report the same.
	d, err := l.Peek(ctx, key, tc.p)
	end := time.Duration(redisNow(t, rdb)-before) * time.Microsecond
	if err != nil {
		t.Fatalf("%s: Peek: %v", tc.name, err)
	}
	if d.Count != u.Used+u.InLine || d.RetryAfter > u.RetryAfter || d.RetryAfter < u.RetryAfter-end ||
		d.ResetAfter > u.ResetAfter || d.ResetAfter < u.ResetAfter-end || (d.RetryAfter == 0) != (u.Remaining > 0) {
		t.Errorf("%s: Peek %+v after Usage %+v", tc.name, d, u)
	}
	for _, lim := range []*throttle.Limiter{l, batched} {
		again, err := lim.Usage(ctx, key, tc.p)
		if err != nil {
			t.Fatalf("%s: Usage again: %v", tc.name, err)
		}
		if diff := cmp.Diff(countsOf(u), countsOf(again)); diff != "" {
			t.Errorf("%s: Usage again (-first +again):\n%s", tc.name, diff)
		}
	}
}

// checkUsageTimes checks u's RetryAfter and ResetAfter: for a log, against
// tc.at of the scores s, read between the Redis times before and after
// (µs); for a counter, RetryAfter > 0 exactly when tc.full.
func checkUsageTimes(t *testing.T, tc usageCase, u throttle.Usage, s []int64, before, after int64) {
	t.Helper()
	if tc.p.Algorithm != "" {
		if (u.RetryAfter > 0) != tc.full {
			t.Errorf("%s: RetryAfter %v, want it 0 unless full (%v)", tc.name, u.RetryAfter, tc.full)
		}
		return
	}
	var at usageTimes
	if tc.at != nil {
		at = tc.at(s)
	}
	for _, d := range []struct {
		name string
		got  time.Duration
		at   int64
	}{{"RetryAfter", u.RetryAfter, at.retry}, {"ResetAfter", u.ResetAfter, at.reset}} {
		lo, hi := time.Duration(max(0, d.at-after))*time.Microsecond, time.Duration(max(0, d.at-before))*time.Microsecond
		if d.got < lo || d.got > hi {
			t.Errorf("%s: %s %v, want %v to %v", tc.name, d.name, d.got, lo, hi)
		}
	}
}

// TestUsageCountsEveryPlace: a backlog of k callers in line is k places,
// for every k: off by one at any k fails.
func TestUsageCountsEveryPlace(t *testing.T) {
	t.Parallel()
	p := throttle.Policy{Limit: 3, Window: time.Hour}
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		checks := []throttle.Check{{Key: "backlog", Policy: p, Cost: 1}}
		for k := range 8 {
			md, err := l.AllowInLine(ctx, fmt.Sprint("caller-", k), checks)
			if err != nil {
				t.Fatal(err)
			}
			u, err := l.Usage(ctx, "backlog", p)
			if err != nil {
				t.Fatal(err)
			}
			// Places within the next window: the first three, whose slots
			// free a window after the admissions.
			used, places := min(k+1, 3), max(0, k+1-3)
			want := counts{Limit: 3, Used: used, InLine: places, InLineSoon: min(places, 3), Remaining: max(0, 3-used)}
			if diff := cmp.Diff(want, countsOf(u)); diff != "" {
				t.Errorf("after %d callers (last %+v), Usage (-want +got):\n%s", k+1, md.Decision, diff)
			}
		}
	})
}

// TestScriptUsageBoundaries runs the decision script in usage mode ("3")
// with its clock fixed, on a log whose members sit on every boundary: a
// member at now is an admission, one a microsecond later a place; a place
// at now + window is within one window, one a microsecond later is not; a
// member at now - window has left the window.
func TestScriptUsageBoundaries(t *testing.T) {
	t.Parallel()
	const w = 10_000_000
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		now := redisNow(t, rdb)
		key := rawKey(prefix, "usage")
		seed(t, rdb, key, now-w, now-w+1, now, now+1, now+w, now+w+1)
		args := []any{"3", "", 0, 10, w, 1, "sliding-log"}
		raw, err := fixedClock(t, now).Run(context.Background(), rdb, throttle.WithFrontiers([]string{key}), args...).Int64Slice()
		if err != nil {
			t.Fatalf("decide.lua %v: %v", args, err)
		}
		// 4 + 4n values of the decision, then the places and those within
		// a window, then the time of an admission: none.
		want := []int64{1, 1, 5, 0, w + 1 + w, 0, 0, 0, 3, 2, 0}
		if diff := cmp.Diff(want, raw); diff != "" {
			t.Errorf("usage reply (-want +got):\n%s", diff)
		}
		// A counter check beside the log has no places.
		ckey := rawKey(prefix, "usage-gcra")
		args = []any{"3", "", 0, 10, w, 1, "sliding-log", 10, w, 1, "gcra"}
		raw, err = fixedClock(t, now).Run(context.Background(), rdb, throttle.WithFrontiers([]string{key, ckey}), args...).Int64Slice()
		if err != nil {
			t.Fatalf("decide.lua %v: %v", args, err)
		}
		if got, want := raw[len(raw)-5:len(raw)-1], []int64{3, 2, 0, 0}; !cmp.Equal(got, want) {
			t.Errorf("places of a log and a counter = %v, want %v", got, want)
		}
		if n := rdb.Exists(context.Background(), ckey).Val(); n != 0 {
			t.Errorf("usage mode wrote the counter's key")
		}
	})
}

// TestUsageBadInput: bad input is an error errors.Is matches, found before
// Redis; the client here has no server behind it.
func TestUsageBadInput(t *testing.T) {
	t.Parallel()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	ok := throttle.PerSecond(5)
	cases := []struct {
		name string
		l    *throttle.Limiter
		key  string
		p    throttle.Policy
		want error
	}{
		{"empty key", throttle.NewLimiter(dead), "", ok, throttle.ErrInvalidKey},
		{"zero limit", throttle.NewLimiter(dead), "k", throttle.Policy{Window: time.Second}, throttle.ErrInvalidPolicy},
		{"limit above the log's", throttle.NewLimiter(dead), "k", throttle.Policy{Limit: throttle.MaxLimit + 1, Window: time.Second}, throttle.ErrInvalidPolicy},
		{"unknown algorithm", throttle.NewLimiter(dead), "k", throttle.Policy{Limit: 1, Window: time.Second, Algorithm: "leaky"}, throttle.ErrInvalidPolicy},
		{"nil client", throttle.NewLimiter(nil), "k", ok, throttle.ErrInvalidConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u, err := tc.l.Usage(context.Background(), tc.key, tc.p)
			if !errors.Is(err, tc.want) {
				t.Errorf("Usage = %+v, %v; want an error matching %v", u, err, tc.want)
			}
		})
	}
}

// ExampleLimiter_Usage is what a status page shows of a key. It needs a
// Redis at localhost:6379, so it is compiled but not run by go test.
func ExampleLimiter_Usage() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	l := throttle.NewLimiter(rdb)

	u, err := l.Usage(ctx, "sms:tenant:acme", throttle.PerSecond(4))
	if err != nil {
		panic(err) // Redis failed, or the key or policy is bad
	}
	fmt.Printf("%d of %d used, %d in line (%d within a second), %d more fit now, next free in %v\n",
		u.Used, u.Limit, u.InLine, u.InLineSoon, u.Remaining, u.RetryAfter)
}
