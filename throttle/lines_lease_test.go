package throttle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// leaseRecord is the admissions of a leased rule in every group, by the
// times their entries stand at (Turn.At).
type leaseRecord struct {
	mu  sync.Mutex
	ats []int64
}

func (r *leaseRecord) add(turn throttle.Turn) {
	if turn.Outcome == throttle.Admitted || turn.Outcome == throttle.Placed {
		r.mu.Lock()
		r.ats = append(r.ats, turn.At.UnixMicro())
		r.mu.Unlock()
	}
}

// fullest returns the most admissions in a window (t − window, t].
func (r *leaseRecord) fullest(window time.Duration) int {
	ats := slices.Sorted(slices.Values(r.ats))
	most := 0
	for i, j := 0, 0; j < len(ats); j++ {
		for ats[i] <= ats[j]-window.Microseconds() {
			i++
		}
		most = max(most, j-i+1)
	}
	return most
}

// TestLinesLeasedExact: two groups serve one global rule of 10 a second,
// leased, while a mover shifts shares between them every 150 ms; tasks
// arrive in both at 50 a second, and each group's dispatch grants and
// claims as workers would. Summed over the groups, by the record of every
// admission, no window holds more than 10.
func TestLinesLeasedExact(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, _ redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		rule := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 10, Window: time.Second}, Cost: 1, Leased: true}
		checks := []throttle.LineCheck{{Check: rule, Shared: true}}
		leases := l.Leases()
		groups := []string{"sms.0", "sms.1"}
		if _, err := leases.Open(ctx, rule); err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			if _, err := leases.Move(ctx, rule, throttle.DefaultGroup, g, throttle.LeaseParts/2); err != nil {
				t.Fatal(err)
			}
		}
		var rec leaseRecord
		var wg sync.WaitGroup
		for gi, g := range groups {
			lines := l.InGroup(g).Lines(throttle.LinesConfig{})
			arrival := func(id string) throttle.Arrival {
				return throttle.Arrival{Class: "sms", Tenant: fmt.Sprintf("t%d", len(id)%3), Queue: "q", ID: id, Checks: checks}
			}
			wg.Go(func() { feed(ctx, t, lines, arrival, g, &rec) })
			wg.Go(func() { serve(ctx, t, lines, arrival, &rec) })
			if gi == 0 {
				wg.Go(func() { shift(ctx, t, leases, rule, groups, l) })
			}
		}
		wg.Wait()
		if most := rec.fullest(time.Second); most > 10 || len(rec.ats) < 20 {
			t.Errorf("%d admissions over the groups, the fullest second holding %d; want more than 20, and at most 10 in any second", len(rec.ats), most)
		} else {
			t.Logf("%d admissions over the groups, the fullest second holding %d of 10", len(rec.ats), most)
		}
	})
}

// feed arrives a task in lines every 20 ms until ctx ends.
func feed(ctx context.Context, t *testing.T, lines *throttle.Lines, arrival func(string) throttle.Arrival, g string, rec *leaseRecord) {
	for i := 0; ctx.Err() == nil; i++ {
		turn, err := lines.Arrive(ctx, arrival(fmt.Sprintf("%s-%d", g, i)))
		if err != nil && ctx.Err() == nil {
			t.Error(err)
			return
		}
		rec.add(turn)
		time.Sleep(20 * time.Millisecond)
	}
}

