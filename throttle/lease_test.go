package throttle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// leaseRule is the global rule of the lease tests: 10 a second.
var leaseRule = throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 10, Window: time.Second}, Cost: 1}

// share reads group g's share of leaseRule.
func share(t *testing.T, ls *throttle.Leases, g string) int64 {
	t.Helper()
	lease, err := ls.Read(context.Background(), leaseRule, g)
	if err != nil {
		t.Fatal(err)
	}
	return lease.Share
}

// TestLeaseMoves: the pool holds the whole rule once opened, and opening
// again changes nothing; moves take shares out of it and between groups,
// never more than the giver holds; a group gives no lower than its target.
func TestLeaseMoves(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, _ redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		ls := l.Leases()
		for i, want := range []bool{true, false} {
			if made, err := ls.Open(ctx, leaseRule); err != nil || made != want {
				t.Fatalf("Open %d: %v, %v; want %v", i+1, made, err, want)
			}
		}
		half := int64(throttle.LeaseParts / 2)
		for _, g := range []string{"s.0", "s.1"} {
			if n, err := ls.Move(ctx, leaseRule, throttle.DefaultGroup, g, half); err != nil || n != half {
				t.Fatalf("move half the pool to %s: %d, %v", g, n, err)
			}
		}
		if n, err := ls.Move(ctx, leaseRule, throttle.DefaultGroup, "s.2", 1); err != nil || n != 0 {
			t.Errorf("move from the empty pool: %d, %v; want 0", n, err)
		}
		if err := ls.SetTarget(ctx, leaseRule, "s.0", half-100); err != nil {
			t.Fatal(err)
		}
		if n, err := ls.Move(ctx, leaseRule, "s.0", "s.2", half); err != nil || n != 100 {
			t.Errorf("move all of s.0 above its target: %d, %v; want the 100 above it", n, err)
		}
		if err := ls.SetTarget(ctx, leaseRule, "s.0", -1); err != nil {
			t.Fatal(err)
		}
		if lease, err := ls.Read(ctx, leaseRule, "s.0"); err != nil || lease.Target != -1 || lease.Share != half-100 || len(lease.Out) != 0 {
			t.Errorf("s.0's lease %+v, %v; want %d shares, no target, nothing out", lease, err, half-100)
		}
		if got := share(t, ls, "s.1") + share(t, ls, "s.2") + share(t, ls, "s.0") + share(t, ls, throttle.DefaultGroup); got != throttle.LeaseParts {
			t.Errorf("the shares sum to %d, want %d", got, throttle.LeaseParts)
		}
	})
}

// TestLeaseKeepsWhatTheLogNeeds: a group gives only what no window of its
// log that ends now or later needs: with 3 admissions in the last window
// and a place half a second ahead, a window holds 4 of the 10 a second,
// so it keeps the shares worth 4.
func TestLeaseKeepsWhatTheLogNeeds(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		ls := l.Leases()
		if _, err := ls.Open(ctx, leaseRule); err != nil {
			t.Fatal(err)
		}
		if _, err := ls.Move(ctx, leaseRule, throttle.DefaultGroup, "s.0", throttle.LeaseParts); err != nil {
			t.Fatal(err)
		}
		shard := l.InGroup("s.0")
		for range 3 {
			if d, err := shard.Allow(ctx, leaseRule.Key, leaseRule.Policy); err != nil || !d.Allowed {
				t.Fatalf("allow: %v, %v", d, err)
			}
		}
		log, err := shard.RedisKey(leaseRule.Key)
		if err != nil {
			t.Fatal(err)
		}
		now := redisNow(t, rdb)
		rdb.ZAdd(ctx, log, redis.Z{Score: float64(now + 500_000), Member: "@place#1"})
		n, err := ls.Move(ctx, leaseRule, "s.0", "s.1", throttle.LeaseParts)
		keep := int64((4*throttle.LeaseParts + 9) / 10) // the shares worth 4 of 10, rounded up
		if err != nil || n != throttle.LeaseParts-keep {
			t.Fatalf("move all of s.0: %d, %v; want all but the %d worth 4 units", n, err, keep)
		}
		if got := share(t, ls, "s.0"); got*10/throttle.LeaseParts != 4 {
			t.Errorf("s.0 keeps %d shares, worth %d units, want 4", got, got*10/throttle.LeaseParts)
		}
	})
}

// TestLeaseRecover: a move given and never taken (its mover stopped) holds
// its shares in neither lease until Recover completes it, once, however
// often Recover runs; concurrent movers, some stopping between the steps,
// leave the shares summing to the whole once the moves are recovered.
func TestLeaseRecover(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, _ redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		ls := l.Leases()
		if _, err := ls.Open(ctx, leaseRule); err != nil {
			t.Fatal(err)
		}
		groups := []string{throttle.DefaultGroup, "s.0", "s.1", "s.2"}
		if n, err := ls.GiveOnly(ctx, leaseRule, throttle.DefaultGroup, "s.0", "stopped", 1000); err != nil || n != 1000 {
			t.Fatalf("give: %d, %v", n, err)
		}
		if got := share(t, ls, "s.0"); got != 0 {
			t.Errorf("s.0 holds %d shares of a move not taken, want 0", got)
		}
		for range 2 {
			if n, err := ls.Recover(ctx, leaseRule, throttle.DefaultGroup, 0); err != nil || n > 1 {
				t.Fatalf("recover: %d, %v", n, err)
			}
		}
		if got := share(t, ls, "s.0"); got != 1000 {
			t.Errorf("s.0 holds %d shares after recovery, want 1000, once", got)
		}
		// Taken, not settled: the recovery only settles it.
		if _, err := ls.GiveOnly(ctx, leaseRule, throttle.DefaultGroup, "s.0", "taken", 10); err != nil {
			t.Fatal(err)
		}
		if err := ls.TakeOnly(ctx, leaseRule, "s.0", "taken", 10); err != nil {
			t.Fatal(err)
		}
		if n, err := ls.Recover(ctx, leaseRule, throttle.DefaultGroup, 0); err != nil || n != 1 || share(t, ls, "s.0") != 1010 {
			t.Errorf("recover of a move taken already: %d, %v, s.0 at %d; want 1, and 1010 shares", n, err, share(t, ls, "s.0"))
		}
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(w), 1))
				for i := range 100 {
					from, to := groups[r.IntN(4)], groups[r.IntN(4)]
					if from == to {
						continue
					}
					if i%10 == 0 {
						_, _ = ls.GiveOnly(ctx, leaseRule, from, to, fmt.Sprintf("w%d-%d", w, i), 1+r.Int64N(throttle.LeaseParts/4))
						continue
					}
					if _, err := ls.Move(ctx, leaseRule, from, to, 1+r.Int64N(throttle.LeaseParts/4)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		var sum int64
		for _, g := range groups {
			if _, err := ls.Recover(ctx, leaseRule, g, 0); err != nil {
				t.Fatal(err)
			}
		}
		for _, g := range groups {
			sum += share(t, ls, g)
		}
		if sum != throttle.LeaseParts {
			t.Errorf("after the movers and the recovery the shares sum to %d, want %d", sum, throttle.LeaseParts)
		}
	})
}
