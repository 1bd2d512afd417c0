package throttle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// TestLinesEntrance: a class waits (its shared hourly rule is full), and
// Waits says so once a dispatch loop takes the entrance in, not before,
// nor once its heartbeat has gone. Tasks parked at enqueue (Enter) are taken in by
// the next Dispatch of lines that have Rules: each into its own flow, at
// its priority, once (a task in the lines already is not put there
// twice); a task its rules do not limit is released (replied as a grant);
// an entry that is not a task goes, named in Refused; a stale one goes. Lines without Rules
// (a producer's) take nothing in. Once room is made, the urgent task
// parked at enqueue is the first given a slot.
func TestLinesEntrance(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		const class, free = "sms", "email"
		checks := []throttle.LineCheck{{Check: throttle.Check{Key: "provider/sms", Policy: throttle.Policy{Limit: 2, Window: time.Hour}, Cost: 1}, Shared: true}}
		rules := func(c, tenant string) (float64, []throttle.LineCheck) {
			if c == free {
				return 1, nil
			}
			return 1, checks
		}
		worker := l.Lines(throttle.LinesConfig{Rules: rules})
		producer := l.Lines(throttle.LinesConfig{})
		arrive := func(tenant, id string, want throttle.Outcome) {
			t.Helper()
			turn, err := worker.Arrive(ctx, throttle.Arrival{Class: class, Tenant: tenant, Queue: "default", ID: id, Checks: checks})
			if err != nil || turn.Outcome != want {
				t.Fatalf("arrive %s: %v, %v; want %v", id, turn.Outcome, err, want)
			}
		}
		waits := func(c string) bool {
			t.Helper()
			w, err := producer.Waits(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		if waits(class) {
			t.Fatal("Waits before anything waits: true")
		}
		arrive("acme", "a1", throttle.Admitted)
		arrive("acme", "a2", throttle.Admitted)
		arrive("acme", "a3", throttle.Parked)
		if waits(class) {
			t.Fatal("Waits before a loop took the entrance in: true")
		}
		if _, err := worker.Dispatch(ctx); err != nil {
			t.Fatal(err)
		}
		if !waits(class) || waits(free) {
			t.Fatalf("Waits: %s %v, %s %v; want true, false", class, waits(class), free, waits(free))
		}
		entrance := entranceFill(t, rdb, producer, prefix, class, free)
		entranceTakeIn(t, rdb, worker, entrance)
		// Room made by hand: the urgent task goes first.
		if err := l.Reset(ctx, "provider/sms"); err != nil {
			t.Fatal(err)
		}
		if err := worker.Wake(ctx, class); err != nil {
			t.Fatal(err)
		}
		turn, err := worker.Dispatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(turn.Granted) == 0 || turn.Granted[0].ID != "u1" {
			t.Errorf("granted %v after room was made, want u1 first", turn.Granted)
		}
		// No loop has taken the entrance in for a while: Waits says no.
		if err := rdb.Del(ctx, prefix+"{"+throttle.DefaultGroup+"}qd").Err(); err != nil {
			t.Fatal(err)
		}
		if waits(class) {
			t.Error("Waits without the entrance's heartbeat: true, want false")
		}
	})
}

