package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// linesWakeCase is a case of TestLinesWake: a way to wake the lines, and
// the grants the next Dispatch gives then.
type linesWakeCase struct {
	name string
	wake func(ctx context.Context, ls *throttle.Lines, class string, checks []throttle.LineCheck) error
	want int // grants at the next Dispatch
}

// linesWakeCases wake the lines by Wake, by Refresh with the rules, and by
// Refresh without them.
var linesWakeCases = []linesWakeCase{
	{"Wake", func(ctx context.Context, ls *throttle.Lines, class string, _ []throttle.LineCheck) error {
		return ls.Wake(ctx, class)
	}, 1},
	{"Refresh", func(ctx context.Context, ls *throttle.Lines, class string, checks []throttle.LineCheck) error {
		var flows []throttle.FlowRules
		for _, tenant := range []string{"acme", "globex"} {
			flows = append(flows, throttle.FlowRules{Flow: throttle.Flow{Class: class, Priority: throttle.DefaultPriority, Tenant: tenant}, Checks: checks})
		}
		return ls.Refresh(ctx, flows)
	}, 1},
	// A flow refreshed with no rules (the policies no longer give it
	// any, or its class does not read back as a task type) keeps its
	// own: it is not given every slot at once.
	{"RefreshWithoutRules", func(ctx context.Context, ls *throttle.Lines, class string, _ []throttle.LineCheck) error {
		var flows []throttle.FlowRules
		for _, tenant := range []string{"acme", "globex"} {
			flows = append(flows, throttle.FlowRules{Flow: throttle.Flow{Class: class, Priority: throttle.DefaultPriority, Tenant: tenant}})
		}
		return ls.Refresh(ctx, flows)
	}, 0},
}

// TestLinesWake: while a class waits for a slot that is far off (an hourly
// rule, full), the tasks of its waiting tenants that arrive are parked
// without a look for slots (the reply still names the rule they wait
// for), so room made by hand is not seen until the lines are woken: after
// a reset, Dispatch gives nothing; after Wake, or a policies reload
// (Refresh), it gives the next slot (one: the rule is paced). A reload
// that gives the flows no rules changes nothing.
func TestLinesWake(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, _ string) {
		for _, tc := range linesWakeCases {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				ls := l.Lines(throttle.LinesConfig{})
				class, key := "sms:"+tc.name, "provider/"+tc.name
				checks := []throttle.LineCheck{{Check: throttle.Check{Key: key, Policy: throttle.Policy{Limit: 2, Window: time.Hour}, Cost: 1}, Shared: true}}
				arrive := func(tenant, id string, want throttle.Outcome) {
					t.Helper()
					turn, err := ls.Arrive(ctx, throttle.Arrival{Class: class, Tenant: tenant, Queue: "q", ID: id, Checks: checks})
					if err != nil {
						t.Fatal(err)
					}
					if turn.Outcome != want || (want == throttle.Parked && turn.By != 0) {
						t.Fatalf("%s of %s: %v by rule %d, want %v by rule 0", id, tenant, turn.Outcome, turn.By, want)
					}
				}
				arrive("acme", tc.name+"a1", throttle.Admitted)
				arrive("acme", tc.name+"a2", throttle.Admitted)
				// The first parked task of each tenant starts its flow; the
				// rest join them, parked at once, acme's behind globex's
				// (so that acme's flow is not first of its level).
				for i := range 3 {
					arrive("globex", fmt.Sprintf("%sg%d", tc.name, i), throttle.Parked)
				}
				for i := range 4 {
					arrive("acme", fmt.Sprintf("%sa%d", tc.name, i+3), throttle.Parked)
				}
				dispatch := func() []throttle.Grant {
					t.Helper()
					return dispatchGrants(t, ls, func(id string) bool { return strings.HasPrefix(id, tc.name) })
				}
				if g := dispatch(); len(g) != 0 {
					t.Fatalf("Dispatch with the hour's 2 sent gave %v", g)
				}
				if err := l.Reset(ctx, key); err != nil {
					t.Fatal(err)
				}
				if g := dispatch(); len(g) != 0 {
					t.Fatalf("Dispatch after the reset, before the lines were woken, gave %v: the class was looked at early", g)
				}
				if err := tc.wake(ctx, ls, class, checks); err != nil {
					t.Fatal(err)
				}
				if g := dispatch(); len(g) != tc.want {
					t.Fatalf("Dispatch once woken gave %v, want %d", g, tc.want)
				}
			})
		}
		// A class with nothing waiting: no error.
		if err := l.Lines(throttle.LinesConfig{}).Wake(context.Background(), "email:send"); err != nil {
			t.Fatal(err)
		}
	})
}