// serve dispatches lines every 30 ms, and each task granted arrives again
// to claim its grant, until ctx ends.
func serve(ctx context.Context, t *testing.T, lines *throttle.Lines, arrival func(string) throttle.Arrival, rec *leaseRecord) {
	for ctx.Err() == nil {
		turn, err := lines.Dispatch(ctx)
		if err != nil && ctx.Err() == nil {
			t.Error(err)
			return
		}
		for _, g := range turn.Granted {
			claim, err := lines.Arrive(ctx, arrival(g.ID))
			if err != nil && ctx.Err() == nil {
				t.Error(err)
				return
			}
			rec.add(claim)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// shift moves an eighth of the rule between the groups every 150 ms, in a
// random direction, and wakes both groups' lines, as the balancer will.
func shift(ctx context.Context, t *testing.T, leases *throttle.Leases, rule throttle.Check, groups []string, l *throttle.Limiter) {
	r := rand.New(rand.NewPCG(1, 2))
	for ctx.Err() == nil {
		from := r.IntN(2)
		if _, err := leases.Move(ctx, rule, groups[from], groups[1-from], throttle.LeaseParts/8); err != nil && ctx.Err() == nil {
			t.Error(err)
			return
		}
		for _, g := range groups {
			_ = l.InGroup(g).Lines(throttle.LinesConfig{}).Wake(ctx, "sms")
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// TestRestampLeased: a late send of a leased rule is moved only within
// what the group's lease is worth, not within the rule's whole limit.
func TestRestampLeased(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		rule := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 10, Window: time.Second}, Cost: 1, Leased: true}
		checks := []throttle.LineCheck{{Check: rule, Shared: true}}
		shard := l.InGroup("sms.0")
		log, err := shard.RedisKey(rule.Key)
		if err != nil {
			t.Fatal(err)
		}
		lease := strings.Replace(log, "}:", "}e:", 1) // the log's key with 'e' after the tag
		rdb.HSet(ctx, lease, "s", worth(2, 10))       // worth 2 of 10
		lines := shard.Lines(throttle.LinesConfig{})
		for _, id := range []string{"t1", "t2"} {
			turn, err := lines.Arrive(ctx, throttle.Arrival{Class: "sms", Tenant: "acme", Queue: "q", ID: id, Checks: checks})
			if err != nil || turn.Outcome != throttle.Admitted {
				t.Fatalf("arrive %s: %v, %v", id, turn.Outcome, err)
			}
		}
		time.Sleep(20 * time.Millisecond)
		rdb.HSet(ctx, lease, "s", worth(1, 10)) // worth 1: t2 fills every window t1 would move into
		if _, moved, err := lines.Restamp(ctx, "t1", checks, time.Second); err != nil || moved {
			t.Errorf("restamp of t1 past its lease: moved %v, %v; want it refused", moved, err)
		}
		rdb.HSet(ctx, lease, "s", worth(2, 10))
		if _, moved, err := lines.Restamp(ctx, "t1", checks, time.Second); err != nil || !moved {
			t.Errorf("restamp of t1 within its lease: moved %v, %v; want it moved", moved, err)
		}
	})
}

// worth is the least share worth units of a limit.
func worth(units, limit int64) int64 { return (units*throttle.LeaseParts + limit - 1) / limit }

// TestArrivalLeased: tasks arriving one by one in a class where nothing
// waits, the arrival's common case, are held to the group's lease, 3 of a
// rule of 10, not to the rule's limit; those beyond it park.
func TestArrivalLeased(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, _ redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		rule := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 10, Window: time.Hour}, Cost: 1, Leased: true}
		leases := l.Leases()
		if _, err := leases.Open(ctx, rule); err != nil {
			t.Fatal(err)
		}
		if _, err := leases.Move(ctx, rule, throttle.DefaultGroup, "sms.0", worth(3, 10)); err != nil {
			t.Fatal(err)
		}
		lines := l.InGroup("sms.0").Lines(throttle.LinesConfig{})
		var outcomes []throttle.Outcome
		for i := range 6 {
			turn, err := lines.Arrive(ctx, throttle.Arrival{Class: "sms", Tenant: fmt.Sprintf("t%d", i), Queue: "q", ID: fmt.Sprint(i),
				Checks: []throttle.LineCheck{{Check: rule, Shared: true}}})
			if err != nil {
				t.Fatal(err)
			}
			outcomes = append(outcomes, turn.Outcome)
		}
		want := []throttle.Outcome{throttle.Admitted, throttle.Admitted, throttle.Admitted, throttle.Parked, throttle.Parked, throttle.Parked}
		if !slices.Equal(outcomes, want) {
			t.Errorf("outcomes %v, want %v: three admitted by the lease, then parked", outcomes, want)
		}
	})
}

