package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// inFlight counts sends between their admission (as its reply came) and
// their release (before it was asked): each such span lies within the
// span its slot was held, so more of them at once than the cap means the
// cap was exceeded.
type inFlight struct {
	mu        sync.Mutex
	now, most int
	sends     int
}

func (f *inFlight) start() {
	f.mu.Lock()
	f.now++
	f.sends++
	f.most = max(f.most, f.now)
	f.mu.Unlock()
}

func (f *inFlight) end() {
	f.mu.Lock()
	f.now--
	f.mu.Unlock()
}

// failed reports err to t unless ctx has ended (the run is over), and
// whether there was one.
func failed(ctx context.Context, t *testing.T, err error) bool {
	if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Error(err)
	}
	return err != nil
}

// leaseCap opens the leases of a global cap of n, leased, and gives each
// group of groups an even part of it; it returns the cap's check.
func leaseCap(ctx context.Context, t *testing.T, l *throttle.Limiter, n int, groups []string) throttle.Check {
	t.Helper()
	c := capOf("rule/email/relay", n, 5*time.Second)
	c.Leased = true
	leases := l.Leases()
	if _, err := leases.Open(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if _, err := leases.Move(ctx, c, throttle.DefaultGroup, g, throttle.LeaseParts/int64(len(groups))); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// shiftSlots moves one slot's shares of cap c between groups every 40 ms,
// in a random direction, and wakes both groups' lines of class, as the
// balancer does; a give keeps what the giver holds, so a move may give
// less, or nothing.
func shiftSlots(ctx context.Context, t *testing.T, l *throttle.Limiter, c throttle.Check, groups []string, class string) {
	r := rand.New(rand.NewPCG(3, 4))
	leases := l.Leases()
	for ctx.Err() == nil {
		from := r.IntN(2)
		if _, err := leases.Move(ctx, c, groups[from], groups[1-from], worth(1, int64(c.Policy.Limit))); err != nil && ctx.Err() == nil {
			t.Error(err)
			return
		}
		for _, g := range groups {
			_ = l.InGroup(g).Lines(throttle.LinesConfig{}).Wake(ctx, class)
		}
		time.Sleep(40 * time.Millisecond)
	}
}

// TestSlotsLeasedFirstCome: a global cap of 4 leased to two groups, its
// slots moved between them every 40 ms, taken first come, first served by
// 8 callers in each group: never more than 4 sends in flight over both,
// and a group whose lease is worth no slot refuses, asking again in a
// balancer period.
func TestSlotsLeasedFirstCome(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		groups := []string{"email.0", "email.1"}
		c := leaseCap(ctx, t, l, 4, groups)
		var f inFlight
		var wg sync.WaitGroup
		wg.Go(func() { shiftSlots(ctx, t, l, c, groups, "email") })
		for gi, g := range groups {
			shard := l.InGroup(g)
			for w := range 8 {
				wg.Go(func() {
					for i := 0; ctx.Err() == nil; i++ {
						id := fmt.Sprintf("%d-%d-%d", gi, w, i)
						md, err := shard.AllowInLine(ctx, id, []throttle.Check{c})
						if failed(ctx, t, err) {
							return
						}
						if !md.Allowed {
							time.Sleep(min(md.RetryAfter, 5*time.Millisecond))
							continue
						}
						f.start()
						time.Sleep(3 * time.Millisecond)
						f.end()
						if _, err := shard.Release(context.Background(), id, []throttle.Check{c}); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
		}
		wg.Wait()
		if f.most > 4 || f.most < 3 || f.sends < 100 {
			t.Errorf("%d sends, at most %d in flight at once over both groups; want at most 4 (the cap), at least 3 reached, and 100 sends or more", f.sends, f.most)
		} else {
			t.Logf("%d sends, at most %d of 4 in flight at once over both groups", f.sends, f.most)
		}

		// All of the cap in email.0: email.1 holds a lease worth nothing.
		bg := context.Background()
		for range 10 {
			lease, err := l.Leases().Read(bg, c, groups[1])
			if err != nil {
				t.Fatal(err)
			}
			if lease.Share == 0 {
				break
			}
			if _, err := l.Leases().Move(bg, c, groups[1], groups[0], lease.Share); err != nil {
				t.Fatal(err)
			}
		}
		md, err := l.InGroup(groups[1]).AllowInLine(bg, "late", []throttle.Check{c})
		if err != nil || md.Allowed || md.RetryAfter != throttle.BalancePeriod {
			t.Errorf("a take under a lease worth no slot: allowed %v, retry %v, %v; want refused, asking again in %v", md.Allowed, md.RetryAfter, err, throttle.BalancePeriod)
		}
	})
}

// TestLeaseKeepsHeldSlots: a group holding 3 slots of a cap of 4 gives
// only the fourth, whatever is asked; released, it gives the rest.
func TestLeaseKeepsHeldSlots(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		c := leaseCap(ctx, t, l, 4, []string{"email.0"})
		shard := l.InGroup("email.0")
		for i := range 3 {
			if md, err := shard.AllowInLine(ctx, fmt.Sprint(i), []throttle.Check{c}); err != nil || !md.Allowed {
				t.Fatalf("take %d: %v, %v", i, md.Allowed, err)
			}
		}
		n, err := l.Leases().Move(ctx, c, "email.0", "email.1", throttle.LeaseParts)
		if err != nil || n != worth(1, 4) {
			t.Fatalf("a give of everything with 3 of 4 slots held gave %d shares, %v; want one slot's, %d", n, err, worth(1, 4))
		}
		for i := range 3 {
			if _, err := shard.Release(ctx, fmt.Sprint(i), []throttle.Check{c}); err != nil {
				t.Fatal(err)
			}
		}
		n, err = l.Leases().Move(ctx, c, "email.0", "email.1", throttle.LeaseParts)
		if err != nil || n != throttle.LeaseParts-worth(1, 4) {
			t.Errorf("a give of everything once released gave %d shares, %v; want the rest, %d", n, err, throttle.LeaseParts-worth(1, 4))
		}
	})
}

// TestLinesLeasedCap: the fair lines of two groups serve a global cap of
// 4 leased to them, its slots moved every 40 ms, tasks arriving in both
// every 5 ms and held 10 ms each, released through the lines (which give
// the freed slot): never more than 4 in flight over both groups.
func TestLinesLeasedCap(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, _ redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		groups := []string{"email.0", "email.1"}
		c := leaseCap(ctx, t, l, 4, groups)
		var f inFlight
		var wg sync.WaitGroup
		wg.Go(func() { shiftSlots(ctx, t, l, c, groups, "email") })
		for _, g := range groups {
			capLoad(ctx, t, &wg, l.InGroup(g).Lines(throttle.LinesConfig{}), g, c, &f)
		}
		wg.Wait()
		if f.most > 4 || f.most < 3 || f.sends < 60 {
			t.Errorf("%d sends, at most %d in flight at once over both groups; want at most 4 (the cap), at least 3 reached, and 60 sends or more", f.sends, f.most)
		} else {
			t.Logf("%d sends, at most %d of 4 in flight at once over both groups", f.sends, f.most)
		}
	})
}

