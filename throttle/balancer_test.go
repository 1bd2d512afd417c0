package throttle_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// TestBalancerFollowsDemand: one global rule of 20 a second leased over two
// groups; tasks arrive in the first for two seconds, then in the second
// for two. The balancer, stepping every 100 ms, gives the first nearly all
// the shares, then moves them to the second; by the record of every
// admission, no second over both groups holds more than 20.
func TestBalancerFollowsDemand(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, _ redis.UniversalClient, l *throttle.Limiter, _ string) {
		rule := throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 20, Window: time.Second}, Cost: 1}
		checks := []throttle.LineCheck{{Check: rule, Shared: true, Leased: true}}
		groups := []string{"sms.0", "sms.1"}
		b, err := l.NewBalancer("sms", groups, []throttle.Check{rule})
		if err != nil {
			t.Fatal(err)
		}
		all, cancel := context.WithTimeout(context.Background(), 4500*time.Millisecond)
		defer cancel()
		var rec leaseRecord
		var wg sync.WaitGroup
		arrival := func(id string) throttle.Arrival {
			return throttle.Arrival{Class: "sms", Tenant: fmt.Sprintf("t%d", len(id)%3), Queue: "q", ID: id, Checks: checks}
		}
		lines := make([]*throttle.Lines, len(groups))
		for i, g := range groups {
			lines[i] = l.InGroup(g).Lines(throttle.LinesConfig{})
			wg.Go(func() { serve(all, t, lines[i], arrival, &rec) })
		}
		wg.Go(func() {
			for all.Err() == nil {
				if _, err := b.Step(all); err != nil && all.Err() == nil {
					t.Error(err)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
		shares := make([][]int64, 2)
		for phase, g := range groups {
			ctx, stop := context.WithTimeout(all, 2*time.Second)
			feed(ctx, t, lines[phase], arrival, fmt.Sprintf("%s-%d", g, phase), &rec)
			stop()
			for _, h := range groups {
				lease, err := l.Leases().Read(context.Background(), rule, h)
				if err != nil {
					t.Fatal(err)
				}
				shares[phase] = append(shares[phase], lease.Share)
			}
		}
		wg.Wait()
		if shares[0][0] < throttle.LeaseParts*8/10 || shares[1][1] < throttle.LeaseParts/2 {
			t.Errorf("shares after demand in the first group %v, then in the second %v, of %d: want the first above 0.8 of it, then the second above half",
				shares[0], shares[1], throttle.LeaseParts)
		}
		if most := rec.fullest(time.Second); most > 20 {
			t.Errorf("the fullest second over both groups holds %d, over the limit of 20", most)
		}
		t.Logf("%d admissions in 4.5 s over both groups, the fullest second %d of 20; shares %v then %v", len(rec.ats), rec.fullest(time.Second), shares[0], shares[1])
	})
}
