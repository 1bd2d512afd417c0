package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// TestModelsMatchTheLua runs random sequences of calls through the
// accuracy section's models and through the Lua functions of
// lua/counters.lua (counterScript, with the same clock), and wants the same
// reply from both, call by call: allowed, count, retry and reset. The
// models compute the definitions with exact fractions and find the retry by
// search; the Lua uses closed forms in doubles. The policies go from a
// limit of 1 to MaxCounterLimit and from a millisecond window to MaxWindow;
// one sequence changes the policy of its key between calls.
func TestModelsMatchTheLua(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() {
		for _, k := range redistest.Keys(t, rdb, prefix) {
			rdb.Del(context.Background(), k)
		}
	})
	const s = 1_000_000
	sequences := []modelSequence{
		{"3 per second", []modelPolicy{{3, s}}},
		{"100 per second", []modelPolicy{{100, s}}},
		{"7 per 10 ms", []modelPolicy{{7, 10_000}}},
		{"1 per millisecond", []modelPolicy{{1, 1_000}}},
		{"1000 a day", []modelPolicy{{1000, 86_400 * s}}},
		{"12,345 per 7.000003 s", []modelPolicy{{12_345, 7*s + 3}}},
		{"the largest", []modelPolicy{{throttle.MaxCounterLimit - 9, throttle.MaxWindow.Microseconds()}}},
		{"changing policies", []modelPolicy{{3, s}, {5, s}, {10, s}, {3, 2_500_000}, {10, 10 * s}, {7, 100_000}}},
	}
	algorithms := []throttle.Algorithm{throttle.SlidingWindow, throttle.GCRA, throttle.FixedWindow}
	ctx := context.Background()
	for si, seq := range sequences {
		for ai, alg := range algorithms {
			mr := &modelRun{r: rand.New(rand.NewPCG(uint64(si), uint64(ai))), prefix: prefix, si: si, seq: seq, alg: alg}
			for call := range 300 {
				mr.check(t, ctx, rdb, mr.next(call))
			}
		}
	}
}

// modelPolicy is a policy of TestModelsMatchTheLua: limit per w µs.
type modelPolicy struct{ limit, w int64 }

// modelSequence is a sequence of TestModelsMatchTheLua.
type modelSequence struct {
	name     string
	policies []modelPolicy // each call picks one
}

// modelRun is a sequence of TestModelsMatchTheLua under one algorithm:
// its random source, and the key, model and clock carried from call to
// call.
type modelRun struct {
	r                        *rand.Rand
	prefix                   string
	si                       int // the sequence's index
	seq                      modelSequence
	alg                      throttle.Algorithm
	key                      string
	m                        model
	now, lastRetry, lastCost int64
}

// modelCall is one call of a modelRun, at its now.
type modelCall struct {
	n      int // from 0
	p      modelPolicy
	cost   int64
	record bool
}

// next draws call n of the run: the time, policy, cost and whether it
// records, on a fresh key at the start and when the clock has gone far.
func (mr *modelRun) next(n int) modelCall {
	const s = 1_000_000
	r := mr.r
	if n == 0 || mr.now > 4e15 {
		// A fresh key, at times that Redis's doubles hold with
		// room to spare (4e15 µs is in the year 2096; windows
		// of ten years walk there in a few calls).
		mr.key = fmt.Sprintf("%s{m}%s:%d:%d", mr.prefix, mr.alg, mr.si, n)
		mr.m = newModel(mr.alg)
		mr.now = int64(accuracyEpoch) + r.Int64N(10*s)
	}
	p := mr.seq.policies[r.IntN(len(mr.seq.policies))]
	cost := int64(1)
	if mr.lastRetry > 0 && r.IntN(2) == 0 {
		// Where rounding decides: the last denied request again,
		// at the microsecond it was told to come back at or the
		// one before.
		mr.now += mr.lastRetry - r.Int64N(2)
		cost = mr.lastCost
	} else {
		mr.now = step(r, mr.now, p.w)
		switch r.IntN(5) {
		case 0:
			cost = 1 + r.Int64N(p.limit)
		case 1:
			cost = p.limit
		}
	}
	mr.lastRetry = 0
	record := r.IntN(8) > 0
	return modelCall{n: n, p: p, cost: cost, record: record}
}

