package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// capOf is a Concurrency check of n slots on key with a lease.
func capOf(key string, n int, lease time.Duration) throttle.Check {
	return throttle.Check{Key: key, Policy: throttle.Policy{Limit: n, Window: lease, Algorithm: throttle.Concurrency}, Cost: 1}
}

// TestSlotsTakeRenewRelease: a cap of 2 admits two holders, refuses a
// third without a place, lets a holder back in on its own slot, and frees
// a slot on release; a renewal reports a slot no longer held.
func TestSlotsTakeRenewRelease(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		c := capOf("relay", 2, 5*time.Second)
		rate := throttle.Check{Key: "tenant:acme", Policy: throttle.PerMinute(100), Cost: 1}
		ask := func(id string) throttle.MultiDecision {
			t.Helper()
			md, err := l.AllowInLine(ctx, id, []throttle.Check{rate, c})
			if err != nil {
				t.Fatal(err)
			}
			return md
		}
		for _, id := range []string{"a", "b"} {
			if md := ask(id); !md.Allowed {
				t.Fatalf("%s on a cap with room: %+v, want admitted", id, md)
			}
		}
		md := ask("c")
		if md.Allowed || md.Denied != 1 || md.RetryAfter <= 0 || md.RetryAfter > 5*time.Second {
			t.Fatalf("c on a full cap: %+v, want denied by the cap, back within the lease", md)
		}
		logKey := redisKey(t, l, "tenant:acme")
		if n := rdb.ZCard(ctx, logKey).Val(); n != 2 {
			t.Errorf("the rate log holds %d members after a refusal by the cap, want 2 (no place taken)", n)
		}
		if md := ask("a"); !md.Allowed {
			t.Errorf("a again (redelivered) on its own slot: %+v, want admitted", md)
		}
		if lost, err := l.Renew(ctx, "b", []throttle.Check{c}); err != nil || len(lost) != 0 {
			t.Errorf("renew b = %v, %v; want nothing lost", lost, err)
		}
		if n, err := l.Release(ctx, "a", []throttle.Check{c}); err != nil || n != 1 {
			t.Fatalf("release a = %d, %v; want 1", n, err)
		}
		if n, err := l.Release(ctx, "a", []throttle.Check{c}); err != nil || n != 0 {
			t.Errorf("release a twice = %d, %v; want 0, no error", n, err)
		}
		if md := ask("c"); !md.Allowed {
			t.Errorf("c after a's release: %+v, want admitted", md)
		}
		if lost, err := l.Renew(ctx, "a", []throttle.Check{c}); err != nil || len(lost) != 1 {
			t.Errorf("renew a after its release = %v, %v; want its slot lost", lost, err)
		}
		if _, err := l.AllowMulti(ctx, []throttle.Check{c}); !errors.Is(err, throttle.ErrInvalidKey) {
			t.Errorf("AllowMulti on a cap = %v, want ErrInvalidKey (the slot needs a holder)", err)
		}
	})
}

