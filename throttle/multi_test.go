package throttle_test

import (
	"context"
	"errors"
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
				{Key: "tenant:" + who, Policy: tenant, Cost: 1},
				{Key: "provider", Policy: provider, Cost: 1},
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
// checks: largest RetryAfter and ResetAfter, smallest Remaining, whatever
// the position of the check that gives each.
func TestAllowMultiStrictest(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		second := throttle.Policy{Limit: 1, Window: time.Second}
		hour := throttle.Policy{Limit: 1, Window: time.Hour}
		roomy := throttle.PerHour(100)
		mustAllowN(t, l, "second", second, 1)
		mustAllowN(t, l, "hour", hour, 1)
		// The hourly check, in the middle, has the largest RetryAfter and
		// ResetAfter: neither the first nor the last check gives them.
		md, err := l.AllowMulti(ctx, []throttle.Check{
			{Key: "second", Policy: second, Cost: 1},
			{Key: "hour", Policy: hour, Cost: 1},
			{Key: "roomy", Policy: roomy, Cost: 10},
		})
		if err != nil {
			t.Fatal(err)
		}
		if md.Allowed || md.Denied != 1 {
			t.Fatalf("decision = %+v, want denied by the hourly check (index 1)", md)
		}
		if md.RetryAfter != md.Checks[1].RetryAfter || md.RetryAfter < 59*time.Minute {
			t.Errorf("RetryAfter = %v, want the hourly check's %v", md.RetryAfter, md.Checks[1].RetryAfter)
		}
		if md.Checks[0].RetryAfter > time.Second || md.Checks[0].Allowed {
			t.Errorf("per-second check = %+v", md.Checks[0])
		}
		if md.ResetAfter != md.Checks[1].ResetAfter || md.ResetAfter < 59*time.Minute {
			t.Errorf("ResetAfter = %v, want the hourly check's %v", md.ResetAfter, md.Checks[1].ResetAfter)
		}
		if md.Remaining != 0 {
			t.Errorf("Remaining = %d, want 0", md.Remaining)
		}
		if !md.Checks[2].Allowed || md.Checks[2].Count != 0 || md.Checks[2].ResetAfter != 0 {
			t.Errorf("roomy check = %+v, want allowed alone, nothing recorded", md.Checks[2])
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

		// One unit a check and no place ahead: the script replies with the
		// counts alone, read as the same decisions.
		md, err = l.AllowMulti(ctx, []throttle.Check{
			{Key: "c", Policy: throttle.PerHour(10), Cost: 1},
			{Key: "d", Policy: throttle.PerMinute(5), Cost: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		wantChecks := []throttle.Decision{
			{Allowed: true, Limit: 10, Count: 1, Remaining: 9, ResetAfter: time.Hour},
			{Allowed: true, Limit: 5, Count: 1, Remaining: 4, ResetAfter: time.Minute},
		}
		if diff := cmp.Diff(wantChecks, md.Checks); diff != "" {
			t.Errorf("allowed checks, short reply (-want +got):\n%s", diff)
		}
		want = throttle.Decision{Allowed: true, Limit: 5, Count: 1, Remaining: 4, ResetAfter: time.Hour}
		if diff := cmp.Diff(want, md.Decision); diff != "" || md.Denied != -1 {
			t.Errorf("allowed decision, short reply (-want +got):\n%s, Denied %d", diff, md.Denied)
		}
	})
}

// TestAllowMultiDeniedRemainingIsTheLeast: in a denied call, Remaining is the
// least room of any check, even when a check that allows has less room than
// the one that denies (a cost too big for the room left); ResetAfter is the
// largest, here the first check's.
func TestAllowMultiDeniedRemainingIsTheLeast(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		long := throttle.PerHour(100)
		big := throttle.PerMinute(10)
		tight := throttle.PerMinute(5)
		mustAllowN(t, l, "long", long, 1)
		mustAllowN(t, l, "big", big, 8)
		mustAllowN(t, l, "tight", tight, 4)
		md, err := l.AllowMulti(ctx, []throttle.Check{
			{Key: "long", Policy: long, Cost: 1},
			{Key: "big", Policy: big, Cost: 3},     // 2 left: denied
			{Key: "tight", Policy: tight, Cost: 1}, // 1 left: allowed alone
		})
		if err != nil {
			t.Fatal(err)
		}
		if md.Allowed || md.Denied != 1 {
			t.Fatalf("decision = %+v, want denied by check 1", md)
		}
		got := []int{md.Checks[0].Remaining, md.Checks[1].Remaining, md.Checks[2].Remaining, md.Remaining}
		if diff := cmp.Diff([]int{99, 2, 1, 1}, got); diff != "" {
			t.Errorf("Remaining of the checks and of the call (-want +got):\n%s", diff)
		}
		if md.Limit != big.Limit || md.Count != 8 || md.RetryAfter != md.Checks[1].RetryAfter {
			t.Errorf("decision = %+v, want the denying check's Limit, Count and RetryAfter", md.Decision)
		}
		if md.ResetAfter != md.Checks[0].ResetAfter || md.ResetAfter < 59*time.Minute {
			t.Errorf("ResetAfter = %v, want the hourly check's %v", md.ResetAfter, md.Checks[0].ResetAfter)
		}
	})
}

// TestCheckCostZeroIsRejected: a Check's Cost has no default; 0 is an error,
// as AllowN(..., 0) is, and nothing is recorded.
func TestCheckCostZeroIsRejected(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		checks := []throttle.Check{{Key: "a", Policy: throttle.PerHour(3), Cost: 1}, {Key: "b", Policy: throttle.PerHour(3)}}
		if _, err := l.AllowMulti(ctx, checks); !errors.Is(err, throttle.ErrInvalidCost) {
			t.Errorf("AllowMulti with Cost 0: error = %v, want ErrInvalidCost", err)
		}
		if _, err := l.AllowInLine(ctx, "task-1", checks[1:]); !errors.Is(err, throttle.ErrInvalidCost) {
			t.Errorf("AllowInLine with Cost 0: error = %v, want ErrInvalidCost", err)
		}
		if _, err := l.AllowN(ctx, "a", throttle.PerHour(3), 0); !errors.Is(err, throttle.ErrInvalidCost) {
			t.Errorf("AllowN(0): error = %v, want ErrInvalidCost", err)
		}
		if keys := rdbKeys(t, rdb, prefix); len(keys) != 0 {
			t.Errorf("calls with Cost 0 wrote %q", keys)
		}
	})
}
