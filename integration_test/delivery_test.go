package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/arrivals"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/syncbuf"
	"github.com/sluicehq/sluice/producer"
)

// TestMain runs the tests, stops what redistest started, and removes the
// commands the tests built (binDirs): a run would otherwise leave about
// 50 MB of binaries in the temporary directory. A directory it cannot
// remove fails the run.
func TestMain(m *testing.M) {
	code := redistest.Main(m)
	if err := binDirs.removeAll(); err != nil {
		fmt.Fprintln(os.Stderr, "integration_test:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// receipt is one POST the recording provider received, recorded on
// arrival.
type receipt struct {
	ID, Tenant, To string
	Key            string // the Idempotency-Key header
	Worker         string // the URL's path without its "/": workers given sink.url("w1") send "w1"
	At             time.Time
	Status         int
	Cut            bool // the worker went away before the answer
}

// smsSink is an SMS provider webhook that records every request. It answers
// 429 (Retry-After: 1) to the first request for tenant throttledTenant, and
// 400 to the number rejectedNumber or a request whose Idempotency-Key is not
// the task's ID, and holds each request for hold before
// it answers.
type smsSink struct {
	mu       sync.Mutex
	got      []receipt
	said429  bool
	hold     time.Duration
	srv      *httptest.Server
	notified chan struct{}
}

const (
	throttledTenant = "busy"
	rejectedNumber  = "+15550000400"
)

func newSMSSink(t testing.TB) *smsSink { return newSlowSMSSink(t, 0) }

// newSlowSMSSink returns a sink that holds each request for hold before it
// answers: a worker killed meanwhile has sends in flight.
func newSlowSMSSink(t testing.TB, hold time.Duration) *smsSink {
	s := &smsSink{notified: make(chan struct{}, 1), hold: hold}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ ID, Tenant, To, Body string }
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &body); err != nil || body.ID == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		rec := receipt{ID: body.ID, Tenant: body.Tenant, To: body.To, Key: r.Header.Get("Idempotency-Key"),
			Worker: strings.TrimPrefix(r.URL.Path, "/"), At: time.Now(), Status: http.StatusOK}
		s.mu.Lock()
		switch {
		case rec.Key != rec.ID:
			rec.Status = http.StatusBadRequest
		case body.To == rejectedNumber:
			rec.Status = http.StatusBadRequest
		case body.Tenant == throttledTenant && !s.said429:
			s.said429 = true
			rec.Status = http.StatusTooManyRequests
		}
		s.got = append(s.got, rec)
		i := len(s.got) - 1
		s.mu.Unlock()
		select {
		case s.notified <- struct{}{}:
		default:
		}
		select {
		case <-time.After(s.hold):
		case <-r.Context().Done(): // the worker went away
			s.mu.Lock()
			s.got[i].Cut = true
			s.mu.Unlock()
			return
		}
		switch rec.Status {
		case http.StatusTooManyRequests:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", rec.Status)
		case http.StatusBadRequest:
			http.Error(w, "number not in service", rec.Status)
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *smsSink) receipts() []receipt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// url is the webhook URL to give a worker whose sends are to be recorded
// as from name.
func (s *smsSink) url(name string) string { return s.srv.URL + "/" + name }

// delivered returns how many requests the sink received for each task ID.
func (s *smsSink) delivered() map[string]int {
	got := map[string]int{}
	for _, r := range s.receipts() {
		got[r.ID]++
	}
	return got
}

// workerProc is one worker process.
type workerProc struct {
	cmd  *exec.Cmd
	logs *syncbuf.Buffer // what it wrote to stdout and stderr
	done chan struct{}   // closed when the process has exited
	err  error           // its exit status, once done
}

// startWorkers starts n worker processes with args. The tests send SMS
// only: a worker whose args choose no email provider logs email
// (--email-log), since a worker without one does not start.
func startWorkers(t testing.TB, n int, args ...string) []*workerProc {
	t.Helper()
	bin, err := buildWorker()
	if err != nil {
		t.Fatal(err)
	}
	return startWorkersOf(t, bin, n, args...)
}

// startWorkersOf starts n processes of the worker binary bin, as
// startWorkers does.
func startWorkersOf(t testing.TB, bin string, n int, args ...string) []*workerProc {
	t.Helper()
	if !slices.Contains(args, "--email-log") && !slices.Contains(args, "--smtp-addr") {
		args = append(slices.Clip(args), "--email-log")
	}
	procs := make([]*workerProc, n)
	for i := range procs {
		p := &workerProc{logs: &syncbuf.Buffer{}, done: make(chan struct{})}
		p.cmd = exec.Command(bin, args...)
		p.cmd.Env = os.Environ()
		p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.err = p.cmd.Wait(); close(p.done) }()
		procs[i] = p
		t.Cleanup(func() {
			// SIGTERM first: a worker that stops cleanly leaves asynq's
			// list of servers, where a killed one stays 10 s and makes the
			// next test's workers on its queues refuse to start.
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.done
			}
			if t.Failed() {
				t.Logf("worker %d logs:\n%s", i, p.logs)
			}
		})
	}
	return procs
}

