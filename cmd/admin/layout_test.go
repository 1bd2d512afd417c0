package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/policies"
)

// TestLayout: admin layout shows the layout; with --shards and no --yes
// it says what it would do and changes nothing; with a worker running it
// refuses; with --yes it moves the windows, so that every tenant's usage
// is what it was, and names the new layout; and a second change to the
// same layout does nothing. Not parallel with other tests of the command
// that run an asynq server on a layout's queue (none do).
func TestLayout(t *testing.T) {
	ctx := context.Background()
	w := newWindows(t)
	w.send(t, "sms:send", "acme", 7)
	w.send(t, "sms:send", "globex", 3)
	w.send(t, "email:send", "acme", 2)
	usage := func() map[string][]policies.RuleUsage {
		out := map[string][]policies.RuleUsage{}
		for _, tenant := range []string{"acme", "globex"} {
			us, err := policies.Usage(ctx, w.rdb, w.prefix, w.policies, "", tenant)
			if err != nil {
				t.Fatal(err)
			}
			for i := range us {
				us[i].NextFree, us[i].EmptyIn = 0, 0 // the clock moves
			}
			out[tenant] = us
		}
		return out
	}
	before, snap := usage(), w.snapshot(t)
	run := func(args ...string) result {
		return admin(t, "", append([]string{"layout", "--redis", redistest.URL(t), "--prefix", w.prefix}, args...)...)
	}
	check := func(r result, code int, stdout []string, stderr string) {
		t.Helper()
		if r.code != code || r.stderr != stderr {
			t.Errorf("exit status %d, stderr %q; want %d, %q", r.code, r.stderr, code, stderr)
		}
		if diff := cmp.Diff(stdout, lines(r.stdout)); diff != "" {
			t.Errorf("stdout (-want +got):\n%s", diff)
		}
	}
	check(run(), 0, []string{"layout none: queues default"}, "")
	check(run("--shards", "3", "--policies", w.path), 2,
		[]string{"would change the layout from none to shards=3: move each tenant's windows to its new shard, the global windows to the pool, reset the old lines and run their tasks; the workers then serve the queues of both"},
		"admin layout: nothing changed: give --yes, with the workers stopped\n")
	if diff := cmp.Diff(snap, w.snapshot(t)); diff != "" {
		t.Errorf("without --yes the keys changed (-before +after):\n%s", diff)
	}

	refusedWhileServing(t, w, run, snap)
	// asynq's Shutdown clears the server's record before it returns.
	check(run("--shards", "3", "--policies", w.path, "--yes"), 0,
		[]string{"changed the layout from none to shards=3: 3 tenant windows moved, 0 global entries merged into the pool, 0 parked tasks run"}, "")
	if diff := cmp.Diff(before, usage()); diff != "" {
		t.Errorf("usage after the change (-before +after):\n%s", diff)
	}
	three := layout.Layout{Shards: 3}
	check(run(), 0, []string{"layout shards=3: queues " + strings.Join(append(three.TypeQueues("email:send"), three.TypeQueues("sms:send")...), ", ")}, "")
	check(run("--shards", "3", "--policies", w.path, "--yes"), 0, []string{"the layout is shards=3 already"}, "")

	// Back to one shard: three's queues are served until forgotten.
	if r := run("--shards", "1", "--policies", w.path, "--yes"); r.code != 0 {
		t.Fatalf("to one shard: exit status %d, %q", r.code, r.stderr)
	}
	if diff := cmp.Diff(before, usage()); diff != "" {
		t.Errorf("usage after the change back (-before +after):\n%s", diff)
	}
	old := strings.Join(append(three.TypeQueues("email:send"), three.TypeQueues("sms:send")...), ", ")
	check(run(), 0, []string{"layout shards=1: queues email:send, sms:send", "draining shards=3: 0 tasks in queues " + old}, "")
	check(run("--forget-drained"), 0, []string{"forgot shards=3: workers started from now on do not serve its queues"}, "")
	check(run(), 0, []string{"layout shards=1: queues email:send, sms:send"}, "")
}

// servesDefault reports whether asynq has recorded a server of the
// queue default on w's Redis.
func servesDefault(t *testing.T, w *windows) bool {
	t.Helper()
	servers, err := asynq.NewInspectorFromRedisClient(w.rdb).Servers()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if _, ok := s.Queues[layout.Legacy]; ok {
			return true
		}
	}
	return false
}

// refusedWhileServing runs an asynq server of the queue default on w's
// Redis, then records a worker present under w's prefix, and checks that
// admin layout --shards (run) refuses to change the layout while either
// runs, changing no key of snap.
func refusedWhileServing(t *testing.T, w *windows, run func(...string) result, snap map[string]string) {
	t.Helper()
	srv := asynq.NewServerFromRedisClient(w.rdb, asynq.Config{Queues: map[string]int{layout.Legacy: 1}, LogLevel: asynq.FatalLevel})
	if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })); err != nil {
		t.Fatal(err)
	}
	// asynq records a server at its first heartbeat, just after Start.
	deadline := time.Now().Add(10 * time.Second)
	for !servesDefault(t, w) {
		if time.Now().After(deadline) {
			t.Fatal("asynq has not recorded the server after 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := run("--shards", "3", "--policies", w.path, "--yes"); r.code != 1 || !strings.Contains(r.stderr, "1 asynq servers still serve") {
		t.Errorf("with an asynq server of default running: exit status %d, %q; want 1, a refusal naming it", r.code, r.stderr)
	}
	srv.Shutdown()
	// A worker of this version says it runs under the prefix, whatever
	// its queues.
	ctx := context.Background()
	if err := layout.Present(ctx, w.rdb, w.prefix, "a-worker"); err != nil {
		t.Fatal(err)
	}
	if r := run("--shards", "3", "--policies", w.path, "--yes"); r.code != 1 || !strings.Contains(r.stderr, "1 workers still run under this prefix") {
		t.Errorf("with a worker present: exit status %d, %q; want 1, a refusal", r.code, r.stderr)
	}
	if err := layout.Absent(ctx, w.rdb, w.prefix, "a-worker"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(snap, w.snapshot(t)); diff != "" {
		t.Errorf("refused, the keys changed (-before +after):\n%s", diff)
	}
}
