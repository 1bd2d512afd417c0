package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// TestLinesAdmissionExpiry: a task admitted at once leaves each of its logs
// living until the admission has left the window, or longer: a fresh log
// is given a TTL of one window, and a log whose TTL is longer (it holds a
// place an hour ahead) keeps it.
func TestLinesAdmissionExpiry(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		ls := l.Lines(throttle.LinesConfig{})
		policy := throttle.Policy{Limit: 10, Window: time.Minute}
		fresh, ahead := redisKey(t, l, "tenant/fresh"), redisKey(t, l, "provider/ahead")
		place := time.Now().Add(time.Hour).UnixMicro()
		if err := rdb.ZAdd(ctx, ahead, redis.Z{Score: float64(place), Member: "@x#1"}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.PExpire(ctx, ahead, 2*time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		turn, err := ls.Arrive(ctx, throttle.Arrival{Class: "sms", Tenant: "acme", Queue: "q", ID: "t1", Checks: []throttle.LineCheck{
			{Check: throttle.Check{Key: "tenant/fresh", Policy: policy, Cost: 1}},
			{Check: throttle.Check{Key: "provider/ahead", Policy: policy, Cost: 1}, Shared: true},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if turn.Outcome != throttle.Admitted || turn.Wait != 0 || turn.Wake != -1 || turn.By != -1 {
			t.Fatalf("arrival: %+v, want admitted at once", turn)
		}
		if got := rdb.PTTL(ctx, fresh).Val(); got <= 0 || got > policy.Window+time.Millisecond {
			t.Errorf("fresh log's TTL = %v, want in (0, %v]", got, policy.Window+time.Millisecond)
		}
		if got := rdb.PTTL(ctx, ahead).Val(); got <= time.Hour+policy.Window {
			t.Errorf("TTL of the log with a place ahead = %v, want more than %v (kept)", got, time.Hour+policy.Window)
		}
		if n := rdb.ZCard(ctx, fresh).Val() + rdb.ZCard(ctx, ahead).Val(); n != 3 {
			t.Errorf("logs hold %d members, want 3 (the admission in each, and the place)", n)
		}
	})
}

// TestLinesLapsedGrantGoesFirst: a task whose grant lapsed (its worker died
// before it claimed it) goes back to the head of its flow, ahead of a task
// that arrives after the lapse, even when nothing else waits in the class
// and no Dispatch has taken the grant back yet: the newcomer is not
// admitted at once. Here the lapsed place has left its window (200 ms,
// shorter than the 500 ms a grant may be late), so the log alone would
// admit the newcomer. A task of another class is admitted at once: the
// lapsed grant is not its class's.
func TestLinesLapsedGrantGoesFirst(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		clock := prefix + "{" + throttle.DefaultGroup + "}qclock"
		ls := throttle.ClockedLines(l.Lines(throttle.LinesConfig{}), clock)
		now := int64(1_800_000_000_000_000)
		tick := func(d time.Duration) {
			t.Helper()
			now += d.Microseconds()
			if err := rdb.HSet(ctx, clock, "s", now/1e6, "us", now%1e6).Err(); err != nil {
				t.Fatal(err)
			}
		}
		policy := throttle.Policy{Limit: 1, Window: 200 * time.Millisecond}
		arrive := func(tenant, id string) throttle.Outcome {
			t.Helper()
			class := map[bool]string{true: "email", false: "sms"}[id[0] == 'e']
			turn, err := ls.Arrive(ctx, throttle.Arrival{Class: class, Tenant: tenant, Queue: "q", ID: id,
				Checks: []throttle.LineCheck{{Check: throttle.Check{Key: "provider", Policy: policy, Cost: 1}, Shared: true}}})
			if err != nil {
				t.Fatal(err)
			}
			return turn.Outcome
		}
		tick(0)
		if got := arrive("acme", "a1"); got != throttle.Admitted {
			t.Fatalf("a1: %v, want admitted", got)
		}
		if got := arrive("acme", "a2"); got != throttle.Parked {
			t.Fatalf("a2: %v, want parked", got)
		}
		granted := false
		for range 30 {
			tick(10 * time.Millisecond)
			turn, err := ls.Dispatch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(turn.Granted) > 0 {
				granted = true
				break
			}
		}
		if !granted {
			t.Fatal("a2 was not granted a slot within 300 ms")
		}
		// a2 never comes to claim its grant; it lapses.
		tick(700 * time.Millisecond)
		if got := arrive("globex", "b1"); got == throttle.Admitted {
			t.Errorf("b1: admitted at once, ahead of a2, whose grant lapsed and who is owed its turn back")
		}
		if got := arrive("initech", "e1"); got != throttle.Admitted {
			t.Errorf("e1, of email: %v, want admitted at once: a2's lapsed grant is of sms", got)
		}
	})
}