func writePolicies(t testing.TB, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDeliveryThroughThrottledWorkers(t *testing.T) {
	url := redistest.URL(t)
	rdb := redistest.Client(t)
	sink := newSMSSink(t)
	queue := "it-" + strings.TrimSuffix(redistest.Prefix(t), ":")
	prefix := redistest.Prefix(t)
	const window = time.Second
	// The margin is set, although 50 ms is the default, because the check
	// of the windows depends on it: the tests run beside others on a small,
	// busy machine, where the time from admission to arrival at the
	// provider spreads more than on a worker of its own.
	policies := writePolicies(t, `
margin: 50ms
tasks:
  sms:send:
    - name: tenant-per-second
      scope: tenant
      limit: 4
      window: 1s
      tenants:
        big: { limit: 8 }
    - name: provider
      scope: global
      limit: 10
      window: 1s
`)
	procs := startWorkers(t, 3, "--redis", url, "--policies", policies, "--sms-webhook", sink.srv.URL,
		"--queues", queue+"=1", "--prefix", prefix, "--concurrency", "8", "--log-level", "debug")

	tasks := enqueueDeliveryTasks(t, rdb, queue)
	start := time.Now()

	// Midway, SIGTERM one worker: it finishes what it runs and exits;
	// nothing it held may be lost.
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	terminated := waitDeliveredStoppingOne(t, sink, procs[0], len(tasks.want))
	elapsed := time.Since(start)
	if terminated {
		select {
		case <-procs[0].done:
			if procs[0].err != nil {
				t.Errorf("worker stopped by SIGTERM exited with %v\n%s", procs[0].err, procs[0].logs)
			}
		case <-time.After(40 * time.Second):
			t.Errorf("worker did not exit within 40 s of SIGTERM")
		}
	}

	got := sink.deliveredOK()
	for id, n := range got {
		if _, ok := tasks.want[id]; !ok {
			t.Errorf("provider got unexpected task %s", id)
		}
		if n != 1 {
			t.Errorf("task %s delivered %d times", id, n)
		}
	}

	checkDeliveryWindows(t, sink, window)
	checkRetryAfterHonoured(t, sink)

	// Permanent failures are archived with the provider's message, and the
	// throttled MaxRetry(0) tasks were not. The workers still run: a task
	// to archive may wait in its line behind the last one delivered.
	waitArchived(t, inspector, queue, tasks.rejected, "number not in service")
	waitArchived(t, inspector, queue, tasks.malformed, "to")
	archived, err := inspector.ListArchivedTasks(queue, asynq.PageSize(100))
	if err != nil {
		t.Fatal(err)
	}
	if len(archived) != 2 {
		t.Errorf("%d archived tasks, want 2 (the rejected number and the malformed payload)", len(archived))
	}
	stopRest(t, procs, terminated)
	checkHistory(t, len(got), procs...)

	t.Logf("delivered %d tasks in %v, with a provider hold of 1 s and a worker stopped midway (TestBacklogDrain measures utilization)",
		len(tasks.want), elapsed.Round(10*time.Millisecond))
}

// deliveryTasks are the tasks TestDeliveryThroughThrottledWorkers enqueues.
type deliveryTasks struct {
	want      map[string]string // task ID -> tenant, tasks that must be delivered
	rejected  string            // the ID of the task to rejectedNumber
	malformed string            // the ID of the task whose payload is malformed
}

// enqueueDeliveryTasks enqueues on queue the SMS of four tenants, half of
// them with MaxRetry(0), one to rejectedNumber and one malformed.
func enqueueDeliveryTasks(t *testing.T, rdb *redis.Client, queue string) deliveryTasks {
	t.Helper()
	ctx := context.Background()
	pc := producer.NewClientFromRedisClient(rdb)
	defer pc.Close()
	tasks := deliveryTasks{want: map[string]string{}}
	enqueue := func(tenant, to string, opts ...asynq.Option) string {
		t.Helper()
		info, err := pc.EnqueueSMS(ctx, tenant, producer.SMS{To: to, Body: "hello " + tenant}, append(opts, asynq.Queue(queue))...)
		if err != nil {
			t.Fatal(err)
		}
		return info.ID
	}
	counts := map[string]int{"acme": 30, "big": 40, "small": 15, throttledTenant: 3}
	for tenant, n := range counts {
		for i := range n {
			var opts []asynq.Option
			if i%2 == 0 {
				opts = append(opts, asynq.MaxRetry(0)) // throttled, never archived
			}
			tasks.want[enqueue(tenant, fmt.Sprintf("+1555%07d", i), opts...)] = tenant
		}
	}
	tasks.rejected = enqueue("acme", rejectedNumber)
	malformed, err := asynq.NewClientFromRedisClient(rdb).Enqueue(
		asynq.NewTaskWithHeaders(producer.TypeSMS, []byte(`{"to": 5}`), map[string]string{producer.HeaderTenant: "acme"}),
		asynq.Queue(queue))
	if err != nil {
		t.Fatal(err)
	}
	tasks.malformed = malformed.ID
	return tasks
}

// deliveredOK returns how many requests the sink answered 200 for each
// task ID.
func (s *smsSink) deliveredOK() map[string]int {
	got := map[string]int{}
	for _, r := range s.receipts() {
		if r.Status == http.StatusOK {
			got[r.ID]++
		}
	}
	return got
}

// waitDeliveredStoppingOne waits up to 90 s for the sink to answer 200 to
// n tasks, sending SIGTERM to p once a third are; it reports whether it did.
func waitDeliveredStoppingOne(t *testing.T, sink *smsSink, p *workerProc, n int) bool {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	terminated := false
	for len(sink.deliveredOK()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s the provider has %d of %d tasks", len(sink.deliveredOK()), n)
		}
		if !terminated && len(sink.deliveredOK()) >= n/3 {
			terminated = true
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-sink.notified:
		case <-time.After(time.Second):
		}
	}
	return terminated
}