// check runs c through the model and through the Lua, and fails t unless
// both reply the same.
func (mr *modelRun) check(t *testing.T, ctx context.Context, rdb *redis.Client, c modelCall) {
	t.Helper()
	p, cost, now := c.p, c.cost, mr.now
	want := mr.m.check(now, p.limit, p.w, cost)
	wantRetry := int64(0)
	if !want.allowed {
		wantRetry = retryOf(mr.m, now, p.limit, p.w, cost)
		if len(mr.seq.policies) == 1 {
			mr.lastRetry, mr.lastCost = wantRetry, cost
		}
	}
	rec := "0"
	if c.record {
		rec = "1"
	}
	// The keys' TTLs run on the Redis clock, not this one: the
	// script drops them, before a TTL of 1 ms can take the key.
	// (TTLs are tested in package throttle.)
	got, err := counterScript.Run(ctx, rdb, []string{mr.key}, string(mr.alg), p.limit, p.w, cost, now, rec, "persist").Int64Slice()
	if err != nil {
		t.Fatalf("%s, %s, call %d: %v", mr.seq.name, mr.alg, c.n, err)
	}
	if want.allowed && c.record {
		mr.m.record(now, p.limit, p.w, cost)
		want.count += cost
		want.reset = mr.m.check(now, p.limit, p.w, 1).reset
	}
	wantReply := []int64{0, want.count, wantRetry, want.reset}
	if want.allowed {
		wantReply[0] = 1
	}
	if mr.alg == throttle.GCRA && want.count > 2*p.limit && got[1] >= want.count-1 && got[1] <= want.count+1 {
		// Far beyond the limit the Lua estimates the count
		// (the request is denied whatever it is).
		got[1] = want.count
	}
	if diff := cmp.Diff(wantReply, got); diff != "" {
		t.Fatalf("%s, %s, call %d (%d per %d µs, cost %d, record %v, %d µs into the window): {allowed, count, retry, reset} at %d µs (-model +lua):\n%s",
			mr.seq.name, mr.alg, c.n, p.limit, p.w, cost, c.record, now%p.w, now, diff)
	}
}

// TestRetryOfIsTheFirstFit: the models' retry is the first whole
// microsecond at which the request fits.
func TestRetryOfIsTheFirstFit(t *testing.T) {
	t.Parallel()
	const w = 1_000_000
	for _, alg := range throttle.Algorithms()[1:] {
		m := newModel(alg)
		now := int64(accuracyEpoch + 123_457)
		m.record(now, 3, w, 3)
		now += 200_000
		for _, cost := range []int64{1, 2, 3} {
			x := retryOf(m, now, 3, w, cost)
			if x <= 0 || m.check(now+x-1, 3, w, cost).allowed || !m.check(now+x, 3, w, cost).allowed {
				t.Errorf("%s, cost %d: retry %d µs is not the first microsecond that fits", alg, cost, x)
			}
		}
	}
}

