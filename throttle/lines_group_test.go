package throttle_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// TestLinesInGroups: the Limiters of two groups (InGroup, as two shards
// have) keep windows and lines apart, every key under its own hash tag:
// a tenant full in one is admitted in the other, a parked task is granted
// by its own group's Dispatch, and each group's wake-ups reach its own
// loop.
func TestLinesInGroups(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		groups := []string{"sms:send.0", "sms:send.1"}
		lines := make([]*throttle.Lines, len(groups))
		for i, g := range groups {
			lines[i] = l.InGroup(g).Lines(throttle.LinesConfig{})
		}
		checks := []throttle.LineCheck{
			{Check: throttle.Check{Key: "rule/sms/tenant/acme", Policy: throttle.Policy{Limit: 1, Window: time.Second}, Cost: 1}},
			{Check: throttle.Check{Key: "rule/sms/provider", Policy: throttle.Policy{Limit: 5, Window: time.Second}, Cost: 1}, Shared: true},
		}
		arrive := func(ls *throttle.Lines, id string) throttle.Outcome {
			t.Helper()
			turn, err := ls.Arrive(ctx, throttle.Arrival{Class: "sms", Tenant: "acme", Queue: "q", ID: id, Checks: checks})
			if err != nil {
				t.Fatalf("arrive %s: %v", id, err)
			}
			return turn.Outcome
		}
		if got := arrive(lines[0], "a1"); got != throttle.Admitted {
			t.Fatalf("first task in %s: %v, want admitted", groups[0], got)
		}
		if got := arrive(lines[0], "a2"); got == throttle.Admitted {
			t.Fatalf("second task in %s: admitted past its tenant's limit of 1", groups[0])
		}
		if got := arrive(lines[1], "b1"); got != throttle.Admitted {
			t.Fatalf("first task in %s: %v, want admitted: the other group's window is not its own", groups[1], got)
		}
		for _, key := range redistest.Keys(t, rdb, prefix) {
			if !strings.HasPrefix(key, prefix+"{sms:send.0}") && !strings.HasPrefix(key, prefix+"{sms:send.1}") {
				t.Errorf("key %s is under neither group's hash tag", key)
			}
		}
		waitGrant(t, ctx, lines[0], "a2")
		if w, err := lines[1].Waiting(ctx, 10); err != nil || len(w) != 0 {
			t.Errorf("Waiting of %s: %v, %v; want nothing: a2 waits in the other group", groups[1], w, err)
		}
		for i, ls := range lines {
			wake, stop, err := ls.Wakeups(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := ls.Wake(ctx, "sms"); err != nil {
				t.Fatal(err)
			}
			select {
			case <-wake:
			case <-time.After(10 * time.Second):
				t.Errorf("Wake of %s did not reach its loop in 10 s", groups[i])
			}
			_ = stop()
		}
		if _, err := l.InGroup("").Allow(ctx, "k", throttle.PerSecond(1)); !errors.Is(err, throttle.ErrInvalidConfig) {
			t.Errorf("InGroup(\"\"): %v, want ErrInvalidConfig", err)
		}
	})
}

// waitGrant dispatches ls until task id is granted (its tenant's window
// frees within a second), failing t after 10 s.
func waitGrant(t *testing.T, ctx context.Context, ls *throttle.Lines, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		turn, err := ls.Dispatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range turn.Granted {
			if g.ID == id && g.Queue == "q" {
				return
			}
		}
	}
	t.Fatalf("%s not granted in 10 s", id)
}