// TestSlotsLapse: a slot not renewed lapses at its lease, read from its
// own score by the Redis clock, and its cap admits another then.
func TestSlotsLapse(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		c := capOf("relay", 1, 100*time.Millisecond)
		if md, err := l.AllowInLine(ctx, "dead", []throttle.Check{c}); err != nil || !md.Allowed {
			t.Fatalf("first holder: %+v, %v", md, err)
		}
		key, err := l.RedisKeyFor("relay", throttle.Concurrency)
		if err != nil {
			t.Fatal(err)
		}
		lapse := int64(rdb.ZScore(ctx, key, "dead").Val())
		for {
			now := redisNow(t, rdb)
			md, err := l.AllowInLine(ctx, "next", []throttle.Check{c})
			if err != nil {
				t.Fatal(err)
			}
			after := redisNow(t, rdb)
			switch {
			case md.Allowed && after <= lapse:
				t.Fatalf("admitted at or before %d, while the dead holder's slot lives until %d", after, lapse)
			case md.Allowed:
				return
			case now > lapse:
				t.Fatalf("refused at %d, after the dead holder's slot lapsed at %d", now, lapse)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// TestSlotsNeverExceeded: 16 goroutines each send 25 times through a cap
// of 3, asking again on a refusal; the sends between admission and
// release, counted in the test, are never more than 3, and reach 3.
func TestSlotsNeverExceeded(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		c := capOf("relay", 3, 5*time.Second)
		var inFlight, most, refused atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := range 16 {
			wg.Go(func() {
				for i := range 25 {
					id := fmt.Sprintf("g%d-%d", g, i)
					for {
						md, err := l.AllowInLine(ctx, id, []throttle.Check{c})
						if err != nil {
							errs <- err
							return
						}
						if md.Allowed {
							break
						}
						refused.Add(1)
					}
					n := inFlight.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(time.Millisecond)
					inFlight.Add(-1)
					if _, err := l.Release(ctx, id, []throttle.Check{c}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if m := most.Load(); m != 3 {
			t.Errorf("most sends in flight = %d, want 3 (the cap, reached)", m)
		}
		if refused.Load() == 0 {
			t.Error("no refusal: 16 goroutines never met a full cap of 3")
		}
	})
}

// capLines drives fair lines in front of caps: every task arrives at
// once, and then, one at a time, a holder releases its slot, Dispatch
// gives the freed slots, and the granted tasks arrive and claim them.
type capLines struct {
	t      *testing.T
	ls     *throttle.Lines
	class  string
	checks map[string][]throttle.LineCheck // by tenant
	weight map[string]float64
	tenant map[string]string // of each task
	held   []string          // tasks holding their slots, oldest first
	order  []string          // the tenants of the tasks admitted, in order
	most   map[string]int    // the most slots each tenant held at once
}

func (c *capLines) arrive(id string) {
	c.t.Helper()
	tenant := c.tenant[id]
	turn, err := c.ls.Arrive(context.Background(), throttle.Arrival{Class: c.class, Tenant: tenant,
		Weight: c.weight[tenant], Queue: "default", ID: id, Checks: c.checks[tenant]})
	if err != nil {
		c.t.Fatalf("arrive %s: %v", id, err)
	}
	if turn.Outcome == throttle.Admitted || turn.Outcome == throttle.Placed {
		c.held = append(c.held, id)
		c.order = append(c.order, tenant)
		n := 0
		for _, h := range c.held {
			if c.tenant[h] == tenant {
				n++
			}
		}
		c.most[tenant] = max(c.most[tenant], n)
	}
	for _, g := range turn.Granted {
		c.arrive(g.ID)
	}
}

// release frees the oldest holder's slots and serves the lines.
func (c *capLines) release() {
	c.t.Helper()
	ctx := context.Background()
	id := c.held[0]
	c.held = c.held[1:]
	var caps []throttle.Check
	for _, lc := range c.checks[c.tenant[id]] {
		caps = append(caps, lc.Check)
	}
	if n, err := c.ls.Release(ctx, c.class, id, caps); err != nil || n == 0 { // every check here is a cap
		c.t.Fatalf("release %s = %d, %v; want its slots freed", id, n, err)
	}
	turn, err := c.ls.Dispatch(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, g := range turn.Granted {
		c.arrive(g.ID)
	}
}

// TestLinesThroughCap: tenants weighted 3:1 behind a shared cap of 2 get
// its freed slots 3:1; a tenant's own cap of 1 holds it to one at once
// while the other takes the rest; the cap is never exceeded.
func TestLinesThroughCap(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		shared := throttle.LineCheck{Check: capOf("relay", 2, 5*time.Second), Shared: true}
		c := &capLines{t: t, ls: l.Lines(throttle.LinesConfig{}), class: "email:send", weight: map[string]float64{"acme": 3, "globex": 1},
			checks: map[string][]throttle.LineCheck{"acme": {shared}, "globex": {shared}},
			tenant: map[string]string{}, most: map[string]int{}}
		var ids []string
		for i := range 40 {
			for _, tenant := range []string{"acme", "globex"} {
				id := fmt.Sprintf("%s-%d", tenant, i)
				c.tenant[id] = tenant
				ids = append(ids, id)
			}
		}
		for _, id := range ids {
			c.arrive(id)
		}
		if len(c.held) != 2 {
			t.Fatalf("%d tasks hold a slot of a cap of 2 after the arrivals", len(c.held))
		}
		for range 40 {
			c.release()
			if len(c.held) > 2 {
				t.Fatalf("%d tasks hold a slot of a cap of 2", len(c.held))
			}
		}
		if len(c.held) != 2 {
			t.Fatalf("%d tasks hold a slot after 40 releases, want 2: a freed slot was not given", len(c.held))
		}
		n := map[string]int{}
		for _, tenant := range c.order[2:] {
			n[tenant]++
		}
		if n["acme"] < 29 || n["acme"] > 31 {
			t.Errorf("after the first two, the freed slots went %v, want acme 30 ± 1 of 40 (weights 3:1)", n)
		}

		// A tenant's own cap of 1 beside the shared one, now of 3.
		shared = throttle.LineCheck{Check: capOf("relay2", 3, 5*time.Second), Shared: true}
		own := throttle.LineCheck{Check: capOf("tenant/acme", 1, 5*time.Second)}
		c = &capLines{t: t, ls: l.Lines(throttle.LinesConfig{}), class: "email:bulk", weight: map[string]float64{"acme": 3, "globex": 1},
			checks: map[string][]throttle.LineCheck{"acme": {shared, own}, "globex": {shared}},
			tenant: map[string]string{}, most: map[string]int{}}
		for _, id := range ids {
			c.tenant["b"+id] = strings.SplitN(id, "-", 2)[0]
		}
		for _, id := range ids {
			c.arrive("b" + id)
		}
		for range 40 {
			c.release()
		}
		if c.most["acme"] != 1 || c.most["globex"] != 2 || len(c.held) != 3 {
			t.Errorf("most held at once: %v, and %d held at the end; want acme 1 (its own cap), globex 2 (the rest of 3)", c.most, len(c.held))
		}
	})
}

// TestLinesAbsent: a grant that its task does not claim (it stood at a
// worker that died) is taken back at once: its slot is free, and the
// task waits again behind the others of its flow.
func TestLinesAbsent(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		ls := l.Lines(throttle.LinesConfig{})
		c := capOf("relay", 1, 5*time.Second)
		checks := []throttle.LineCheck{{Check: c, Shared: true}}
		arrive := func(id string) throttle.Turn {
			t.Helper()
			turn, err := ls.Arrive(ctx, throttle.Arrival{Class: "email:send", Tenant: "acme", Queue: "default", ID: id, Checks: checks})
			if err != nil {
				t.Fatal(err)
			}
			return turn
		}
		if turn := arrive("h"); turn.Outcome != throttle.Admitted {
			t.Fatalf("h on an empty cap: %v", turn.Outcome)
		}
		for _, id := range []string{"a", "b"} {
			if turn := arrive(id); turn.Outcome != throttle.Parked {
				t.Fatalf("%s on a full cap: %v, want parked", id, turn.Outcome)
			}
		}
		dispatch := func() []string {
			t.Helper()
			turn, err := ls.Dispatch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, g := range turn.Granted {
				ids = append(ids, g.ID)
			}
			return ids
		}
		if _, err := ls.Release(ctx, "email:send", "h", []throttle.Check{c}); err != nil {
			t.Fatal(err)
		}
		if got := dispatch(); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("grants after h's release: %v, want [a]", got)
		}
		if left, err := ls.Absent(ctx, "a"); err != nil || left {
			t.Fatalf("a absent once = %v, %v; want it waiting again", left, err)
		}
		firstAbsent := time.UnixMicro(redisNow(t, rdb)) // at or after its record
		if got := dispatch(); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("grants after a's absence: %v, want [b], its slot given at once", got)
		}
		if turn := arrive("b"); turn.Outcome != throttle.Admitted {
			t.Errorf("b claims its grant: %v, want admitted", turn.Outcome)
		}
		if got := dispatch(); len(got) != 0 {
			t.Errorf("grants while b holds the cap of 1: %v, want none", got)
		}
		if left, err := ls.Absent(ctx, "b"); err != nil || left {
			t.Errorf("absent on a task not granted = %v, %v; want nothing done", left, err)
		}
		if _, err := ls.Release(ctx, "email:send", "b", []throttle.Check{c}); err != nil {
			t.Fatal(err)
		}
		if got := dispatch(); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("grants after b's release: %v, want [a], waiting again", got)
		}
		// Absent again, a second or more later: it leaves the lines, and
		// comes back as a new arrival.
		waitRedisPast(t, rdb, firstAbsent.Add(time.Second))
		if left, err := ls.Absent(ctx, "a"); err != nil || !left {
			t.Fatalf("a absent again = %v, %v; want it gone from the lines", left, err)
		}
		if got := dispatch(); len(got) != 0 {
			t.Errorf("grants with nothing waiting: %v", got)
		}
		if turn := arrive("a"); turn.Outcome != throttle.Admitted {
			t.Errorf("a back, alone, on a free cap: %v, want admitted", turn.Outcome)
		}
	})
}
