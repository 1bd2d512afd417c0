package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/arrivals"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/throttle"
)

// The tests in this file run the fair lines on a clock of their own
// (ClockedLines): a simulation moves the clock in ticks, asks Dispatch at
// every tick, delivers each granted task to Arrive a fixed fetch time after
// its grant, and records each send at the time the lines said. What they
// assert is counted from those sends: shares, order, and that no window
// ever held more than its limit.

// simTask is a task of the simulation.
type simTask struct {
	tenant   string
	priority int
}

// simSend is a send: a task sent at a time, in microseconds.
type simSend struct {
	at     int64
	id     string
	tenant string
}

// lineSim runs Lines over simulated time.
type lineSim struct {
	t       *testing.T
	rdb     redis.UniversalClient
	ls      *throttle.Lines
	clock   string
	now     int64   // microseconds
	fetch   int64   // microseconds from a grant to its task's arrival
	jitter  []int64 // added to fetch, in turn, one per delivery; none: 0
	moved   int     // deliveries so far
	held    int64   // microseconds delivered tasks spent at a worker before their place
	global  throttle.Policy
	own     map[string]throttle.Policy // tenant rules; none: no rule of its own
	weights map[string]float64
	tasks   map[string]simTask
	due     map[int64][]string // arrivals by time
	moving  map[string]bool    // tasks on their way to a worker
	sends   []simSend
	parked  int        // outcomes Parked
	watch   *paceWatch // when set, reads a log after every call
}

const simStart = int64(1_800_000_000_000_000) // a time in microseconds

func newLineSim(t *testing.T, rdb redis.UniversalClient, prefix string, global throttle.Policy) *lineSim {
	t.Helper()
	l := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	clock := prefix + "{" + throttle.DefaultGroup + "}qclock"
	return &lineSim{
		t: t, rdb: rdb, clock: clock, now: simStart, fetch: 50_000, global: global,
		ls:  throttle.ClockedLines(l.Lines(throttle.LinesConfig{}), clock),
		own: map[string]throttle.Policy{}, weights: map[string]float64{},
		tasks: map[string]simTask{}, due: map[int64][]string{}, moving: map[string]bool{},
	}
}

// setClock sets the clock the script reads to s.now.
func (s *lineSim) setClock() {
	s.t.Helper()
	if err := s.rdb.HSet(context.Background(), s.clock, "s", s.now/1e6, "us", s.now%1e6).Err(); err != nil {
		s.t.Fatal(err)
	}
}

// enqueue makes n tasks of tenant at priority arrive now, as a worker pulls
// a backlog ahead.
func (s *lineSim) enqueue(tenant string, priority, n int) []string {
	s.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-p%d-%d-%d", tenant, priority, s.now, i)
		s.tasks[ids[i]] = simTask{tenant: tenant, priority: priority}
		s.arrive(ids[i], false)
	}
	return ids
}

func (s *lineSim) checks(tenant string) []throttle.LineCheck {
	c := []throttle.LineCheck{{Check: throttle.Check{Key: "provider", Policy: s.global, Cost: 1}, Shared: true}}
	if p, ok := s.own[tenant]; ok {
		c = append(c, throttle.LineCheck{Check: throttle.Check{Key: "tenant/" + tenant, Policy: p, Cost: 1}})
	}
	return c
}

