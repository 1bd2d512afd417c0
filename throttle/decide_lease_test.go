package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// TestLeasedDecision: first come, first served under a lease
// (docs/SCALING.md, "First come, first served over shards"). A group whose
// lease of a rule of 10 a window is worth 2 admits two callers, places two
// more within the window, and refuses the fifth a place, sending it back
// in a balancer period. With the lease lowered to nothing, a new caller is refused too, and a caller placed before comes
// back at its place and is admitted: a place, once given, is kept.
func TestLeasedDecision(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		ctx := context.Background()
		const window = 2 * time.Second
		rule := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 10, Window: window}, Cost: 1, Leased: true}
		// A tolerance wide enough that a loaded machine's late wake-up
		// still finds its place.
		l := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix), throttle.WithLineTolerance(time.Second))
		leases := l.Leases()
		if _, err := leases.Open(ctx, rule); err != nil {
			t.Fatal(err)
		}
		if _, err := leases.Move(ctx, rule, throttle.DefaultGroup, "sms.0", worth(2, 10)); err != nil {
			t.Fatal(err)
		}
		g := l.InGroup("sms.0")
		ask := func(id string) throttle.MultiDecision {
			t.Helper()
			md, err := g.AllowInLine(ctx, id, []throttle.Check{rule})
			if err != nil {
				t.Fatal(err)
			}
			return md
		}
		ahead := func() int64 { // places in line in the group's log
			t.Helper()
			key, err := g.RedisKey(rule.Key)
			if err != nil {
				t.Fatal(err)
			}
			n, err := rdb.ZCount(ctx, key, fmt.Sprint(redisNow(t, rdb)), "+inf").Result()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		for _, id := range []string{"a", "b"} {
			if md := ask(id); !md.Allowed {
				t.Fatalf("%s denied (retry %v) under a lease worth 2: want admitted", id, md.RetryAfter)
			}
		}
		var placed time.Duration
		for _, id := range []string{"c", "d"} {
			md := ask(id)
			if md.Allowed || md.RetryAfter <= throttle.BalancePeriod || md.RetryAfter > window {
				t.Fatalf("%s: allowed %v, retry %v; want a place within the window, past a balancer period", id, md.Allowed, md.RetryAfter)
			}
			if id == "c" {
				placed = md.RetryAfter
			}
		}
		for i := range 2 {
			if md := ask("e"); md.Allowed || md.RetryAfter != throttle.BalancePeriod {
				t.Fatalf("e, ask %d: allowed %v, retry %v; want refused a place past the window, back in %v", i+1, md.Allowed, md.RetryAfter, throttle.BalancePeriod)
			}
		}
		if n := ahead(); n != 2 {
			t.Errorf("%d places ahead; want c's and d's, e taking none", n)
		}

		if err := leases.SetTarget(ctx, rule, "sms.0", 0); err != nil { // worth nothing now
			t.Fatal(err)
		}
		if md := ask("f"); md.Allowed || md.RetryAfter != throttle.BalancePeriod {
			t.Errorf("f under a lease worth 0: allowed %v, retry %v; want refused a place, back in %v", md.Allowed, md.RetryAfter, throttle.BalancePeriod)
		}
		if n := ahead(); n != 2 {
			t.Errorf("%d places ahead; want c's and d's, f taking none", n)
		}
		time.Sleep(placed)
		if md := ask("c"); !md.Allowed {
			t.Errorf("c back at its place under a lease worth 0: retry %v, want admitted as of its place", md.RetryAfter)
		}
	})
}