// TestBalancerMovesSlots: a global cap of 4 over three groups, balanced
// by the lines' demand. Nothing waiting, it is split 2, 1, 1 (a cap keeps
// no floor of a whole slot in each group). Tasks waiting in the first
// alone get all 4 slots. Then tasks wait in the second too: the first
// keeps the slots it holds, and as it releases two, they move to the
// second, whose tasks are granted them; the first takes no new one.
func TestBalancerMovesSlots(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		s := newSlotShards(t, rdb, l, 4)
		c, groups, b := s.c, s.groups, s.b
		if _, err := b.Step(ctx); err != nil {
			t.Fatal(err)
		}
		var even []int64
		for g := range groups {
			even = append(even, s.slots(g)[0])
		}
		if fmt.Sprint(even) != "[2 1 1]" && fmt.Sprint(even) != "[1 2 1]" && fmt.Sprint(even) != "[1 1 2]" {
			t.Errorf("nothing waiting, the groups' slots are %v, want 2, 1 and 1 in some order", even)
		}

		s.arrive(0, 6)
		for range 5 {
			s.serve()
		}
		if got := s.slots(0); got[0] != 4 || got[1] != 4 || len(s.granted[0]) != 4 {
			t.Fatalf("tasks waiting in email.0 alone: it is worth %d slots and holds %d, %d tasks granted; want all 4", got[0], got[1], len(s.granted[0]))
		}

		s.arrive(1, 2)
		s.serve()
		if got := s.slots(0); got[1] != 4 || len(s.granted[1]) != 0 {
			t.Fatalf("tasks waiting in both: email.0 holds %d slots, email.1's tasks granted %d; want 4 kept, and none yet", got[1], len(s.granted[1]))
		}
		lines0 := l.InGroup(groups[0]).Lines(throttle.LinesConfig{})
		for _, id := range s.granted[0][:2] {
			if _, err := lines0.Release(ctx, "email", id, []throttle.Check{c}); err != nil {
				t.Fatal(err)
			}
		}
		s.granted[0] = s.granted[0][2:]
		for range 3 {
			s.serve()
		}
		if got0, got1 := s.slots(0), s.slots(1); got0[1] != 2 || got1[1] != 2 || len(s.granted[1]) != 2 || len(s.granted[0]) != 2 {
			t.Errorf("email.0 released 2: it holds %d slots (%d granted), email.1 %d (%d granted); want 2 and 2", got0[1], len(s.granted[0]), got1[1], len(s.granted[1]))
		}
	})
}

