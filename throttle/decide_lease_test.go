package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// TestLeasedDecision: first come, first served under a lease
// (docs/SCALING.md, "First come, first served over shards"). A group whose
// lease of a rule of 10 a window is worth 2 admits two callers, places two
// more within the window, and refuses the fifth a place, sending it back
// in a balancer period and counting its asks. With the lease lowered to
// nothing, a new caller is refused too, and a caller placed before comes
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
		demand := func() throttle.PlacesDemand {
			t.Helper()
			d, err := leases.PlacesDemand(ctx, []throttle.Check{rule}, "sms.0")
			if err != nil {
				t.Fatal(err)
			}
			return d[0]
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
		if d := demand(); d.Ahead != 2 || d.Asks != 2 {
			t.Errorf("demand %+v; want the 2 places ahead and e's 2 asks", d)
		}

		if err := leases.SetTarget(ctx, rule, "sms.0", 0); err != nil { // worth nothing now
			t.Fatal(err)
		}
		if md := ask("f"); md.Allowed || md.RetryAfter != throttle.BalancePeriod {
			t.Errorf("f under a lease worth 0: allowed %v, retry %v; want refused a place, back in %v", md.Allowed, md.RetryAfter, throttle.BalancePeriod)
		}
		if d := demand(); d.Ahead != 2 || d.Asks != 3 {
			t.Errorf("demand %+v; want the 2 places ahead and 3 asks", d)
		}
		time.Sleep(placed)
		if md := ask("c"); !md.Allowed {
			t.Errorf("c back at its place under a lease worth 0: retry %v, want admitted as of its place", md.RetryAfter)
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

// TestBalancerFollowsPlaces: a global rule of 20 a second leased over two
// groups whose callers are served first come, first served. Callers wait
// in the first, placed and refused places: the balancer gives it all but
// the second's floor. They stop, and callers wait in the second: the
// shares follow as the first's log empties, within a few windows.
func TestBalancerFollowsPlaces(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, _ redis.UniversalClient, l *throttle.Limiter, _ string) {
		rule := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 20, Window: time.Second}, Cost: 1, Leased: true}
		groups := []string{"sms.0", "sms.1"}
		b, err := l.NewBalancer("sms", groups, []throttle.Check{rule}, throttle.BalanceByPlaces)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			// 30 callers ask every balancer period, as workers holding
			// their tasks do, until g holds all but the other's floor.
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