// TestLeasedRefusals: a caller that a lease cannot place takes no place.
// Under a lease worth nothing, with a window longer than the far time
// the search gives such a lease (2^40 µs), it is refused and sent back in
// a balancer period. When a rule that is not leased (a tenant's, of an
// hour) puts its time past the leased rule's window, it is sent back
// until that rule would let it be placed, the refusal naming that rule.
func TestLeasedRefusals(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		g := l.InGroup("sms.0")
		places := func(c throttle.Check) int64 {
			t.Helper()
			key, err := g.RedisKey(c.Key)
			if err != nil {
				t.Fatal(err)
			}
			return rdb.ZCard(ctx, key).Val()
		}
		monthly := throttle.Check{Key: "rule/sms/monthly", Policy: throttle.Policy{Limit: 10, Window: 30 * 24 * time.Hour}, Cost: 1, Leased: true}
		md, err := g.AllowInLine(ctx, "m", []throttle.Check{monthly}) // no lease: worth 0
		if err != nil {
			t.Fatal(err)
		}
		if md.Allowed || md.RetryAfter != throttle.BalancePeriod || places(monthly) != 0 {
			t.Errorf("under a lease worth 0, a window of 30 days: allowed %v, retry %v, %d places; want refused, back in %v, no place",
				md.Allowed, md.RetryAfter, places(monthly), throttle.BalancePeriod)
		}
		// Beside a rule with room, the refusal of a lease worth 0 is the
		// lease's.
		roomy := throttle.Check{Key: "tenant/globex", Policy: throttle.Policy{Limit: 5, Window: time.Second}, Cost: 1}
		unopened := throttle.Check{Key: "rule/sms/unopened", Policy: throttle.Policy{Limit: 10, Window: time.Second}, Cost: 1, Leased: true}
		md, err = g.AllowInLine(ctx, "m2", []throttle.Check{roomy, unopened})
		if err != nil {
			t.Fatal(err)
		}
		if md.Allowed || md.Denied != 1 || md.RetryAfter != throttle.BalancePeriod {
			t.Errorf("a rule with room beside a lease worth 0: allowed %v, denied by check %d, retry %v; want refused by the leased rule (1), back in %v",
				md.Allowed, md.Denied, md.RetryAfter, throttle.BalancePeriod)
		}

		rule := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 10, Window: time.Second}, Cost: 1, Leased: true}
		if _, err := l.Leases().Open(ctx, rule); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Leases().Move(ctx, rule, throttle.DefaultGroup, "sms.0", worth(2, 10)); err != nil {
			t.Fatal(err)
		}
		tenant := throttle.Check{Key: "tenant/acme", Policy: throttle.Policy{Limit: 1, Window: time.Hour}, Cost: 1}
		checks := []throttle.Check{tenant, rule}
		if md, err := g.AllowInLine(ctx, "a", checks); err != nil || !md.Allowed {
			t.Fatalf("the first: %v, %v; want admitted", md.Allowed, err)
		}
		md, err = g.AllowInLine(ctx, "b", checks)
		if err != nil {
			t.Fatal(err)
		}
		if md.Allowed || md.Denied != 0 || md.RetryAfter < time.Hour-2*time.Second || md.RetryAfter > time.Hour || places(rule) != 1 {
			t.Errorf("the tenant's hour used: allowed %v, denied by check %d, retry %v, the global log holds %d; "+
				"want denied by the tenant's rule (0), back within a window of its time, no place in the global log (1, the first's admission)",
				md.Allowed, md.Denied, md.RetryAfter, places(rule))
		}
	})
}

// TestLeasedCheckIsALog: only a sliding log can be leased; a leased check
// of another algorithm is refused, naming its key, before Redis is asked.
func TestLeasedCheckIsALog(t *testing.T) {
	t.Parallel()
	l := throttle.NewLimiter(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	rule := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 10, Window: time.Second, Algorithm: throttle.GCRA}, Cost: 1, Leased: true}
	other := throttle.Check{Key: "tenant/acme", Policy: throttle.Policy{Limit: 5, Window: time.Second}, Cost: 1}
	_, err := l.AllowInLine(context.Background(), "x", []throttle.Check{other, rule})
	if !errors.Is(err, throttle.ErrInvalidPolicy) {
		t.Fatalf("a leased GCRA rule: %v, want ErrInvalidPolicy", err)
	}
	if want := fmt.Sprintf("key %s: ", throttle.Quote(rule.Key)); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the key (%q)", err, want)
	}
}