// arrive runs Arrive for task id now and acts on the turn; delivered says
// it comes by a grant (its wait for its place then counts in held).
func (s *lineSim) arrive(id string, delivered bool) {
	s.t.Helper()
	s.setClock()
	task := s.tasks[id]
	turn, err := s.ls.Arrive(context.Background(), throttle.Arrival{
		Class: "sms:send", Priority: task.priority, Tenant: task.tenant, Weight: s.weights[task.tenant],
		Queue: "default", ID: id, Checks: s.checks(task.tenant),
	})
	if err != nil {
		s.t.Fatalf("arrive %s at +%v: %v", id, s.elapsed(), err)
	}
	if s.watch != nil {
		s.watch.look(s)
	}
	switch turn.Outcome {
	case throttle.Admitted:
		s.sends = append(s.sends, simSend{s.now, id, task.tenant})
	case throttle.Placed:
		s.sends = append(s.sends, simSend{s.now + turn.Wait.Microseconds(), id, task.tenant})
		if delivered {
			s.held += turn.Wait.Microseconds()
		}
	case throttle.Parked:
		s.parked++
	default:
		s.t.Fatalf("arrive %s: outcome %v", id, turn.Outcome)
	}
	s.granted(turn)
}

// granted schedules the arrival of each granted task one fetch from now,
// as asynq would deliver it: a task already on its way (a grant taken back
// and given again before it arrived) arrives once.
func (s *lineSim) granted(turn throttle.Turn) {
	for _, g := range turn.Granted {
		if g.Queue != "default" {
			s.t.Fatalf("grant of %s in queue %q", g.ID, g.Queue)
		}
		if !s.moving[g.ID] {
			s.moving[g.ID] = true
			at := s.now + s.fetch
			if len(s.jitter) > 0 {
				at += s.jitter[s.moved%len(s.jitter)]
			}
			s.moved++
			s.due[at] = append(s.due[at], g.ID)
		}
	}
}

func (s *lineSim) elapsed() time.Duration { return time.Duration(s.now-simStart) * time.Microsecond }

// run moves the clock in ticks of 10 ms until d after the start: at each
// tick the due tasks arrive, then Dispatch runs.
func (s *lineSim) run(d time.Duration) {
	s.t.Helper()
	for end := simStart + d.Microseconds(); s.now < end; s.now += 10_000 {
		s.step()
	}
}

func (s *lineSim) step() {
	s.t.Helper()
	for _, id := range s.due[s.now] {
		delete(s.moving, id)
		s.arrive(id, true)
	}
	delete(s.due, s.now)
	s.setClock()
	turn, err := s.ls.Dispatch(context.Background())
	if err != nil {
		s.t.Fatalf("dispatch at +%v: %v", s.elapsed(), err)
	}
	if s.watch != nil {
		s.watch.look(s)
	}
	s.granted(turn)
}

// checkUsed fails the test unless acme's and globex's sends in windows 3
// to 13 come to at least want of the rule's limit, and logs them.
func (s *lineSim) checkUsed(want float64) {
	s.t.Helper()
	c := s.count(3*time.Second, 13*time.Second)
	n, of := c["acme"]+c["globex"], 10*float64(s.global.Limit)
	if float64(n) < want*of {
		s.t.Errorf("%d sends in windows 3 to 13, want at least %.2f of %.0f", n, want, of)
	}
	s.t.Logf("%d sends in windows 3 to 13, %.3f of the limit", n, float64(n)/of)
}

// count returns the sends of each tenant in [from, to) after the start.
func (s *lineSim) count(from, to time.Duration) map[string]int {
	out := map[string]int{}
	for _, x := range s.sends {
		if at := x.at - simStart; at >= from.Microseconds() && at < to.Microseconds() {
			out[x.tenant]++
		}
	}
	return out
}

// checkWindows fails the test if some span of a window held more sends
// than a rule allows, as a provider would count them.
func (s *lineSim) checkWindows() {
	s.t.Helper()
	byRule := map[string][]int64{}
	for _, x := range s.sends {
		byRule["provider"] = append(byRule["provider"], x.at)
		if _, ok := s.own[x.tenant]; ok {
			byRule["tenant/"+x.tenant] = append(byRule["tenant/"+x.tenant], x.at)
		}
	}
	for rule, times := range byRule {
		p := s.global
		if rule != "provider" {
			p = s.own[rule[len("tenant/"):]]
		}
		slices.Sort(times)
		for i := 0; i+p.Limit < len(times); i++ {
			if gap := times[i+p.Limit] - times[i]; gap < p.Window.Microseconds() {
				s.t.Errorf("rule %s: %d sends within %v (from +%v): over its limit of %d per %v",
					rule, p.Limit+1, time.Duration(gap)*time.Microsecond, time.Duration(times[i]-simStart)*time.Microsecond, p.Limit, p.Window)
				return
			}
		}
	}
	seen := map[string]bool{}
	for _, x := range s.sends {
		if seen[x.id] {
			s.t.Errorf("task %s sent twice", x.id)
		}
		seen[x.id] = true
	}
}

