package throttle_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/entrance"
	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// TestBalancerFollowsDemand: one global rule of 20 a second leased over two
// groups. Tasks wait in the first: the balancer gives it all but the
// second's floor at once (the second's log is empty). They leave, and
// tasks wait in the second: the shares follow as the first's log empties,
// within about a window.
func TestBalancerFollowsDemand(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, _ redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		b, rule, checks, groups := twoGroups(t, l, time.Second)
		for i, g := range groups {
			lines := l.InGroup(g).Lines(throttle.LinesConfig{})
			var parked []string
			for j := range 30 {
				id := fmt.Sprintf("%s-%d", g, j)
				turn, err := lines.Arrive(ctx, throttle.Arrival{Class: "sms", Tenant: "acme", Queue: "q", ID: id, Checks: checks})
				if err != nil {
					t.Fatal(err)
				}
				if turn.Outcome == throttle.Parked {
					parked = append(parked, id)
				}
			}
			steps, took := stepUntil(t, b, l, rule, g, 19)
			t.Logf("%s: all but the other's floor (19 of 20) after %d steps, %v", g, steps, took.Round(10*time.Millisecond))
			if i == 0 && steps != 1 {
				t.Errorf("%s took %d steps to get shares the other group never used, want 1", g, steps)
			}
			for _, id := range parked { // its tasks leave: demand moves
				if err := lines.Drop(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

// stepUntil steps b every 100 ms until group g's share of rule is worth
// units, failing t after 5 s, and returns the steps and the time it took.
func stepUntil(t *testing.T, b *throttle.Balancer, l *throttle.Limiter, rule throttle.Check, g string, units int64) (int, time.Duration) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	for steps := 1; ; steps++ {
		if _, err := b.Step(ctx); err != nil {
			t.Fatal(err)
		}
		lease, err := l.Leases().Read(ctx, rule, g)
		if err != nil {
			t.Fatal(err)
		}
		if lease.Share*int64(rule.Policy.Limit)/throttle.LeaseParts >= units {
			return steps, time.Since(start)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%s's share %d, worth %d units of %d after 5 s, want %d", g, lease.Share,
				lease.Share*int64(rule.Policy.Limit)/throttle.LeaseParts, rule.Policy.Limit, units)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBalancerFloor: a group with no demand keeps a floor worth a whole
// unit of a small rule (20 a second over two groups: a tenth is one unit
// each), so it admits its first task at once; the rest goes to demand.
func TestBalancerFloor(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, _ redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		rule := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 20, Window: time.Hour}, Cost: 1, Leased: true}
		checks := []throttle.LineCheck{{Check: rule, Shared: true}}
		b, err := l.NewBalancer("sms", []string{"sms.0", "sms.1"}, []throttle.Check{rule}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Step(ctx); err != nil { // nothing waits: an even split
			t.Fatal(err)
		}
		busy := l.InGroup("sms.0").Lines(throttle.LinesConfig{})
		for i := range 15 {
			if _, err := busy.Arrive(ctx, throttle.Arrival{Class: "sms", Tenant: "acme", Queue: "q", ID: fmt.Sprint("a", i), Checks: checks}); err != nil {
				t.Fatal(err)
			}
		}
		targets, err := b.Step(ctx) // sms.0 waits: it wants all but sms.1's floor
		if err != nil {
			t.Fatal(err)
		}
		if units := targets[0][1] * 20 / throttle.LeaseParts; units != 1 {
			t.Errorf("the idle group's target %d is worth %d units of 20, want its floor of 1", targets[0][1], units)
		}
		if units := targets[0][0] * 20 / throttle.LeaseParts; units != 19 {
			t.Errorf("the waiting group's target %d is worth %d units of 20, want 19 (20 less the idle group's floor)", targets[0][0], units)
		}
		turn, err := l.InGroup("sms.1").Lines(throttle.LinesConfig{}).Arrive(ctx,
			throttle.Arrival{Class: "sms", Tenant: "globex", Queue: "q", ID: "g0", Checks: checks})
		if err != nil || turn.Outcome != throttle.Admitted {
			t.Errorf("the idle group's first task: %v, %v; want admitted at once", turn.Outcome, err)
		}
	})
}

// twoGroups returns a Balancer of class sms over groups sms.0 and sms.1,
// stepped once, of a global rule of 20 a window, and the lines' check of
// it.
func twoGroups(t *testing.T, l *throttle.Limiter, window time.Duration) (*throttle.Balancer, throttle.Check, []throttle.LineCheck, []string) {
	t.Helper()
	rule := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 20, Window: window}, Cost: 1, Leased: true}
	groups := []string{"sms.0", "sms.1"}
	b, err := l.NewBalancer("sms", groups, []throttle.Check{rule}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b, rule, []throttle.LineCheck{{Check: rule, Shared: true}}, groups
}

// TestBalancerReserve: with urgent tasks waiting in one group and less
// urgent ones in the other, the less urgent keep their reserve across
// groups: of a rule of 20 a second, each group's floor (one unit), then
// of the other 18 a tenth to the less urgent level (1.8) and the rest to
// the urgent one (16.2), rounded to the largest remainders: 17 and 3
// units, where without the reserve the less urgent group had its floor
// alone. With the urgent tasks gone, the less urgent take all but the
// other's floor.
func TestBalancerReserve(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, _ redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		b, _, checks, groups := twoGroups(t, l, time.Hour)
		var urgent []string
		for i, g := range groups {
			lines := l.InGroup(g).Lines(throttle.LinesConfig{})
			for j := range 25 {
				id := fmt.Sprintf("%s-%d", g, j)
				a := throttle.Arrival{Class: "sms", Priority: 1 + 2*i, Tenant: "acme", Queue: "q", ID: id, Checks: checks}
				if _, err := lines.Arrive(ctx, a); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					urgent = append(urgent, id)
				}
			}
		}
		units := func(targets [][]int64) []int64 {
			return []int64{targets[0][0] * 20 / throttle.LeaseParts, targets[0][1] * 20 / throttle.LeaseParts}
		}
		targets, err := b.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := units(targets); !slices.Equal(got, []int64{17, 3}) {
			t.Errorf("urgent tasks in sms.0, less urgent in sms.1: targets worth %v units of 20, want [17 3]", got)
		}
		urgentLines := l.InGroup(groups[0]).Lines(throttle.LinesConfig{})
		for _, id := range urgent {
			if err := urgentLines.Drop(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if targets, err = b.Step(ctx); err != nil {
			t.Fatal(err)
		}
		if got := units(targets); !slices.Equal(got, []int64{1, 19}) {
			t.Errorf("the urgent tasks gone: targets worth %v units of 20, want [1 19]", got)
		}
	})
}

