package throttle_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// TestLinesForgedRules: a flow's stored rules are a copy. One forged to
// allow 1,000 a second, where the policy allows 5, makes Dispatch give
// many grants at once; but each granted task, claiming with the rules in
// force, finds its grant given under other rules and is placed again
// under its own. Read from the log, no window of a second ever holds more
// than 5 admissions and places.
func TestLinesForgedRules(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		ls := l.Lines(throttle.LinesConfig{})
		policy := throttle.Policy{Limit: 5, Window: time.Second}
		checks := []throttle.LineCheck{{Check: throttle.Check{Key: "provider/forged", Policy: policy, Cost: 1}, Shared: true}}
		arrive := func(id string) throttle.Turn {
			t.Helper()
			turn, err := ls.Arrive(ctx, throttle.Arrival{Class: "sms", Tenant: "acme", Queue: "q", ID: id, Checks: checks})
			if err != nil {
				t.Fatal(err)
			}
			return turn
		}
		var ids []string
		for i := range 25 {
			ids = append(ids, fmt.Sprintf("t%d", i))
			arrive(ids[i])
		}
		// Forge the flow's stored rules: the limit 1,000.
		flows := scanKeys(t, rdb, prefix+"*qF:*")
		if len(flows) != 1 {
			t.Fatalf("flow records %v, want one key", flows)
		}
		const field = "r3:acme" // the rules of flow 3:acme (lua/lines_base.lua)
		stored, err := rdb.HGet(ctx, flows[0], field).Result()
		if err != nil || !strings.Contains(stored, `","5","1000000",`) {
			t.Fatalf("stored rules %q (%v), want a limit of 5", stored, err)
		}
		if err := rdb.HSet(ctx, flows[0], field, strings.Replace(stored, `","5","1000000",`, `","1000","1000000",`, 1)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := ls.Wake(ctx, "sms"); err != nil {
			t.Fatal(err)
		}
		turn, err := ls.Dispatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d grants under the forged rules", len(turn.Granted))
		if len(turn.Granted) < 2 {
			t.Fatalf("Dispatch gave %d grants under the forged rules: the test no longer forges anything", len(turn.Granted))
		}
		for _, g := range turn.Granted {
			arrive(g.ID)
		}
		key := redisKey(t, l, "provider/forged")
		at := scores(t, rdb, key)
		if n := mostInWindow(at, policy.Window.Microseconds()); n > policy.Limit {
			t.Errorf("the log holds %d admissions and places within a window, limit %d: %v", n, policy.Limit, at)
		}
	})
}

// scanKeys returns the keys matching pattern, on every master.
func scanKeys(t *testing.T, rdb redis.UniversalClient, pattern string) []string {
	t.Helper()
	var out []string
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, pattern, 100).Iterator()
		for it.Next(ctx) {
			out = append(out, it.Val())
		}
		return it.Err()
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(context.Background(), scan)
	} else {
		err = scan(context.Background(), rdb.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// mostInWindow returns the most of at (sorted, µs) within any span of
// window µs, an end excluded as the log excludes it.
func mostInWindow(at []int64, window int64) int {
	most := 0
	for i := range at {
		j := i
		for j < len(at) && at[j]-at[i] < window {
			j++
		}
		most = max(most, j-i)
	}
	return most
}