// checkShares fails t unless each tenant's sends over 10 windows, in c,
// are within 10% of its share in want.
func checkShares(t *testing.T, c map[string]int, want map[string]float64) {
	t.Helper()
	for tenant, w := range want {
		if got := float64(c[tenant]); got < w*0.9 || got > w*1.1 {
			t.Errorf("%s: %v sends over 10 windows, want %v ± 10%% (all: %v)", tenant, got, w, c)
		}
	}
}

// TestLinesShareEqually: two tenants with backlogs share the provider's
// limit evenly, although all of the first one's tasks came first; and no
// window holds more than the limit.
func TestLinesShareEqually(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 10, Window: time.Second})
		s.enqueue("acme", 3, 100)
		s.enqueue("globex", 3, 100)
		s.run(10 * time.Second)
		s.checkWindows()
		if s.parked == 0 {
			t.Fatalf("no task was parked")
		}
		for w := 1; w+5 <= 10; w++ {
			c := s.count(time.Duration(w)*time.Second, time.Duration(w+5)*time.Second)
			if j := arrivals.Jain(float64(c["acme"]), float64(c["globex"])); j < 0.95 || c["acme"]+c["globex"] < 48 {
				t.Errorf("windows %d to %d: sends %v, Jain's index %.3f: want both near 25", w, w+5, c, j)
			}
		}
	})
}

// TestLinesNewcomer: a tenant whose first task arrives while another has a
// deep backlog is sent within a slot interval plus the lead, not behind
// the backlog: just after the backlog's first window (whose burst leaves
// the log together, and whose slots must not be given again in a burst),
// and later.
func TestLinesNewcomer(t *testing.T) {
	t.Parallel()
	for _, after := range []time.Duration{1200 * time.Millisecond, 3 * time.Second} {
		t.Run(after.String(), func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
				s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 10, Window: time.Second})
				s.enqueue("acme", 3, 200)
				s.run(after)
				ids := s.enqueue("initech", 3, 1)
				s.run(after + 2*time.Second)
				s.checkWindows()
				i := slices.IndexFunc(s.sends, func(x simSend) bool { return x.id == ids[0] })
				if i < 0 {
					t.Fatalf("the newcomer was not sent")
				}
				wait := time.Duration(s.sends[i].at-simStart)*time.Microsecond - after
				if bound := 100*time.Millisecond + throttle.DefaultLinesLead; wait > bound {
					t.Errorf("the newcomer waited %v, want at most a slot (100ms) plus the lead: %v", wait, bound)
				}
			})
		})
	}
}

// TestLinesWeights: a tenant of weight 3 gets three sends for each of a
// tenant of weight 1, within 10% over ten windows.
func TestLinesWeights(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 8, Window: time.Second})
		s.weights["acme"] = 3
		s.enqueue("acme", 3, 150)
		s.enqueue("globex", 3, 150)
		s.run(12 * time.Second)
		s.checkWindows()
		checkShares(t, s.count(time.Second, 11*time.Second), map[string]float64{"acme": 60, "globex": 20})
	})
}