// dispatchGrants runs one Dispatch of ls and returns its grants whose
// task ids mine says are the caller's (cases of one test may share lines).
func dispatchGrants(t *testing.T, ls *throttle.Lines, mine func(id string) bool) []throttle.Grant {
	t.Helper()
	turn, err := ls.Dispatch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []throttle.Grant
	for _, g := range turn.Granted {
		if mine(g.ID) {
			out = append(out, g)
		}
	}
	return out
}

// TestLinesWakeOwnRule: a flow blocked by its tenant's own rule (an hourly
// quota, full) waits in the blocked flows; after the quota is reset by
// hand, Wake makes it ready again, and Dispatch grants its task.
func TestLinesWakeOwnRule(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		ls := l.Lines(throttle.LinesConfig{})
		checks := []throttle.LineCheck{{Check: throttle.Check{Key: "quota/acme", Policy: throttle.Policy{Limit: 1, Window: time.Hour}, Cost: 1}}}
		for _, a := range []struct {
			id   string
			want throttle.Outcome
		}{{"own-1", throttle.Admitted}, {"own-2", throttle.Parked}, {"own-3", throttle.Parked}} {
			turn, err := ls.Arrive(ctx, throttle.Arrival{Class: "sms:own", Tenant: "acme", Queue: "q", ID: a.id, Checks: checks})
			if err != nil {
				t.Fatal(err)
			}
			if turn.Outcome != a.want {
				t.Fatalf("%s: %v, want %v", a.id, turn.Outcome, a.want)
			}
		}
		granted := func() []throttle.Grant {
			t.Helper()
			return dispatchGrants(t, ls, func(id string) bool { return strings.HasPrefix(id, "own-") })
		}
		if err := l.Reset(ctx, "quota/acme"); err != nil {
			t.Fatal(err)
		}
		if g := granted(); len(g) != 0 {
			t.Fatalf("Dispatch after the reset, before Wake, gave %v", g)
		}
		if err := ls.Wake(ctx, "sms:own"); err != nil {
			t.Fatal(err)
		}
		if g := granted(); len(g) != 1 || g[0].ID != "own-2" {
			t.Fatalf("Dispatch after Wake gave %v, want own-2, the quota's one", g)
		}
	})
}

// TestLinesLateClaimBeforeReap: a granted task that comes more than Late
// after its place, before any Dispatch took its grant back, is taken back
// once, by its own arrival, and then served: it is not left in its line a
// second time.
func TestLinesLateClaimBeforeReap(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, _ string) {
		ctx := context.Background()
		ls := l.Lines(throttle.LinesConfig{Lead: time.Millisecond, Late: time.Millisecond})
		checks := []throttle.LineCheck{{Check: throttle.Check{Key: "provider/late", Policy: throttle.Policy{Limit: 1, Window: 200 * time.Millisecond}, Cost: 1}, Shared: true}}
		arrive := func(id string) throttle.Turn {
			t.Helper()
			turn, err := ls.Arrive(ctx, throttle.Arrival{Class: "sms:late", Tenant: "acme", Queue: "q", ID: id, Checks: checks})
			if err != nil {
				t.Fatal(err)
			}
			return turn
		}
		if turn := arrive("late-1"); turn.Outcome != throttle.Admitted {
			t.Fatalf("late-1: %v, want admitted", turn.Outcome)
		}
		if turn := arrive("late-2"); turn.Outcome != throttle.Parked {
			t.Fatalf("late-2: %v, want parked", turn.Outcome)
		}
		// Its slot comes once late-1 leaves the window: Dispatch grants it.
		deadline := time.Now().Add(5 * time.Second)
		for {
			turn, err := ls.Dispatch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(turn.Granted) == 1 && turn.Granted[0].ID == "late-2" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("late-2 not granted within 5 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		// Its place has passed by more than Late once the clock moves on
		// a few ms (Redis's clock: poll it).
		for start := redisNow(t, rdb); redisNow(t, rdb) < start+20_000; {
			time.Sleep(5 * time.Millisecond)
		}
		turn := arrive("late-2")
		waiting, err := ls.Waiting(ctx, throttle.MaxFlows)
		if err != nil {
			t.Fatal(err)
		}
		inLine := 0
		for _, w := range waiting {
			if w.Class == "sms:late" {
				inLine += w.InLine
			}
		}
		want := 0 // sent, at once or at a place
		if turn.Outcome == throttle.Parked {
			want = 1
		}
		if inLine != want {
			t.Fatalf("late-2 came back %v with %d in its line, want %d: taken back twice", turn.Outcome, inLine, want)
		}
	})
}