// TestSimulateAccuracy checks the section's figures against what is known
// of each algorithm: the exact log never strays; a fixed window admits the
// limit twice over across a window edge and never denies with room; any of
// them admits at most twice the limit in a window; the sliding-window
// counter strays a little on random arrivals, both ways. It also wants the
// same figures from a second run, and the whole run fast.
func TestSimulateAccuracy(t *testing.T) {
	t.Parallel()
	start := time.Now()
	ar := simulateAccuracy()
	elapsed := time.Since(start)
	t.Logf("simulated in %v", elapsed)
	if diff := cmp.Diff(ar, simulateAccuracy()); diff != "" {
		t.Errorf("a second run differs (-first +second):\n%s", diff)
	}
	if ar.Limit != AccuracyLimit || ar.WindowSeconds != AccuracyWindow.Seconds() || len(ar.Patterns) != len(accuracyPatterns()) {
		t.Fatalf("result: limit %d, window %v s, %d patterns", ar.Limit, ar.WindowSeconds, len(ar.Patterns))
	}
	rows := map[string]map[throttle.Algorithm]AccuracyRow{}
	for _, p := range ar.Patterns {
		if p.Requests < 1000 {
			t.Errorf("%s: %d requests", p.Name, p.Requests)
		}
		if len(p.Rows) != len(throttle.Algorithms()) {
			t.Fatalf("%s: %d rows, want one per algorithm", p.Name, len(p.Rows))
		}
		rows[p.Name] = map[throttle.Algorithm]AccuracyRow{}
		for i, r := range p.Rows {
			alg := throttle.Algorithm(r.Algorithm)
			if alg != throttle.Algorithms()[i] {
				t.Errorf("%s: row %d is %s, want %s", p.Name, i, alg, throttle.Algorithms()[i])
			}
			rows[p.Name][alg] = r
			if r.Admitted+r.Denied != p.Requests || r.MaxInWindowOverLimit > 2 || r.MaxInWindowOverLimit < 0.5 {
				t.Errorf("%s, %s: %+v of %d requests", p.Name, alg, r, p.Requests)
			}
		}
		log := rows[p.Name][throttle.SlidingLog]
		if log.MaxInWindowOverLimit != 1 || log.LeastAtDenialOverLimit != 1 || log.WronglyDenied != 0 || log.WronglyAdmitted != 0 || log.AdmittedOverLog != 1 {
			t.Errorf("%s: the exact log strays: %+v", p.Name, log)
		}
		if fw := rows[p.Name][throttle.FixedWindow]; fw.WronglyDenied != 0 || (fw.Denied > 0 && fw.LeastAtDenialOverLimit < 1) {
			t.Errorf("%s: a fixed window denied with room: %+v", p.Name, fw)
		}
	}
	if got := rows["bursts at window edges"][throttle.FixedWindow]; got.MaxInWindowOverLimit != 2 || got.WronglyAdmitted != 0.5 {
		t.Errorf("fixed window, bursts at window edges: %+v, want twice the limit in a window, half the requests over it", got)
	}
	if got := rows["bursts at window edges"][throttle.SlidingWindow]; got.MaxInWindowOverLimit != 1 {
		t.Errorf("sliding window, bursts at window edges: %+v, want the limit held", got)
	}
	for _, alg := range []throttle.Algorithm{throttle.SlidingWindow, throttle.GCRA, throttle.FixedWindow} {
		if got := rows["burst, then steady"][alg]; got.MaxInWindowOverLimit < 1.9 {
			t.Errorf("%s, burst then steady: %+v, want close to twice the limit in a window", alg, got)
		}
	}
	if got := rows["Poisson, 1.5× the limit"][throttle.SlidingWindow]; got.MaxInWindowOverLimit <= 1 || got.MaxInWindowOverLimit > 1.2 ||
		got.WronglyDenied == 0 || got.WronglyAdmitted == 0 || got.AdmittedOverLog < 0.95 || got.AdmittedOverLog > 1.05 {
		t.Errorf("sliding window, Poisson: %+v, want a few percent astray both ways", got)
	}
	if elapsed > 10*time.Second {
		t.Errorf("the simulation took %v; it should take well under 2 s (more under -race)", elapsed)
	}
}

// TestReportAccuracy: the section's report gives a table per pattern.
func TestReportAccuracy(t *testing.T) {
	t.Parallel()
	res := &Results{Accuracy: &AccuracyResult{Limit: 100, WindowSeconds: 1, Patterns: []AccuracyPattern{{
		Name: "steady", About: "a request every 5 ms", Requests: 4000,
		Rows: []AccuracyRow{
			{Algorithm: "sliding-log", Admitted: 2000, Denied: 2000, AdmittedOverLog: 1, MaxInWindowOverLimit: 1, LeastAtDenialOverLimit: 1},
			{Algorithm: "fixed-window", Admitted: 4000, AdmittedOverLog: 2, MaxInWindowOverLimit: 2, WronglyAdmitted: 0.5},
			{Algorithm: "sliding-window", Admitted: 1981, Denied: 2019, AdmittedOverLog: 0.9905, MaxInWindowOverLimit: 1.0, LeastAtDenialOverLimit: 0.49, WronglyDenied: 0.47651},
		},
	}}}}
	var b strings.Builder
	reportAccuracy(&b, res)
	md := b.String()
	checkReportHas(t, md,
		"## Accuracy of the constant-memory algorithms",
		"a policy of 100 per 1s",
		"### steady\n\nA request every 5 ms: 4,000 requests.",
		"| sliding-log | 2,000 | 1.000 | 1.00 | 1.00 | 0.00% | 0.00% |",
		"| fixed-window | 4,000 | 2.000 | 2.00 | – | 0.00% | 50.00% |",
		"| sliding-window | 1,981 | 0.991 | 1.00 | 0.49 | 47.65% | 0.00% |",
	)
	var none strings.Builder
	reportAccuracy(&none, &Results{})
	if none.Len() != 0 {
		t.Errorf("report without accuracy results: %q", none.String())
	}
}

// step returns a time after now for a call of a policy of window w: the
// same microsecond, the next, a little or a lot later, or the start of the
// next window.
func step(r *rand.Rand, now, w int64) int64 {
	switch r.IntN(6) {
	case 0:
		return now
	case 1:
		return now + 1
	case 2:
		return now + r.Int64N(w/10+1)
	case 3:
		return now + r.Int64N(w+1)
	case 4:
		return now + w - now%w
	}
	return now + r.Int64N(3*w+1)
}