// TestLinesMaxMin: a tenant held to 1 a second by its own rule gets that,
// and the other two share the rest of the provider's 5 a second.
func TestLinesMaxMin(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 5, Window: time.Second})
		s.own["acme"] = throttle.Policy{Limit: 1, Window: time.Second}
		for _, tenant := range []string{"acme", "globex", "initech"} {
			s.enqueue(tenant, 3, 60)
		}
		s.run(12 * time.Second)
		s.checkWindows()
		checkShares(t, s.count(time.Second, 11*time.Second), map[string]float64{"acme": 10, "globex": 20, "initech": 20})
	})
}

// TestLinesPriority: an urgent task goes ahead of a backlog of lower
// priority, and the least urgent level still gets its reserved share.
func TestLinesPriority(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 10, Window: time.Second})
		s.enqueue("acme", 3, 150)
		s.enqueue("bulk", 5, 150)
		s.run(2 * time.Second)
		urgent := s.enqueue("globex", 1, 1)[0]
		s.run(12 * time.Second)
		s.checkWindows()
		sort.Slice(s.sends, func(i, j int) bool { return s.sends[i].at < s.sends[j].at })
		i := slices.IndexFunc(s.sends, func(x simSend) bool { return x.id == urgent })
		if i < 0 {
			t.Fatalf("the urgent task was not sent")
		}
		if wait := time.Duration(s.sends[i].at-simStart)*time.Microsecond - 2*time.Second; wait > 100*time.Millisecond+throttle.DefaultLinesLead {
			t.Errorf("the urgent task waited %v", wait)
		}
		c := s.count(time.Second, 11*time.Second)
		if share := float64(c["bulk"]) / float64(c["acme"]+c["bulk"]); share < 0.09 || share > 0.2 {
			t.Errorf("priority 5 got %.2f of the sends (%v), want its reserve of 0.10", share, c)
		}
	})
}

// TestLinesReserveThreeLevels: with three levels waiting (a backlog at
// priority 1 that could take every slot, and backlogs at 3 and at 5), each
// less urgent level gets its reserve, a tenth of the sends, over 10
// windows (50 of 500; 45 when a level earned its credit only from the
// levels above it).
func TestLinesReserveThreeLevels(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 50, Window: time.Second})
		s.enqueue("urgent", 1, 800)
		s.enqueue("normal", 3, 150)
		s.enqueue("bulk", 5, 150)
		s.run(12 * time.Second)
		s.checkWindows()
		c := s.count(time.Second, 11*time.Second)
		all := c["urgent"] + c["normal"] + c["bulk"]
		for _, tenant := range []string{"normal", "bulk"} {
			// The span's edges may cut one grant of the ten.
			if c[tenant] < all/10-1 {
				t.Errorf("%s got %d of %d sends (%v), want its reserve of a tenth", tenant, c[tenant], all, c)
			}
		}
		t.Logf("sends over 10 windows: %v", c)
	})
}

// TestLinesReserveAtMost: at the largest reserve, 50, with three levels
// waiting, the two less urgent levels cannot be owed every grant between
// them: each gets a third of the sends, and so does the most urgent.
func TestLinesReserveAtMost(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 30, Window: time.Second})
		s.ls = throttle.ClockedLines(l.Lines(throttle.LinesConfig{Reserve: throttle.MaxReserve}), s.clock)
		s.enqueue("urgent", 1, 300)
		s.enqueue("normal", 3, 300)
		s.enqueue("bulk", 5, 300)
		s.run(12 * time.Second)
		s.checkWindows()
		c := s.count(time.Second, 11*time.Second)
		all := c["urgent"] + c["normal"] + c["bulk"]
		for _, tenant := range []string{"urgent", "normal", "bulk"} {
			if c[tenant] < all*3/10 {
				t.Errorf("%s got %d of %d sends (%v), want about a third", tenant, c[tenant], all, c)
			}
		}
	})
}