// checkDeliveryWindows checks that no window was exceeded, per tenant and
// overall, as the provider saw it.
func checkDeliveryWindows(t *testing.T, sink *smsSink, window time.Duration) {
	t.Helper()
	byTenant := map[string][]time.Time{}
	var all []time.Time
	for _, r := range sink.receipts() {
		if r.Status == http.StatusOK || r.Status == http.StatusTooManyRequests || r.Status == http.StatusBadRequest {
			byTenant[r.Tenant] = append(byTenant[r.Tenant], r.At)
			all = append(all, r.At)
		}
	}
	limits := map[string]int{"acme": 4, "big": 8, "small": 4, throttledTenant: 4}
	for tenant, times := range byTenant {
		if got := arrivals.MaxInWindow(times, window); got > limits[tenant] {
			t.Errorf("tenant %s: provider saw %d in one window, limit %d", tenant, got, limits[tenant])
		}
	}
	if got := arrivals.MaxInWindow(all, window); got > 10 {
		t.Errorf("provider saw %d in one window, global limit 10", got)
	}
}

// checkRetryAfterHonoured checks that the 429 was honoured: the retry of
// that task came at least 1 s later.
func checkRetryAfterHonoured(t *testing.T, sink *smsSink) {
	t.Helper()
	var first429 receipt
	for _, r := range sink.receipts() {
		if r.Status == http.StatusTooManyRequests {
			first429 = r
		}
	}
	if first429.ID == "" {
		t.Errorf("the provider never answered 429")
		return
	}
	// And it held back every worker's SMS: a worker reads a hold at most
	// 250 ms late, and a send admitted before that may still arrive, a
	// little later on a loaded machine. Without the hold, the other
	// tenants' tasks go on at 10/s.
	quiet := first429.At.Add(500 * time.Millisecond)
	for _, r := range sink.receipts() {
		if r.At.After(quiet) && r.At.Before(first429.At.Add(time.Second)) {
			t.Errorf("task %s (%s) reached the provider %v after its 429 with Retry-After: 1",
				r.ID, r.Tenant, r.At.Sub(first429.At))
		}
	}
	for _, r := range sink.receipts() {
		if r.ID == first429.ID && r.Status == http.StatusOK && r.At.Sub(first429.At) < time.Second {
			t.Errorf("task %s came back %v after a 429 with Retry-After: 1", r.ID, r.At.Sub(first429.At))
		}
	}
}