// TestBalancerClaim: one holder at a time balances a class; the holder
// renews its claim, and another takes it once it lapses.
func TestBalancerClaim(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, _ redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		rule := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 20, Window: time.Second}, Cost: 1, Leased: true}
		b, err := l.NewBalancer("sms", []string{"sms.0", "sms.1"}, []throttle.Check{rule}, nil)
		if err != nil {
			t.Fatal(err)
		}
		claim := func(holder string, ttl time.Duration) bool {
			t.Helper()
			ok, err := b.Claim(ctx, holder, ttl)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !claim("a", 200*time.Millisecond) {
			t.Fatal("a could not claim a class nobody balances")
		}
		if claim("b", 200*time.Millisecond) {
			t.Fatal("b claimed the class a holds")
		}
		if !claim("a", 200*time.Millisecond) {
			t.Fatal("a could not renew its claim")
		}
		// a stops renewing: b takes the class once the claim lapses.
		deadline := time.Now().Add(5 * time.Second)
		for !claim("b", time.Minute) {
			if time.Now().After(deadline) {
				t.Fatal("b never took the class after a stopped renewing")
			}
			time.Sleep(50 * time.Millisecond)
		}
		if claim("a", time.Minute) {
			t.Fatal("a claimed the class b holds")
		}
		if _, err := b.Claim(ctx, "", time.Second); err == nil {
			t.Error("a claim without a holder was taken")
		}
	})
}

// TestBalancerWakesReceivers: a step wakes the lines of the groups whose
// share rose, not the others: each wake costs every worker's loop of the
// group a dispatch; after a claim taken over, every group. Read in publish
// order on one Redis, with a marker published after the step.
func TestBalancerWakesReceivers(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	ctx := context.Background()
	l := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	rule := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 20, Window: time.Second}, Cost: 1, Leased: true}
	groups := []string{"sms.0", "sms.1"}
	b, err := l.NewBalancer("sms", groups, []throttle.Check{rule}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Step(ctx); err != nil { // from the pool to both, evenly
		t.Fatal(err)
	}
	channel := func(g string) string { return entrance.WakeChannel(keyspace.Base(prefix, g)) }
	marker := prefix + "marker"
	ps := rdb.Subscribe(ctx, channel(groups[0]), channel(groups[1]), marker)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	lines := l.InGroup(groups[0]).Lines(throttle.LinesConfig{})
	checks := []throttle.LineCheck{{Check: rule, Shared: true}}
	for j := range 30 { // demand in the first group only
		if _, err := lines.Arrive(ctx, throttle.Arrival{Class: "sms", Tenant: "acme", Queue: "q", ID: fmt.Sprint(j), Checks: checks}); err != nil {
			t.Fatal(err)
		}
	}
	// The arrivals' own wakes come first: read up to a marker, then step.
	drain := func() map[string]int {
		t.Helper()
		if err := rdb.Publish(ctx, marker, "").Err(); err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for {
			m, err := ps.ReceiveMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m.Channel == marker {
				return seen
			}
			seen[m.Channel]++
		}
	}
	drain()
	if _, err := b.Step(ctx); err != nil {
		t.Fatal(err)
	}
	seen := drain()
	if seen[channel(groups[0])] == 0 || seen[channel(groups[1])] != 0 {
		t.Errorf("a step that moved shares to %s woke %v, want its lines alone", groups[0], seen)
	}
	// A claim taken over: the last holder may have stopped before a wake,
	// so the next step wakes every group.
	if held, err := b.Claim(ctx, "next", time.Minute); err != nil || !held {
		t.Fatalf("Claim: %v, %v", held, err)
	}
	if _, err := b.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if seen := drain(); seen[channel(groups[0])] == 0 || seen[channel(groups[1])] == 0 {
		t.Errorf("the step after a claim taken woke %v, want every group", seen)
	}
}