// TestLinesLateArrivals: granted tasks that reach a worker after their
// place (a fetch of 400 ms, longer than the first lead) are sent when they
// come, their places moved to then, never at a place that has passed; the
// lines learn a longer lead, and from the third window the rule is used at
// 0.95 of its limit or more. Every task is sent once, and no window holds
// more than the limit.
func TestLinesLateArrivals(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 5, Window: time.Second})
		s.fetch = 400_000
		s.enqueue("acme", 3, 50)
		s.enqueue("globex", 3, 50)
		s.run(30 * time.Second)
		s.checkWindows()
		if len(s.sends) != 100 {
			t.Errorf("%d of 100 tasks sent", len(s.sends))
		}
		c := s.count(3*time.Second, 19*time.Second)
		if n := c["acme"] + c["globex"]; n < 76 {
			t.Errorf("%d sends in windows 3 to 19, want at least 0.95 of 80", n)
		}
	})
}

// TestLinesVaryingDeliveries: granted tasks reach their workers after 20
// ms to 400 ms, in turn (1 in 7 takes 400 ms). The lead learns the middle
// of the deliveries, not the slowest: a task that comes early holds its
// worker until its place, and one that comes after its place is sent at
// once, its place moved to then. So every window, counted exactly as the
// provider counts it (no margin), holds at most its limit; every task is
// sent once; and a task waits at its worker for a third of what a lead
// above the slowest delivery would cost it (about 120 ms a task here,
// which the lead of the previous release gave).
func TestLinesVaryingDeliveries(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 50, Window: time.Second})
		s.fetch = 20_000
		s.jitter = []int64{0, 40_000, 120_000, 380_000, 70_000, 10_000, 160_000}
		s.watchPaces(prefix)
		s.enqueue("acme", 3, 400)
		s.enqueue("globex", 3, 400)
		s.watch.from = s.now + 1
		s.run(30 * time.Second)
		s.checkWindows()
		s.checkPaces()
		if len(s.sends) != 800 {
			t.Fatalf("%d of 800 tasks sent", len(s.sends))
		}
		mean := time.Duration(s.held/int64(s.moved)) * time.Microsecond
		t.Logf("a delivered task waited %v at its worker on average", mean)
		if mean > 60*time.Millisecond {
			t.Errorf("a granted task waited %v at its worker on average, want at most 60ms", mean)
		}
		// A late task's place moves to its send, and its slot's next turn
		// comes that much later; the pace, which never gives two places
		// closer than a slot interval, does not catch up on it (0.94 of
		// the rule was used when it did, in bursts). Some of the rate is
		// lost (0.87 was used here when this was written; 0.936 since the
		// lead in use rises slowly), never a window exceeded.
		s.checkUsed(0.92)
	})
}

// TestLinesSlowDeliveries: granted tasks reach their workers in 20 ms,
// but three in a row take 320 ms once in 33, claimed late and their places
// moved. The lead in use rises at most half as fast as time, so these few
// do not leap the horizon past the places the pace gave ahead of it, a
// gap never recovered: at least 0.92 of the rule is used (0.930; 0.910
// with a lead that follows them at once), and no window holds more than
// its limit.
func TestLinesSlowDeliveries(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 50, Window: time.Second})
		s.fetch = 20_000
		s.jitter = append(make([]int64, 30), 300_000, 300_000, 300_000)
		s.enqueue("acme", 3, 400)
		s.enqueue("globex", 3, 400)
		s.run(16 * time.Second)
		s.checkWindows()
		s.checkUsed(0.92)
	})
}

