package throttle_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// TestLinesDispatchAsksAgain: a process's first Dispatch knows no keys of
// the lines; its script serves none it was not given, asks for them, and
// the next call, given them, gives the slots: each class its next (paced)
// slot, in one Dispatch. A second Dispatch declares what it learned and
// asks nothing. Grants left unclaimed lapse, and a new process's first
// Dispatch asks for their logs and takes them back.
func TestLinesDispatchAsksAgain(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		s := newLineScene(t, rdb, l, prefix) // acme and globex wait in sms, initech in email
		time.Sleep(s.window.Window)          // room again in each class
		fresh := l.Lines(throttle.LinesConfig{})
		turn, err := fresh.Dispatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if turn.Calls < 2 {
			t.Errorf("a first Dispatch made %d calls, want it to ask again for the keys it was not given", turn.Calls)
		}
		byClass := map[byte]int{}
		for _, g := range turn.Granted {
			byClass[g.ID[0]]++
		}
		if byClass['s'] == 0 || byClass['e'] == 0 || len(turn.Refused) > 0 {
			t.Errorf("grants %v (refused %q), want slots of sms and of email", turn.Granted, turn.Refused)
		}
		time.Sleep(s.window.Window)
		turn, err = fresh.Dispatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if turn.Calls != 1 || len(turn.Granted) == 0 {
			t.Errorf("a second Dispatch made %d calls and gave %v, want one call that gives slots", turn.Calls, turn.Granted)
		}
		for _, g := range turn.Granted {
			if !strings.HasPrefix(g.ID, "s") && !strings.HasPrefix(g.ID, "e") {
				t.Errorf("grant of %q, not a task of the scene", g.ID)
			}
		}
		// No grant is claimed: past `late` they lapse, and a new process's
		// first Dispatch asks for their logs and takes them back.
		time.Sleep(throttle.DefaultLinesLate + 100*time.Millisecond)
		turn, err = l.Lines(throttle.LinesConfig{}).Dispatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lapsedBy := redisNow(t, rdb) - throttle.DefaultLinesLate.Microseconds()
		if n := rdb.ZCount(ctx, prefix+"{limits}qg", "-inf", strconv.FormatInt(lapsedBy, 10)).Val(); n > 0 || turn.Calls < 2 {
			t.Errorf("after a new process's Dispatch (%d calls), %d grants lapsed and not taken back", turn.Calls, n)
		}
	})
}

// TestLinesBackWithoutMember: a waiting task whose member is not in its
// line (the line deleted, or a line of 0.1.0's layout) joins its line
// again when it comes back, and is granted: it is not parked for ever.
func TestLinesBackWithoutMember(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		s := newLineScene(t, rdb, l, prefix) // sf of globex waits at level 3 of sms
		line := s.keys.scan("qL:sms:3")
		before := rdb.ZCard(ctx, line).Val()
		if err := rdb.Del(ctx, line).Err(); err != nil {
			t.Fatal(err)
		}
		s.arrive("sms", "globex", "sf") // back while it waits
		if n := rdb.ZCard(ctx, line).Val(); n != 1 || before < 2 {
			t.Fatalf("the line holds %d members after sf came back (before the loss %d), want sf's alone", n, before)
		}
		granted := false
		for range 10 {
			time.Sleep(s.window.Window / 2)
			turn, err := s.ls.Dispatch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range turn.Granted {
				granted = granted || g.ID == "sf"
			}
		}
		if !granted {
			t.Errorf("sf, back in its line, was not granted within 10 dispatches")
		}
	})
}