// TestLinesWakeups: Wake, Refresh and Drop, called through one limiter,
// each wake a subscriber of another (Wakeups), on a single Redis and on
// a cluster (where PUBLISH reaches every node).
func TestLinesWakeups(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		woken, stop, err := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)).Lines(throttle.LinesConfig{}).Wakeups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ls := l.Lines(throttle.LinesConfig{})
		checks := []throttle.LineCheck{{Check: throttle.Check{Key: "provider", Policy: throttle.Policy{Limit: 1, Window: time.Hour}, Cost: 1}, Shared: true}}
		calls := []struct {
			name string
			call func() error
		}{
			{"Wake", func() error { return ls.Wake(ctx, "sms:send") }},
			{"Refresh", func() error {
				return ls.Refresh(ctx, []throttle.FlowRules{{Flow: throttle.Flow{Class: "sms:send", Priority: 3, Tenant: "acme"}, Checks: checks}})
			}},
			{"Drop", func() error { return ls.Drop(ctx, "no-such-task") }},
		}
		for _, c := range calls {
			if err := c.call(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			select {
			case <-woken:
			case <-time.After(30 * time.Second):
				t.Fatalf("%s woke no subscriber within 30 s", c.name)
			}
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLinesWakeRefused: a Redis user that may not publish on the lines'
// channel still wakes the lines (Wake makes the class due, as Dispatch
// then shows by giving its slot), and the error says only the wake-up
// went unpublished: ErrNotWoken.
func TestLinesWakeRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := redistest.Client(t)
	user := "nopub-" + strings.TrimSuffix(redistest.Prefix(t), ":")
	if err := admin.Do(ctx, "ACL", "SETUSER", user, "reset", "on", ">pw", "~*", "resetchannels", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
	opt := *admin.Options()
	opt.Username, opt.Password = user, "pw"
	rdb := redis.NewClient(&opt)
	t.Cleanup(func() { _ = rdb.Close() })
	ls := throttle.NewLimiter(rdb, throttle.WithPrefix(redistest.Prefix(t))).Lines(throttle.LinesConfig{})
	checks := []throttle.LineCheck{{Check: throttle.Check{Key: "provider", Policy: throttle.Policy{Limit: 1, Window: time.Hour}, Cost: 1}, Shared: true}}
	for i, id := range []string{"a", "b"} {
		turn, err := ls.Arrive(ctx, throttle.Arrival{Class: "sms:send", Tenant: "acme", Queue: "q", ID: id, Checks: checks})
		if want := []throttle.Outcome{throttle.Admitted, throttle.Parked}[i]; err != nil || turn.Outcome != want {
			t.Fatalf("arrive %s: %v, %v; want %v", id, turn.Outcome, err, want)
		}
	}
	if err := ls.Wake(ctx, "sms:send"); !errors.Is(err, throttle.ErrNotWoken) {
		t.Fatalf("Wake = %v, want ErrNotWoken", err)
	}
	if err := ls.Drop(ctx, "b"); !errors.Is(err, throttle.ErrNotWoken) {
		t.Fatalf("Drop = %v, want ErrNotWoken", err)
	}
	turn, err := ls.Dispatch(ctx)
	if err != nil || turn.Wake >= 0 {
		t.Errorf("Dispatch after the drop: %+v, %v: want nothing waiting (the drop was done)", turn, err)
	}
}