// TestLinesWaiting: Waiting lists each waiting flow with the tasks in its
// line (every task not yet given a slot), its weight, and its tenant's
// grants over the last share spans, which equal weights make equal; and
// Demand sums the weights by priority.
func TestLinesWaiting(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 10, Window: time.Second})
		s.weights["globex"] = 2
		s.enqueue("acme", 3, 100)
		s.enqueue("globex", 1, 100)
		s.run(8 * time.Second)
		s.setClock()
		got, err := s.ls.Waiting(context.Background(), 100)
		if err != nil {
			t.Fatal(err)
		}
		given := map[string]int{}
		for _, x := range s.sends {
			given[x.tenant]++
		}
		for id := range s.moving {
			given[s.tasks[id].tenant]++
		}
		if len(got) != 2 {
			t.Fatalf("Waiting = %+v, want acme and globex", got)
		}
		grants := map[string]int{}
		for _, f := range got {
			want := map[string]struct {
				priority int
				weight   float64
			}{"acme": {3, 1}, "globex": {1, 2}}[f.Tenant]
			if f.Class != "sms:send" || f.Priority != want.priority || f.Weight != want.weight || f.InLine != 100-given[f.Tenant] {
				t.Errorf("%+v: want priority %d, weight %v, %d in line", f, want.priority, want.weight, 100-given[f.Tenant])
			}
			grants[f.Tenant] = f.Grants
		}
		// globex is more urgent: acme gets its reserve, one grant in ten,
		// over 5 to 10 s of a rule of 10 a second.
		if g, a := grants["globex"], grants["acme"]; g < 40 || a < 4 || a > g/5 {
			t.Errorf("grants over the last spans: %v; want globex's at least 40 and acme's its reserve", grants)
		}
		// What the balancer reads: each level's waiting weight.
		demand, err := s.ls.Demand(context.Background(), "sms:send")
		if want := []float64{2, 0, 1, 0, 0}; err != nil || !slices.Equal(demand, want) {
			t.Errorf("Demand = %v, %v; want %v", demand, err, want)
		}
		if other, err := s.ls.Demand(context.Background(), "email:send"); err != nil || !slices.Equal(other, make([]float64, 5)) {
			t.Errorf("Demand of a class with no flow = %v, %v; want zeros", other, err)
		}
	})
}

// TestLinesDrop: a parked task dropped (deleted from its queue) is never
// granted, and a dropped grant's place is free again.
func TestLinesDrop(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 2, Window: time.Second})
		ids := s.enqueue("acme", 3, 6)
		ctx := context.Background()
		for _, id := range ids[2:4] {
			if err := s.ls.Drop(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		s.run(5 * time.Second)
		s.checkWindows()
		var sent []string
		for _, x := range s.sends {
			sent = append(sent, x.id)
		}
		want := []string{ids[0], ids[1], ids[4], ids[5]}
		if !slices.Equal(sent, want) {
			t.Errorf("sent %v, want %v", sent, want)
		}
		if err := s.ls.Drop(ctx, "no-such-task"); err != nil {
			t.Errorf("dropping a task in no line: %v", err)
		}
	})
}

// TestLinesRefresh: a policies reload that lowers the shared limit applies
// to the tasks already waiting, through Waiting and Refresh: from the first
// window after it, no window holds more than the new limit, and the rule
// is still used in full.
func TestLinesRefresh(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 10, Window: time.Second})
		s.enqueue("acme", 3, 100)
		s.enqueue("globex", 2, 100)
		s.run(3 * time.Second)
		ctx := context.Background()
		waiting, err := s.ls.Waiting(ctx, throttle.MaxFlows)
		if err != nil {
			t.Fatal(err)
		}
		var flows []throttle.Flow
		for _, w := range waiting {
			flows = append(flows, w.Flow)
		}
		slices.SortFunc(flows, func(a, b throttle.Flow) int { return strings.Compare(a.Tenant, b.Tenant) })
		if want := []throttle.Flow{{"sms:send", 3, "acme"}, {"sms:send", 2, "globex"}}; !slices.Equal(flows, want) {
			t.Fatalf("Waiting = %v, want %v", flows, want)
		}
		s.global = throttle.Policy{Limit: 4, Window: time.Second}
		var refresh []throttle.FlowRules
		for _, f := range flows {
			refresh = append(refresh, throttle.FlowRules{Flow: f, Checks: s.checks(f.Tenant)})
		}
		if err := s.ls.Refresh(ctx, refresh); err != nil {
			t.Fatal(err)
		}
		before := len(s.sends)
		s.run(9 * time.Second)
		var after []int64
		for _, x := range s.sends[before:] {
			if x.at >= simStart+4_000_000 {
				after = append(after, x.at)
			}
		}
		slices.Sort(after)
		for i := 0; i+4 < len(after); i++ {
			if after[i+4]-after[i] < 1_000_000 {
				t.Fatalf("5 sends within a second after the reload to 4 a second, from +%v", time.Duration(after[i]-simStart)*time.Microsecond)
			}
		}
		if n := len(after); n < 19 {
			t.Errorf("%d sends in the 5 s after the reload's first second, want about 20", n)
		}
	})
}

