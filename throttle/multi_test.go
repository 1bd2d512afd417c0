package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/throttle"
)

// TestAllowMultiIsAllOrNothing holds requests to a tenant quota and a
// provider limit at once: when either denies, neither records anything.
func TestAllowMultiIsAllOrNothing(t *testing.T) {
	t.Parallel()
	tenant := throttle.PerMinute(2)
	provider := throttle.PerMinute(3)
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		send := func(who string) throttle.MultiDecision {
			t.Helper()
			md, err := l.AllowMulti(ctx, []throttle.Check{
				{Key: "tenant:" + who, Policy: tenant},
				{Key: "provider", Policy: provider},
			})
			if err != nil {
				t.Fatal(err)
			}
			return md
		}
		card := func(key string) int64 { return rdb.ZCard(ctx, redisKey(t, l, key)).Val() }

		for i := range 2 {
			if md := send("acme"); !md.Allowed || md.Denied != -1 {
				t.Fatalf("acme request %d: %+v, want allowed", i, md)
			}
		}
		md := send("acme")
		if md.Allowed || md.Denied != 0 {
			t.Fatalf("acme over its quota: %+v, want denied by check 0", md)
		}
		if !md.Checks[1].Allowed || md.Checks[1].Count != 2 {
			t.Errorf("provider check of a denied request = %+v, want allowed alone with Count 2", md.Checks[1])
		}
		if card("provider") != 2 {
			t.Errorf("provider recorded a request the tenant denied: ZCARD %d", card("provider"))
		}

		if md := send("globex"); !md.Allowed {
			t.Fatalf("globex: %+v, want allowed", md)
		}
		md = send("initech")
		if md.Allowed || md.Denied != 1 {
			t.Fatalf("provider full: %+v, want denied by check 1", md)
		}
		if card("tenant:initech") != 0 {
			t.Errorf("tenant recorded a request the provider denied")
		}
		if md.Limit != provider.Limit || md.Count != 3 || md.Remaining != 0 {
			t.Errorf("strictest decision = %+v, want the provider's limit and count", md.Decision)
		}
	})
}

// TestAllowMultiStrictest checks how the combined decision is made from the
// checks: largest RetryAfter and ResetAfter, smallest Remaining.
func TestAllowMultiStrictest(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		second := throttle.Policy{Limit: 1, Window: time.Second}
		hour := throttle.Policy{Limit: 1, Window: time.Hour}
		roomy := throttle.PerHour(100)
		mustAllowN(t, l, "second", second, 1)
		mustAllowN(t, l, "hour", hour, 1)
		md, err := l.AllowMulti(ctx, []throttle.Check{
			{Key: "roomy", Policy: roomy, Cost: 10},
			{Key: "second", Policy: second},
			{Key: "hour", Policy: hour},
		})
		if err != nil {
			t.Fatal(err)
		}
		if md.Allowed || md.Denied != 2 {
			t.Fatalf("decision = %+v, want denied by the hourly check (index 2)", md)
		}
		if md.RetryAfter != md.Checks[2].RetryAfter || md.RetryAfter < 59*time.Minute {
			t.Errorf("RetryAfter = %v, want the hourly check's %v", md.RetryAfter, md.Checks[2].RetryAfter)
		}
		if md.Checks[1].RetryAfter > time.Second || md.Checks[1].Allowed {
			t.Errorf("per-second check = %+v", md.Checks[1])
		}
		if md.ResetAfter != md.Checks[2].ResetAfter || md.Remaining != 0 {
			t.Errorf("ResetAfter %v Remaining %d, want the largest reset and 0", md.ResetAfter, md.Remaining)
		}
		if !md.Checks[0].Allowed || md.Checks[0].Count != 0 {
			t.Errorf("roomy check = %+v, want allowed alone, nothing recorded", md.Checks[0])
		}

		md, err = l.AllowMulti(ctx, []throttle.Check{
			{Key: "a", Policy: throttle.PerHour(10), Cost: 4},
			{Key: "b", Policy: throttle.PerHour(5), Cost: 3},
		})
		if err != nil {
			t.Fatal(err)
		}
		want := throttle.Decision{Allowed: true, Limit: 5, Count: 3, Remaining: 2, ResetAfter: time.Hour}
		if diff := cmp.Diff(want, md.Decision); diff != "" {
			t.Errorf("allowed decision (-want +got):\n%s", diff)
		}
	})
}

// TestAllowMultiLeavesCallersSliceAlone: a Cost of 0 means 1 without
// changing the caller's checks.
func TestAllowMultiLeavesCallersSliceAlone(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		checks := []throttle.Check{{Key: "a", Policy: throttle.PerHour(3)}, {Key: "b", Policy: throttle.PerHour(3), Cost: 2}}
		md, err := l.AllowMulti(context.Background(), checks)
		if err != nil {
			t.Fatal(err)
		}
		if md.Checks[0].Count != 1 || md.Checks[1].Count != 2 {
			t.Errorf("counts = %d, %d, want 1, 2", md.Checks[0].Count, md.Checks[1].Count)
		}
		if checks[0].Cost != 0 {
			t.Errorf("AllowMulti changed the caller's Cost to %d", checks[0].Cost)
		}
	})
}