// TestBalancerCapTurns: a global cap of 2 over three groups, tasks
// waiting in each: the slots cannot be one to a group, and the groups
// take them in turn as they free, none waiting for good on the others'
// backlog.
func TestBalancerCapTurns(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		s := newSlotShards(t, rdb, l, 2)
		c, groups := s.c, s.groups
		for g := range groups {
			s.arrive(g, 20)
		}
		sent := make([]int, len(groups))
		for range 12 {
			s.serve()
			for g := range groups {
				lines := l.InGroup(groups[g]).Lines(throttle.LinesConfig{})
				for _, id := range s.granted[g] {
					if _, err := lines.Release(ctx, "email", id, []throttle.Check{c}); err != nil {
						t.Fatal(err)
					}
					sent[g]++
				}
				s.granted[g] = nil
			}
		}
		for _, n := range sent {
			if n < 3 {
				t.Errorf("sends by group over 12 rounds: %v; want each group 3 or more (its turn)", sent)
				break
			}
		}
	})
}

// slotShards drives the lines of groups in front of a leased cap c, one
// call at a time, with balancer b.
type slotShards struct {
	t       *testing.T
	rdb     redis.UniversalClient
	l       *throttle.Limiter
	b       *throttle.Balancer
	c       throttle.Check
	groups  []string
	granted map[int][]string // by group, the tasks holding a slot
}

