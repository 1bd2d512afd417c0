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
