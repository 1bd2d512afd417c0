package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/retryset"
	"github.com/sluicehq/sluice/worker"
)

// waitFor is how long a test waits for asynq before it fails: it polls
// Redis, and the race detector on a loaded machine slows everything.
const waitFor = 30 * time.Second

// errProvider is the failure of the test handler: its message mentions
// throttling, but not as a ThrottledError does.
var errProvider = errors.New("provider down: throttled by the carrier")

// throttledQueue runs a real asynq server, configured as docs/WORKERS.md
// tells users of the middleware, with worker.Throttle holding tenants to
// one SMS an hour, on a queue of its own: it sends acme's three tasks and
// globex's one to the handler and back, and a task of tenant "broken"
// fails. It returns the queue, once the server has stopped with two of
// acme's tasks throttled into the retry set, and broken's failed there,
// and the IDs of acme's throttled tasks.
func throttledQueue(t *testing.T) (queue string, throttled []string) {
	t.Helper()
	w := newWindows(t)
	p, err := policies.Parse("test", []byte("tasks:\n  sms:send:\n    - {name: per-hour, scope: tenant, limit: 1, window: 1h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := worker.NewThrottle(w.limiter, policies.Static(p),
		&worker.ThrottleConfig{DelayedTaskCheckInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	queue = redistest.Queue(t, w.rdb)
	ran := make(chan string, 10)
	errs := make(chan error, 10)
	srv := asynq.NewServerFromRedisClient(w.rdb, asynq.Config{
		Concurrency:              2,
		Queues:                   map[string]int{queue: 1},
		TaskCheckInterval:        50 * time.Millisecond,
		DelayedTaskCheckInterval: 100 * time.Millisecond,
		IsFailure:                worker.IsFailure,
		RetryDelayFunc:           worker.RetryDelay(nil),
		ErrorHandler:             asynq.ErrorHandlerFunc(func(_ context.Context, _ *asynq.Task, err error) { errs <- err }),
		LogLevel:                 asynq.FatalLevel,
	})
	handler := asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		tenant := task.Headers()[producer.HeaderTenant]
		ran <- tenant
		if tenant == "broken" {
			return errProvider
		}
		return nil
	})
	if err := srv.Start(tr.Middleware(handler)); err != nil {
		t.Fatalf("start asynq server: %v", err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			tr.Stop()
			srv.Shutdown()
		}
	}
	t.Cleanup(stop)

	acme := enqueueSMS(t, asynq.NewClientFromRedisClient(w.rdb), queue, "acme", "acme", "acme", "globex", "broken")
	var tenants []string
	var returned []error
	deadline := time.After(waitFor)
	for len(tenants) < 3 || len(returned) < 3 {
		select {
		case tenant := <-ran:
			tenants = append(tenants, tenant)
		case err := <-errs:
			returned = append(returned, err)
		case <-deadline:
			t.Fatalf("after %v the handler ran for %q and returned %v; want acme, globex and broken, and 3 errors", waitFor, tenants, returned)
		}
	}
	stop()
	slices.Sort(tenants)
	if diff := cmp.Diff([]string{"acme", "broken", "globex"}, tenants); diff != "" {
		t.Fatalf("the handler ran for (-want +got):\n%s", diff)
	}
	return queue, retried(t, w, queue, acme)
}

// enqueueSMS enqueues an SMS task on queue for each of tenants, and returns
// the IDs of acme's.
func enqueueSMS(t *testing.T, client *asynq.Client, queue string, tenants ...string) (acme []string) {
	t.Helper()
	for _, tenant := range tenants {
		task, err := producer.NewSMSTask(tenant, producer.SMS{To: "+15551234567", Body: "hi"}, asynq.MaxRetry(3))
		if err != nil {
			t.Fatal(err)
		}
		info, err := client.Enqueue(task, asynq.Queue(queue))
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		if tenant == "acme" {
			acme = append(acme, info.ID)
		}
	}
	return acme
}

// retried returns the IDs of those of acme's tasks that are in queue's
// retry set, as asynq's inspector sees it, once it has checked that the
// set holds what throttledQueue expects: 3 tasks, 2 of them acme's.
func retried(t *testing.T, w *windows, queue string, acme []string) (throttled []string) {
	t.Helper()
	infos, err := asynq.NewInspectorFromRedisClient(w.rdb).ListRetryTasks(queue)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if slices.Contains(acme, info.ID) {
			throttled = append(throttled, info.ID)
		}
	}
	if len(infos) != 3 || len(throttled) != 2 {
		t.Fatalf("the retry set holds %d tasks, %d of them acme's; want 3 and 2", len(infos), len(throttled))
	}
	return throttled
}