// TestLinesTakeOver: when the lead is long (granted tasks take 400 ms to
// reach a worker), the places given up to it are held by tasks on their
// way; a newcomer at a worker takes over the earliest of them, instead of
// waiting for the lead and a slot, and the bumped task is placed again
// when it comes. Every task is still sent once, within the limits.
func TestLinesTakeOver(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 10, Window: time.Second})
		s.fetch = 400_000
		s.enqueue("acme", 3, 100)
		s.run(3 * time.Second)
		ids := s.enqueue("initech", 3, 1)
		s.run(14 * time.Second)
		s.checkWindows()
		if len(s.sends) != 101 {
			t.Errorf("%d of 101 tasks sent", len(s.sends))
		}
		i := slices.IndexFunc(s.sends, func(x simSend) bool { return x.id == ids[0] })
		if i < 0 {
			t.Fatalf("the newcomer was not sent")
		}
		// The bound, a slot plus the fetch interval (none here)
		// plus 100 ms; without taking over, the lead and a slot, 550 ms.
		if wait := time.Duration(s.sends[i].at-simStart)*time.Microsecond - 3*time.Second; wait > 200*time.Millisecond {
			t.Errorf("the newcomer waited %v with a lead near 400 ms, want at most a slot plus 100 ms: it takes over a place", wait)
		}
	})
}

// TestLinesCounterRule: a shared rule of a counter algorithm (here the
// fixed window, 10 a second) gives a slot only when it allows one now,
// and records it then: over 5 windows a backlog gets the rule's 50 sends,
// give or take the one window a grant may be recorded ahead of its send,
// never more.
func TestLinesCounterRule(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 10, Window: time.Second, Algorithm: throttle.FixedWindow})
		s.enqueue("acme", 3, 100)
		s.enqueue("globex", 3, 100)
		s.run(5 * time.Second)
		if n := len(s.sends); n < 40 || n > 60 {
			t.Errorf("%d sends in 5 windows of a fixed window of 10, want 50 give or take a window", n)
		}
		c := s.count(0, 5*time.Second)
		if j := arrivals.Jain(float64(c["acme"]), float64(c["globex"])); j < 0.95 {
			t.Errorf("sends %v: Jain's index %.3f", c, j)
		}
	})
}

// TestLinesRefuseKeysNotUTF8: a check whose key is not valid UTF-8 is
// refused before Redis: JSON, which carries the lines' rules, would turn
// it into another key than the limiter's, and split its limit in two.
func TestLinesRefuseKeysNotUTF8(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ls := l.Lines(throttle.LinesConfig{})
		_, err := ls.Arrive(context.Background(), throttle.Arrival{Class: "sms", Tenant: "acme", Queue: "q", ID: "t1",
			Checks: []throttle.LineCheck{{Check: throttle.Check{Key: "tenant:\xff", Policy: throttle.Policy{Limit: 1, Window: time.Second}, Cost: 1}}}})
		if !errors.Is(err, throttle.ErrInvalidKey) || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Fatalf("Arrive with a key not UTF-8: %v, want ErrInvalidKey naming it", err)
		}
		if n, _ := rdb.HLen(context.Background(), prefix+"{limits}qt").Result(); n != 0 {
			t.Errorf("the refused arrival wrote %d tasks", n)
		}
	})
}