// newSlotShards returns the slotShards of a global cap of n leased to
// three groups, email.0 to email.2, and their balancer.
func newSlotShards(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, n int) *slotShards {
	t.Helper()
	c := capOf("rule/email/relay", n, 5*time.Second)
	c.Leased = true
	groups := []string{"email.0", "email.1", "email.2"}
	b, err := l.NewBalancer("email", groups, []throttle.Check{c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &slotShards{t: t, rdb: rdb, l: l, b: b, c: c, groups: groups, granted: map[int][]string{}}
}

// slots returns group g's slots: what its lease is worth, and held.
func (s *slotShards) slots(g int) []int64 {
	ctx := context.Background()
	lease, err := s.l.Leases().Read(ctx, s.c, s.groups[g])
	if err != nil {
		s.t.Fatal(err)
	}
	key, err := s.l.InGroup(s.groups[g]).RedisKeyFor(s.c.Key, throttle.Concurrency)
	if err != nil {
		s.t.Fatal(err)
	}
	held := s.rdb.ZCount(ctx, key, fmt.Sprint(time.Now().UnixMicro()), "+inf").Val()
	return []int64{lease.Worth(s.c.Policy.Limit), held}
}

// arrival is task id's arrival in group g, of tenant t<g>.
func (s *slotShards) arrival(g int, id string) throttle.Arrival {
	return throttle.Arrival{Class: "email", Tenant: "t" + fmt.Sprint(g), Queue: "q", ID: id,
		Checks: []throttle.LineCheck{{Check: s.c, Shared: true}}}
}

// take records turn's task (id) when admitted, and claims its grants.
func (s *slotShards) take(g int, turn throttle.Turn, id string) {
	if turn.Outcome == throttle.Admitted || turn.Outcome == throttle.Placed {
		s.granted[g] = append(s.granted[g], id)
	}
	lines := s.l.InGroup(s.groups[g]).Lines(throttle.LinesConfig{})
	for _, gr := range turn.Granted {
		claim, err := lines.Arrive(context.Background(), s.arrival(g, gr.ID))
		if err != nil {
			s.t.Fatal(err)
		}
		if claim.Outcome == throttle.Admitted {
			s.granted[g] = append(s.granted[g], gr.ID)
		}
	}
}

// arrive brings n tasks to group g.
func (s *slotShards) arrive(g, n int) {
	lines := s.l.InGroup(s.groups[g]).Lines(throttle.LinesConfig{})
	for i := range n {
		id := fmt.Sprintf("%d-%d", g, i)
		turn, err := lines.Arrive(context.Background(), s.arrival(g, id))
		if err != nil {
			s.t.Fatal(err)
		}
		s.take(g, turn, id)
	}
}

// serve steps the balancer, then dispatches each group's lines.
func (s *slotShards) serve() {
	ctx := context.Background()
	if _, err := s.b.Step(ctx); err != nil {
		s.t.Fatal(err)
	}
	for g := range s.groups {
		turn, err := s.l.InGroup(s.groups[g]).Lines(throttle.LinesConfig{}).Dispatch(ctx)
		if err != nil {
			s.t.Fatal(err)
		}
		s.take(g, throttle.Turn{Granted: turn.Granted}, "")
	}
}

// capLoad drives group g's lines through cap c until ctx ends: a task
// arrives every 5 ms, each admitted or granted one is sent for 10 ms,
// counted in f, and released through the lines, which give the freed
// slot; a dispatch loop gives the slots the shifts bring.
func capLoad(ctx context.Context, t *testing.T, wg *sync.WaitGroup, lines *throttle.Lines, g string, c throttle.Check, f *inFlight) {
	checks := []throttle.LineCheck{{Check: c, Shared: true}}
	arrival := func(id string) throttle.Arrival {
		return throttle.Arrival{Class: "email", Tenant: fmt.Sprintf("t%d", len(id)%3), Queue: "q", ID: id, Checks: checks}
	}
	var send func(turn throttle.Turn, id string)
	send = func(turn throttle.Turn, id string) {
		for _, gr := range turn.Granted {
			claim, err := lines.Arrive(ctx, arrival(gr.ID))
			if failed(ctx, t, err) {
				return
			}
			wg.Go(func() { send(claim, gr.ID) })
		}
		if turn.Outcome != throttle.Admitted && turn.Outcome != throttle.Placed {
			return
		}
		f.start()
		time.Sleep(10 * time.Millisecond)
		f.end()
		if _, err := lines.Release(context.Background(), "email", id, []throttle.Check{c}); err != nil {
			t.Error(err)
			return
		}
		next, err := lines.Dispatch(ctx)
		if failed(ctx, t, err) {
			return
		}
		send(throttle.Turn{Granted: next.Granted}, "")
	}
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			id := fmt.Sprintf("%s-%d", g, i)
			turn, err := lines.Arrive(ctx, arrival(id))
			if failed(ctx, t, err) {
				return
			}
			wg.Go(func() { send(turn, id) })
			time.Sleep(5 * time.Millisecond)
		}
	})
	wg.Go(func() { // a dispatch loop, for the slots the shifts bring
		for ctx.Err() == nil {
			turn, err := lines.Dispatch(ctx)
			if failed(ctx, t, err) {
				return
			}
			wg.Go(func() { send(throttle.Turn{Granted: turn.Granted}, "") })
			time.Sleep(20 * time.Millisecond)
		}
	})
}