// TestThrottled: throttled lists the tasks that a real worker.Throttle sent
// back to the retry set, with their tenant, time and rule, and counts apart
// the task that failed, whose error mentions throttling but is not a
// ThrottledError.
func TestThrottled(t *testing.T) {
	t.Parallel()
	queue, ids := throttledQueue(t)
	url := redistest.URL(t)
	checkThrottledJSON(t, url, queue, ids)

	// The table, then the count.
	r := admin(t, "", "throttled", "--redis", url, "--queue", queue)
	table := lines(r.stdout)
	if len(table) != 4 {
		t.Fatalf("stdout has %d lines, want a header, 2 tasks and a count:\n%s", len(table), r.stdout)
	}
	if want := "QUEUE ID TYPE TENANT BACK LAST ERROR"; table[0] != want {
		t.Errorf("header %q, want %q", table[0], want)
	}
	for i, id := range ids {
		if want := queue + " " + id + " sms:send acme "; !strings.HasPrefix(table[1+i], want) || !strings.Contains(table[1+i], " (in ") ||
			!strings.Contains(table[1+i], " throttled by rule per-hour; back in ") {
			t.Errorf("row %q, want it to start %q, say when and by what", table[1+i], want)
		}
	}
	if got, want := table[3], "queue "+queue+": 2 throttled, 1 failed and waiting to be retried"; got != want {
		t.Errorf("count %q, want %q", got, want)
	}

	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"limit 1", []string{"--limit", "1"}, []string{"QUEUE", ids[0], "queue " + queue + ": 2 throttled (1 listed), 1 failed and waiting to be retried"}},
		{"limit 0", []string{"--limit", "0"}, []string{"queue " + queue + ": 2 throttled (0 listed), 1 failed and waiting to be retried"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := admin(t, "", append([]string{"throttled", "--redis", url, "--queue", queue}, tc.args...)...)
			got := lines(r.stdout)
			if len(got) != len(tc.want) {
				t.Fatalf("stdout has %d lines, want %d:\n%s", len(got), len(tc.want), r.stdout)
			}
			for i, want := range tc.want {
				if !strings.Contains(got[i], want) {
					t.Errorf("line %d is %q, want it to contain %q", i+1, got[i], want)
				}
			}
		})
	}

	// Every queue of the Redis, which other tests share: this one among
	// them.
	r = admin(t, "", "throttled", "--redis", url, "--limit", "0")
	if r.code != 0 || !strings.Contains(r.stdout, "queue "+queue+": 2 throttled (0 listed), 1 failed") {
		t.Errorf("exit status %d, stdout without the queue %s:\n%s", r.code, queue, r.stdout)
	}
}

// checkThrottledJSON checks what "admin throttled --json" says of queue,
// whose retry set holds acme's throttled tasks ids and a failed task.
func checkThrottledJSON(t *testing.T, url, queue string, ids []string) {
	t.Helper()
	r := admin(t, "", "throttled", "--redis", url, "--queue", queue, "--json")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit status %d, stderr %q", r.code, r.stderr)
	}
	var got []retryset.Queue
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not a JSON array of queues: %v\n%s", err, r.stdout)
	}
	if len(got) != 1 {
		t.Fatalf("%d queues, want 1:\n%s", len(got), r.stdout)
	}
	var gotIDs []string
	for _, task := range got[0].Tasks {
		gotIDs = append(gotIDs, task.ID)
		// Places a window apart: an hour, then two.
		if back := time.Until(task.NextProcessAt); back < 50*time.Minute || back > 2*time.Hour+time.Second {
			t.Errorf("task %s back in %v, want an hour or two, at its place in line", task.ID, back)
		}
		if !strings.HasPrefix(task.LastErr, "throttled by rule per-hour; back in ") {
			t.Errorf("task %s: last error %q", task.ID, task.LastErr)
		}
		task.ID, task.NextProcessAt, task.LastErr = "", time.Time{}, ""
		want := retryset.Task{Queue: queue, Type: "sms:send", Tenant: "acme", Throttled: true, By: "rule per-hour", Rule: "per-hour"}
		if diff := cmp.Diff(want, task); diff != "" {
			t.Errorf("task (-want +got):\n%s", diff)
		}
	}
	if diff := cmp.Diff(ids, gotIDs); diff != "" {
		t.Errorf("tasks listed (-want +got), soonest back first:\n%s", diff)
	}
	if got[0].Throttled != 2 || got[0].Failed != 1 {
		t.Errorf("counted %d throttled and %d failed, want 2 and 1", got[0].Throttled, got[0].Failed)
	}
}

// TestThrottledUnknownQueue: a queue that Redis does not know is an error
// naming it, exit status 2.
func TestThrottledUnknownQueue(t *testing.T) {
	t.Parallel()
	r := admin(t, "", "throttled", "--redis", redistest.URL(t), "--queue", "no-such-queue-"+redistest.Prefix(t))
	if got, want := r.code, 2; got != want {
		t.Errorf("exit status = %d, want %d", got, want)
	}
	if want := `admin throttled: --queue "no-such-queue-test-`; !strings.HasPrefix(r.stderr, want) ||
		!strings.Contains(r.stderr, ": no such queue in Redis (") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr = %q, want one line starting %q", r.stderr, want)
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q, want nothing", r.stdout)
	}
}

// TestThrottledEscapes: what Redis holds (a tenant header, a task's error,
// a queue name) reaches the terminal with its control characters quoted.
func TestThrottledEscapes(t *testing.T) {
	t.Parallel()
	const esc = "\x1b]0;pwned\x07\x1b[31m"
	sets := []retryset.Queue{{Queue: "q" + esc, Throttled: 1, Tasks: []retryset.Task{
		{Queue: "q" + esc, ID: "id" + esc, Type: "sms:send", Tenant: "acme" + esc, LastErr: "boom\n" + esc, NextProcessAt: time.Now()},
	}}}
	var out strings.Builder
	if err := printThrottled(&out, sets); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\x07") {
		t.Errorf("the table holds raw escapes:\n%q", out.String())
	}
	if want := strconv.Quote("acme" + esc); !strings.Contains(out.String(), want) {
		t.Errorf("the table does not show the tenant as %s:\n%s", want, out.String())
	}
}