// entranceFill parks at the entrance, through the producer's lines, tasks
// of class and free, an entry that is not a task and a stale one, and
// checks that the producer's Dispatch takes none in. It returns the
// entrance's key.
func entranceFill(t *testing.T, rdb redis.UniversalClient, producer *throttle.Lines, prefix, class, free string) string {
	t.Helper()
	ctx := context.Background()
	entries := []throttle.Entry{
		{Class: class, Priority: 3, Tenant: "globex", Queue: "default", ID: "g1"},
		{Class: class, Priority: 1, Tenant: "acme", Queue: "default", ID: "u1"},
		{Class: class, Priority: 3, Tenant: "acme", Queue: "default", ID: "a3"}, // in line already
		{Class: free, Priority: 3, Tenant: "acme", Queue: "mail", ID: "e1"},
	}
	if err := producer.Enter(ctx, entries...); err != nil {
		t.Fatal(err)
	}
	entrance := prefix + "{" + throttle.DefaultGroup + "}qe"
	// An entry older than a park less a minute: its task comes back
	// by itself.
	stale, _ := json.Marshal(throttle.Entry{Class: class, Priority: 3, Tenant: "initech", Queue: "default", ID: "old",
		At: time.Now().Add(-throttle.DefaultPark).UnixMilli()})
	if err := rdb.RPush(ctx, entrance, "not a task", stale).Err(); err != nil {
		t.Fatal(err)
	}
	if turn, err := producer.Dispatch(ctx); err != nil || len(turn.Granted) > 0 || len(turn.Refused) > 0 {
		t.Fatalf("a producer's Dispatch: %+v, %v; want nothing taken in", turn, err)
	}
	if n := rdb.LLen(ctx, entrance).Val(); n != 6 {
		t.Fatalf("entrance holds %d after a producer's Dispatch, want 6", n)
	}
	return entrance
}

// entranceTakeIn checks that the worker's Dispatch empties the entrance:
// the unlimited task released, the entry that is not a task refused, and
// each limited task waiting once, in its flow.
func entranceTakeIn(t *testing.T, rdb redis.UniversalClient, worker *throttle.Lines, entrance string) {
	t.Helper()
	ctx := context.Background()
	turn, err := worker.Dispatch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(turn.Granted) != "[{mail e1}]" {
		t.Errorf("granted %v, want only the unlimited e1 released", turn.Granted)
	}
	if len(turn.Refused) != 1 || !strings.Contains(turn.Refused[0], "not a task: not a task") {
		t.Errorf("refused %q, want the entry that is not a task named", turn.Refused)
	}
	if n := rdb.LLen(ctx, entrance).Val(); n != 0 {
		t.Errorf("entrance holds %d after a worker's Dispatch, want 0", n)
	}
	flows, err := worker.Waiting(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range flows {
		got = append(got, fmt.Sprintf("%s/%d/%s:%d", f.Class, f.Priority, f.Tenant, f.InLine))
	}
	sort.Strings(got)
	if want := "[sms/1/acme:1 sms/3/acme:1 sms/3/globex:1]"; fmt.Sprint(got) != want {
		t.Errorf("waiting %v, want %s", got, want)
	}
}

// TestLinesEntranceShared: four dispatch loops take in 600 tasks parked at
// enqueue at the same time; each task is in the lines once, and the
// entrance is empty.
func TestLinesEntranceShared(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		checks := []throttle.LineCheck{{Check: throttle.Check{Key: "provider/sms", Policy: throttle.Policy{Limit: 1, Window: time.Hour}, Cost: 1}, Shared: true}}
		rules := func(string, string) (float64, []throttle.LineCheck) { return 1, checks }
		const n = 600
		var entries []throttle.Entry
		for i := range n {
			entries = append(entries, throttle.Entry{Class: "sms", Priority: 1 + i%5, Tenant: fmt.Sprintf("t%d", i%7), Queue: "default", ID: fmt.Sprint("task", i)})
		}
		if err := l.Lines(throttle.LinesConfig{}).Enter(ctx, entries...); err != nil {
			t.Fatal(err)
		}
		entrance := prefix + "{" + throttle.DefaultGroup + "}qe"
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				ls := l.Lines(throttle.LinesConfig{Rules: rules})
				for rdb.LLen(ctx, entrance).Val() > 0 {
					if _, err := ls.Dispatch(ctx); err != nil {
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
		tasks := prefix + "{" + throttle.DefaultGroup + "}qt"
		if got := rdb.HLen(ctx, tasks).Val(); got != n {
			t.Errorf("%d tasks in the lines, want %d", got, n)
		}
		flows, err := l.Lines(throttle.LinesConfig{}).Waiting(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		inLine, granted := 0, rdb.ZCard(ctx, prefix+"{"+throttle.DefaultGroup+"}qg").Val()
		for _, f := range flows {
			inLine += f.InLine
		}
		if inLine+int(granted) != n {
			t.Errorf("%d in line and %d granted, want %d in all", inLine, granted, n)
		}
	})
}