// TestLeasedStepBatch: under a lease worth a third of its rule, a dispatch
// step gives as many slots at once as under a whole lease of the same
// pace, not a third as many (lines_base.lua, leaseBatch): two groups drain
// side by side, one a third of 90 a 300 ms, one the whole of 30, both a
// slot every 10 ms; the third's steps give twice the grants each.
func TestLeasedStepBatch(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		third := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 90, Window: 300 * time.Millisecond}, Cost: 1, Leased: true}
		whole := throttle.Check{Key: "rule/sms/small", Policy: throttle.Policy{Limit: 30, Window: 300 * time.Millisecond}, Cost: 1, Leased: true}
		leases := l.Leases()
		for _, c := range []struct {
			rule  throttle.Check
			group string
			parts int64
		}{{third, "sms.0", worth(30, 90)}, {whole, "sms.1", throttle.LeaseParts}} {
			if _, err := leases.Open(ctx, c.rule); err != nil {
				t.Fatal(err)
			}
			if _, err := leases.Move(ctx, c.rule, throttle.DefaultGroup, c.group, c.parts); err != nil {
				t.Fatal(err)
			}
		}
		var perStep [2]float64
		var wg sync.WaitGroup
		for i, rule := range []throttle.Check{third, whole} {
			group := fmt.Sprintf("sms.%d", i)
			wg.Go(func() { perStep[i] = grantsPerStep(t, rdb, l.InGroup(group), prefix+"{"+group+"}qclock", rule) })
		}
		wg.Wait()
		if perStep[0] < 1.5*perStep[1] {
			t.Errorf("a step under a third of the rule gave %.1f grants, under a whole lease of the same pace %.1f; want about 20 ms of the whole rule's slots a step, 7 against 3", perStep[0], perStep[1])
		} else {
			t.Logf("grants a step: %.1f under a third of the rule, %.1f under a whole lease of the same pace", perStep[0], perStep[1])
		}
	})
}

// grantsPerStep drains 240 tasks of 20 tenants under rule in shard's
// lines, on a clock of the test's own (the hash clock, in the lines' slot),
// for 1.6 s: it calls Dispatch when the last call said (1 to 50 ms later),
// each grant claimed at once, and returns the mean grants of the steps that
// gave any after the first 700 ms (the first window admitted at once, the
// second given at once: the pace set).
func grantsPerStep(t *testing.T, rdb redis.UniversalClient, shard *throttle.Limiter, clock string, rule throttle.Check) float64 {
	ctx := context.Background()
	lines := throttle.ClockedLines(shard.Lines(throttle.LinesConfig{Lead: 10 * time.Millisecond}), clock)
	now := simStart
	setClock := func() error { return rdb.HSet(ctx, clock, "s", now/1e6, "us", now%1e6).Err() }
	arrival := func(id string) throttle.Arrival {
		return throttle.Arrival{Class: "sms", Tenant: "t" + id[:strings.Index(id, "-")], Queue: "q", ID: id,
			Checks: []throttle.LineCheck{{Check: rule, Shared: true}}}
	}
	if err := setClock(); err != nil {
		t.Error(err)
		return 0
	}
	for i := range 240 {
		if _, err := lines.Arrive(ctx, arrival(fmt.Sprintf("%d-%d", i%20, i))); err != nil {
			t.Error(err)
			return 0
		}
	}
	steps, grants, wake := 0, 0, int64(0)
	for ; now < simStart+1_600_000; now += min(max(wake, 1_000), 50_000) {
		if err := setClock(); err != nil {
			t.Error(err)
			return 0
		}
		turn, err := lines.Dispatch(ctx)
		if err != nil {
			t.Error(err)
			return 0
		}
		for _, g := range turn.Granted {
			if _, err := lines.Arrive(ctx, arrival(g.ID)); err != nil {
				t.Error(err)
				return 0
			}
		}
		if len(turn.Granted) > 0 && now > simStart+700_000 {
			steps, grants = steps+1, grants+len(turn.Granted)
		}
		wake = turn.Wake.Microseconds()
	}
	if steps == 0 {
		t.Errorf("%s: no step gave a grant after the first 700 ms", rule.Key)
		return 0
	}
	return float64(grants) / float64(steps)
}