// TestLinesDropLooksAgain: drop.lua touches nothing when the task's record
// is not the one its caller read (the keys it was given may be another
// flow's), and replies so; given the record as it is, it drops the task,
// and its flow, whose line it empties, leaves the ready flows.
func TestLinesDropLooksAgain(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		ctx := context.Background()
		base := prefix + "{limits}"
		record := `{"s":"W","c":"sms","l":3,"t":"acme","q":"q","n":"4503599627370496"}`
		if err := rdb.HSet(ctx, base+"qt", "t1", record).Err(); err != nil {
			t.Fatal(err)
		}
		// The line's member: tenant, sequence number 2^52, entry (lua/lines_base.lua).
		if err := rdb.ZAdd(ctx, base+"qL:sms:3", redis.Z{Member: "4:acme0010000000000000" + "1:qt1"}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.ZAdd(ctx, base+"qr:sms:3", redis.Z{Member: "acme"}).Err(); err != nil {
			t.Fatal(err)
		}
		s := lua.LinesSettings{Base: base, Lead: time.Millisecond, Tolerance: time.Millisecond, MostGrants: 1, Reserve: 10, Late: time.Millisecond}
		keys := s.Keys(base+"qL:sms:3", base+"qF:sms", base+"qr:sms:3", base+"qb:sms", base+"qi:sms:3")
		for _, c := range []struct {
			read    string
			outcome int64
			kept    bool // the task still in its line and in qt
		}{{`{"s":"G"}`, 1, true}, {record, 0, false}} {
			got, err := lua.Lines.Drop.Run(ctx, rdb, keys, s.Args("t1", c.read, "")...).Int64Slice()
			if err != nil || got[0] != c.outcome {
				t.Fatalf("drop.lua with the record read as %s: %v, %v, want outcome %d", c.read, got, err, c.outcome)
			}
			inLine, inTasks := rdb.ZCard(ctx, base+"qL:sms:3").Val() == 1, rdb.HExists(ctx, base+"qt", "t1").Val()
			ready := rdb.ZScore(ctx, base+"qr:sms:3", "acme").Err() == nil
			if inLine != c.kept || inTasks != c.kept || ready != c.kept {
				t.Errorf("with the record read as %s: in its line %v, in qt %v, its flow ready %v, want %v", c.read, inLine, inTasks, ready, c.kept)
			}
		}
	})
}

// TestLinesGrantedLapses: a grant reads as granted until its place is
// `late` (LinesConfig.Late, 500 ms) past, and not after, though nothing has
// taken it back yet: a mover stops trying then.
func TestLinesGrantedLapses(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *throttle.Limiter, prefix string) {
		ctx := context.Background()
		s := newLineSim(t, rdb, prefix, throttle.Policy{Limit: 1, Window: 100 * time.Millisecond})
		s.enqueue("acme", 3, 3) // the first admitted, the second placed, the third parked
		s.now += 200_000        // both leave the window
		s.setClock()
		turn, err := s.ls.Dispatch(ctx)
		if err != nil || len(turn.Granted) != 1 {
			t.Fatalf("dispatch: %+v, %v, want one grant", turn, err)
		}
		id := turn.Granted[0].ID
		key := redisKey(t, throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)), "provider")
		at, err := rdb.ZScore(ctx, key, "@"+id+"#1").Result()
		if err != nil {
			t.Fatalf("the grant's place: %v", err)
		}
		last := int64(at)
		for _, c := range []struct {
			at   int64
			want bool
		}{{last + 500_000, true}, {last + 500_001, false}} {
			s.now = c.at
			s.setClock()
			g, err := s.ls.Granted(ctx, id)
			if err != nil || g != c.want {
				t.Errorf("Granted %v after its place: %v, %v, want %v", us(c.at-last), g, err, c.want)
			}
		}
	})
}