// waitArchived waits up to 20 s for task id of queue to be archived with a
// last error that mentions wantMsg.
func waitArchived(t *testing.T, inspector *asynq.Inspector, queue, id, wantMsg string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := inspector.GetTaskInfo(queue, id)
		if err == nil && info.State == asynq.TaskStateArchived {
			if !strings.Contains(info.LastErr, wantMsg) {
				t.Errorf("archived task %s: last error %q, want it to mention %q", id, info.LastErr, wantMsg)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("task %s not archived: %+v, %v", id, info, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBacklogDrain drains a backlog of three tenants through three worker
// processes, with nothing else going on, and reports how close the
// provider's intake stayed to the binding limit: the global 10/s, as the
// tenants' quotas add up to 15/s.
func TestBacklogDrain(t *testing.T) {
	url := redistest.URL(t)
	rdb := redistest.Client(t)
	sink := newSMSSink(t)
	queue := "it-" + strings.TrimSuffix(redistest.Prefix(t), ":")
	prefix := redistest.Prefix(t)
	const (
		window = time.Second
		margin = 50 * time.Millisecond // as in TestDeliveryThroughThrottledWorkers
		global = 10
		perTen = 5
		tasks  = 150
	)
	policies := writePolicies(t, fmt.Sprintf(`
margin: %v
tasks:
  sms:send:
    - { name: tenant, scope: tenant, limit: %d, window: 1s }
    - { name: provider, scope: global, limit: %d, window: 1s }
`, margin, perTen, global))
	startWorkers(t, 3, "--redis", url, "--policies", policies, "--sms-webhook", sink.srv.URL,
		"--queues", queue+"=1", "--prefix", prefix, "--concurrency", "10", "--log-level", "warn")

	ctx := context.Background()
	pc := producer.NewClientFromRedisClient(rdb)
	defer pc.Close()
	tenants := []string{"t1", "t2", "t3"}
	for i := range tasks {
		tenant := tenants[i%len(tenants)]
		if _, err := pc.EnqueueSMS(ctx, tenant, producer.SMS{To: fmt.Sprintf("+1555%07d", i), Body: "drain"}, asynq.Queue(queue)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(sink.receipts()) < tasks {
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s the provider has %d of %d tasks", len(sink.receipts()), tasks)
		}
		select {
		case <-sink.notified:
		case <-time.After(time.Second):
		}
	}

	receipts := sink.receipts()
	seen := map[string]bool{}
	byTenant := map[string][]time.Time{}
	var all []time.Time
	for _, r := range receipts {
		if seen[r.ID] {
			t.Errorf("task %s delivered twice", r.ID)
		}
		seen[r.ID] = true
		byTenant[r.Tenant] = append(byTenant[r.Tenant], r.At)
		all = append(all, r.At)
	}
	for tenant, times := range byTenant {
		if got := arrivals.MaxInWindow(times, window); got > perTen {
			t.Errorf("tenant %s: provider saw %d in one window, limit %d", tenant, got, perTen)
		}
	}
	if got := arrivals.MaxInWindow(all, window); got > global {
		t.Errorf("provider saw %d in one window, global limit %d", got, global)
	}
	// At exactly the limit, the first window takes global tasks at once and
	// each later window global more: the last arrives (tasks-global)/global
	// windows after the first.
	span := all[len(all)-1].Sub(all[0])
	ideal := time.Duration(float64(tasks-global) / global * float64(window))
	t.Logf("drained %d tasks in %v from first to last arrival; ideal at %d/s: %v; utilization %.3f (the %v margin caps it at %.3f)",
		tasks, span.Round(time.Millisecond), global, ideal, float64(ideal)/float64(span), margin, float64(window)/float64(window+margin))
}