// TestBalancerOwnDemand: a Balancer given what waits in each group (a
// DemandFunc, as a worker serving first come, first served counts its
// shards' queues) moves a global rule of 20 a second to the group where
// callers wait, all but the other's floor, and when the demand moves,
// follows it once the first group's admissions have left its window.
func TestBalancerOwnDemand(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, _ redis.UniversalClient, l *throttle.Limiter, _ string) {
		rule := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 20, Window: time.Second}, Cost: 1, Leased: true}
		groups := []string{"sms.0", "sms.1"}
		var busy atomic.Value // the group where callers wait
		b, err := l.NewBalancer("sms", groups, []throttle.Check{rule}, busyDemand(&busy))
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			busy.Store(g)
			// 30 callers ask every balancer period, as workers holding
			// their tasks do, using what g's lease is worth.
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				for ctx.Err() == nil {
					for j := range 30 {
						_, _ = l.InGroup(g).AllowInLine(ctx, fmt.Sprintf("%s-%d", g, j), []throttle.Check{rule})
					}
					time.Sleep(throttle.BalancePeriod)
				}
			}()
			steps, took := stepUntil(t, b, l, rule, g, 19)
			stop()
			<-done
			t.Logf("%s: all but the other's floor (19 of 20) after %d steps, %v", g, steps, took.Round(10*time.Millisecond))
		}
	})
}

// TestBalancerStepsDownABusyGiver: a group that has used its whole share
// in the window gives it up over about a window when the demand moves,
// not at once (docs/SCALING.md, "Moving a busy share"): its target steps
// down from what its log holds, above its goal, so that it keeps sending
// meanwhile; each group's goal is written in its lease, where its lines
// pace by it.
func TestBalancerStepsDownABusyGiver(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, _ redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		rule := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 20, Window: time.Hour}, Cost: 1, Leased: true}
		groups := []string{"sms.0", "sms.1"}
		var busy atomic.Value
		busy.Store(groups[0])
		b, err := l.NewBalancer("sms", groups, []throttle.Check{rule}, busyDemand(&busy))
		if err != nil {
			t.Fatal(err)
		}
		stepUntil(t, b, l, rule, groups[0], 19)
		for j := range 19 { // the whole share used, in a window of an hour
			if md, err := l.InGroup(groups[0]).AllowInLine(ctx, fmt.Sprint("a", j), []throttle.Check{rule}); err != nil || !md.Allowed {
				t.Fatalf("admission %d in %s: %v, %v", j, groups[0], md.Allowed, err)
			}
		}
		busy.Store(groups[1])
		targets, err := b.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		giver, err := l.Leases().Read(ctx, rule, groups[0])
		if err != nil {
			t.Fatal(err)
		}
		units := func(shares int64) float64 { return float64(shares) * 20 / throttle.LeaseParts }
		if goal := targets[0][0]; giver.Goal != goal || giver.Target <= goal || giver.Target >= giver.Share {
			t.Errorf("the busy giver: goal %.2f units (want %.2f), target %.2f, share %.2f; want a target between its goal and its share",
				units(giver.Goal), units(goal), units(giver.Target), units(giver.Share))
		}
		receiver, err := l.Leases().Read(ctx, rule, groups[1])
		if err != nil {
			t.Fatal(err)
		}
		if receiver.Goal != targets[0][1] || units(receiver.Goal) < 18 {
			t.Errorf("the receiver's goal %.2f units, want the step's target %.2f (all but the giver's floor)", units(receiver.Goal), units(targets[0][1]))
		}
	})
}

// busyDemand is the demand of 30 tasks waiting in the group busy names,
// and of nothing in the others.
func busyDemand(busy *atomic.Value) throttle.DemandFunc {
	return func(_ context.Context, g string) ([]float64, error) {
		w := make([]float64, throttle.LeastUrgent)
		if busy.Load() == g {
			w[throttle.DefaultPriority-1] = 30
		}
		return w, nil
	}
}
