package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// TestResetLines: four sms:send tasks in asynq's scheduled set, due in 10
// minutes as a parked task is: the first admitted at once, two waiting in
// the fair lines, one at the entrance. The dry run changes nothing; with --yes the
// lines are empty and the parked tasks pending.
func TestResetLines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWindows(t)
	queue := strings.TrimSuffix(w.prefix, ":") // a queue of the test's own
	client := asynq.NewClientFromRedisClient(w.rdb)
	ins := asynq.NewInspectorFromRedisClient(w.rdb)
	t.Cleanup(func() { _ = ins.DeleteQueue(queue, true) })
	ls := w.limiter.Lines(throttle.LinesConfig{})
	ids := parkFour(t, client, ls, queue)
	args := []string{"reset-lines", "--redis", redistest.URL(t), "--prefix", w.prefix, "--type", "sms:send"}
	states := func() map[asynq.TaskState]int {
		out := map[asynq.TaskState]int{}
		for _, id := range ids {
			info, err := ins.GetTaskInfo(queue, id)
			if err != nil {
				t.Fatal(err)
			}
			out[info.State]++
		}
		return out
	}

	before := w.snapshot(t)
	r := admin(t, "", args...)
	if r.code != 2 || !strings.Contains(r.stderr, "give --yes") {
		t.Errorf("dry run: exit %d, stderr %q; want 2 and a word of --yes", r.code, r.stderr)
	}
	if want := `would reset the fair lines of "sms:send": `; !strings.HasPrefix(r.stdout, want) ||
		!strings.Contains(r.stdout, "2 tasks waiting") || !strings.Contains(r.stdout, "1 at the entrance") ||
		!strings.Contains(r.stdout, "would move the 3 parked tasks") {
		t.Errorf("dry run said:\n%s", r.stdout)
	}
	if diff := cmp.Diff(before, w.snapshot(t)); diff != "" {
		t.Errorf("the dry run changed Redis:\n%s", diff)
	}
	if got := states(); got[asynq.TaskStateScheduled] != 4 {
		t.Errorf("after the dry run, tasks by state %v, want 4 scheduled", got)
	}

	r = admin(t, "", append(args, "--yes")...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("reset-lines --yes: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{`reset the fair lines of "sms:send"`, "lost: the tenants' order", "moved 3 parked tasks to their queues' pending lists"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout has no %q:\n%s", want, r.stdout)
		}
	}
	if got := states(); got[asynq.TaskStatePending] != 3 || got[asynq.TaskStateScheduled] != 1 {
		t.Errorf("after the reset, tasks by state %v, want 3 pending and the one admitted at once, never parked, scheduled", got)
	}
	for k := range w.snapshot(t) {
		if strings.Contains(k, "sms") && strings.Contains(k, "}q") {
			t.Errorf("key %s left after the reset", k)
		}
	}
	c, err := ls.ClassLines(ctx, "sms:send")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Keys)+len(c.Parked()) != 0 {
		t.Errorf("the lines of sms:send after the reset: %+v", c)
	}
}

// parkFour enqueues four sms:send tasks of acme on queue, due when a
// parked task is, and brings them to ls under a rule of one an hour: the
// first admitted at once, two waiting, the last at the entrance. It
// returns their IDs.
func parkFour(t *testing.T, client *asynq.Client, ls *throttle.Lines, queue string) (ids []string) {
	t.Helper()
	ctx := context.Background()
	full := throttle.Policy{Limit: 1, Window: time.Hour}
	for i := range 4 {
		info, err := client.Enqueue(asynq.NewTask("sms:send", nil), asynq.Queue(queue), asynq.ProcessIn(throttle.DefaultPark))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
		if i == 3 {
			if err := ls.Enter(ctx, throttle.Entry{Class: "sms:send", Priority: 3, Tenant: "acme", Queue: queue, ID: info.ID}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := ls.Arrive(ctx, throttle.Arrival{Class: "sms:send", Tenant: "acme", Queue: queue, ID: info.ID,
			Checks: []throttle.LineCheck{{Check: throttle.Check{Key: "provider/sms:send", Policy: full, Cost: 1}, Shared: true}}}); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// TestResetLinesShards: on three shards, reset-lines reads and empties the
// lines of every shard of the type, and moves the parked tasks of all.
func TestResetLinesShards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWindows(t)
	three := layout.Layout{Shards: 3}
	if err := layout.Ensure(ctx, w.rdb, w.prefix, three); err != nil {
		t.Fatal(err)
	}
	queue := strings.TrimSuffix(w.prefix, ":")
	client := asynq.NewClientFromRedisClient(w.rdb)
	ins := asynq.NewInspectorFromRedisClient(w.rdb)
	t.Cleanup(func() { _ = ins.DeleteQueue(queue, true) })
	groups := three.Groups("sms:send")
	var lines []*throttle.Lines
	for _, g := range groups[:2] {
		ls := w.limiter.InGroup(g).Lines(throttle.LinesConfig{})
		parkFour(t, client, ls, queue)
		lines = append(lines, ls)
	}
	args := []string{"reset-lines", "--redis", redistest.URL(t), "--prefix", w.prefix, "--type", "sms:send"}

	r := admin(t, "", args...)
	if r.code != 2 || !strings.Contains(r.stdout, "would move the 6 parked tasks") {
		t.Errorf("dry run: exit %d, stdout:\n%s", r.code, r.stdout)
	}
	r = admin(t, "", append(args, "--yes")...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("reset-lines --yes: exit %d, stderr %q", r.code, r.stderr)
	}
	for i, g := range groups {
		head := fmt.Sprintf(`reset the fair lines of "sms:send" in shard %q: `, g)
		_, said, ok := strings.Cut(r.stdout, head)
		said, _, _ = strings.Cut(said, "\n")
		if want := "2 tasks waiting"; !ok || i < 2 && !strings.Contains(said, want) {
			t.Errorf("stdout has no %q with %q:\n%s", head, want, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "moved 6 parked tasks to their queues' pending lists") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	for i, ls := range lines {
		c, err := ls.ClassLines(ctx, "sms:send")
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Keys)+len(c.Parked()) != 0 {
			t.Errorf("the lines of sms:send in shard %s after the reset: %+v", groups[i], c)
		}
	}
}
