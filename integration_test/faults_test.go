package integration_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/arrivals"
	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/redisproc"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testneed"
	"github.com/sluicehq/sluice/producer"
)

// The fault tests put a throttled backlog through worker processes, inject
// one fault while it drains, and check afterwards, from the provider's
// side, that every task arrived (exactly once, or again only where the
// fault allows it) and that no window held more than its limit. What they
// measure they log; docs/RELIABILITY.md gives the figures.

// waitFor polls cond until it holds, and fails t when it does not within d.
// what names the wait in the failure. A value on notified polls at once.
func waitFor(t testing.TB, d time.Duration, what string, notified <-chan struct{}, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		select {
		case <-notified:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// queueLeft says what queue still holds, "" when it is empty: every task
// done.
func queueLeft(t *testing.T, rdb redis.UniversalClient, queue string) string {
	t.Helper()
	qi, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(queue)
	if err != nil {
		t.Fatalf("queue %s: %v", queue, err)
	}
	if qi.Pending+qi.Active+qi.Scheduled+qi.Retry+qi.Archived == 0 {
		return ""
	}
	return fmt.Sprintf("%d pending, %d active, %d scheduled, %d retry, %d archived",
		qi.Pending, qi.Active, qi.Scheduled, qi.Retry, qi.Archived)
}

// waitDrained waits until queue is empty, and fails t with what it holds
// when it is not within d.
func waitDrained(t *testing.T, rdb redis.UniversalClient, queue string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := queueLeft(t, rdb, queue)
		if left == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s not empty within %v: %s", queue, d, left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lostFetchBound is how long after a cut of Redis (an outage, a
// partition, a restart, a failover) a test waits for its queue to empty.
// A fetch that Redis ran just as the connection was cut makes the task
// active under a 30 s lease, but its reply never reaches the worker, so no
// worker runs it: asynq gives it back only when its lease has been over
// for 30 s, at its recoverer's next run (each worker's, once a minute).
// So such a task runs again up to 2 min after the cut; it was never sent,
// so it is still delivered once. Without such a loss the queue empties
// within seconds of the cut's end.
const lostFetchBound = 2*time.Minute + 30*time.Second

// waitDrainedAfter waits, as waitDrained, until queue is empty, at most
// lostFetchBound from cut, and logs how long that took from healed, the
// end of the cut.
func waitDrainedAfter(t *testing.T, rdb redis.UniversalClient, queue string, cut, healed time.Time) {
	t.Helper()
	waitDrained(t, rdb, queue, max(lostFetchBound-time.Since(cut), 5*time.Second))
	t.Logf("queue empty %v after the cut ended", time.Since(healed).Round(100*time.Millisecond))
}

// waitServing waits until each of procs is registered as an asynq server
// (its heartbeat names its PID). A worker registers only after its main
// has caught SIGTERM, so a worker stopped before that would die of the
// signal instead of stopping cleanly: a test that may stop a worker it
// has just started waits for this first.
func waitServing(t *testing.T, rdb redis.UniversalClient, procs ...*workerProc) {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	for i, p := range procs {
		waitFor(t, 30*time.Second, fmt.Sprintf("worker %d (PID %d) registered as an asynq server", i, p.cmd.Process.Pid), nil, func() bool {
			servers, err := insp.Servers()
			if err != nil {
				t.Fatal(err)
			}
			return slices.ContainsFunc(servers, func(s *asynq.ServerInfo) bool { return s.PID == p.cmd.Process.Pid })
		})
	}
}

// stopWorkers stops procs with SIGTERM, as an operator would, and fails t
// unless each exits cleanly within 15 s: a worker that crashed during the
// fault has exited already, with an error.
func stopWorkers(t testing.TB, procs ...*workerProc) {
	t.Helper()
	for i, p := range procs {
		select {
		case <-p.done:
			t.Errorf("worker %d had exited before it was stopped: %v", i, p.err)
			continue
		default:
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range procs {
		select {
		case <-p.done:
			if p.err != nil {
				t.Errorf("worker %d stopped by SIGTERM exited with %v", i, p.err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("worker %d did not exit within 15 s of SIGTERM", i)
		}
	}
}

// backlog enqueues perTenant SMS for each tenant on queue, and returns the
// tenant of each task by ID.
func backlog(t *testing.T, rdb redis.UniversalClient, queue string, perTenant int, tenants ...string) map[string]string {
	t.Helper()
	pc := producer.NewClientFromRedisClient(rdb)
	defer pc.Close()
	want := map[string]string{}
	for _, tenant := range tenants {
		for i := range perTenant {
			info, err := pc.EnqueueSMS(context.Background(), tenant, producer.SMS{To: fmt.Sprintf("+1555%07d", i), Body: "fault"}, asynq.Queue(queue))
			if err != nil {
				t.Fatal(err)
			}
			want[info.ID] = tenant
		}
	}
	return want
}

// limits are the rules of a fault test's policies file, a 1 s window each:
// at most tenant a second for each tenant (none when 0) and global for
// all.
type limits struct{ tenant, global int }

func (l limits) policies(t *testing.T) string {
	t.Helper()
	text := "margin: 50ms\ntasks:\n  sms:send:\n"
	if l.tenant > 0 {
		text += fmt.Sprintf("    - { name: tenant, scope: tenant, limit: %d, window: 1s }\n", l.tenant)
	}
	text += fmt.Sprintf("    - { name: provider, scope: global, limit: %d, window: 1s }\n", l.global)
	return writePolicies(t, text)
}

// check fails t unless the provider saw no more than l in any 1 s window
// of rs, per tenant and in all.
func (l limits) check(t *testing.T, rs []receipt) {
	t.Helper()
	byTenant := map[string][]time.Time{}
	var all []time.Time
	for _, r := range rs {
		byTenant[r.Tenant] = append(byTenant[r.Tenant], r.At)
		all = append(all, r.At)
	}
	if l.tenant > 0 {
		for tenant, times := range byTenant {
			if n := arrivals.MaxInWindow(times, time.Second); n > l.tenant {
				t.Errorf("tenant %s: the provider saw %d in one window, limit %d", tenant, n, l.tenant)
			}
		}
	}
	if n := arrivals.MaxInWindow(all, time.Second); n > l.global {
		t.Errorf("the provider saw %d in one window, global limit %d; the window:\n%s", n, l.global, densest(rs, time.Second))
	}
}

// densest lists the receipts of rs in the 1 s window that holds the most,
// one a line, for a failure's message.
func densest(rs []receipt, w time.Duration) string {
	sorted := slices.SortedFunc(slices.Values(rs), func(a, b receipt) int { return a.At.Compare(b.At) })
	best, from := 0, 0
	for i := range sorted {
		n := 0
		for j := i; j < len(sorted) && sorted[j].At.Sub(sorted[i].At) < w; j++ {
			n++
		}
		if n > best {
			best, from = n, i
		}
	}
	var b strings.Builder
	for _, r := range sorted[from : from+best] {
		fmt.Fprintf(&b, "  %s +%v %s %s %s\n", r.At.Format("15:04:05.000"), r.At.Sub(sorted[from].At).Round(time.Millisecond), r.Worker, r.Tenant, r.ID)
	}
	return b.String()
}

// checkDelivered fails t unless the provider accepted every task of want,
// for its tenant, with the task's ID as Idempotency-Key, and nothing else.
// It returns how many requests were repeats of a task already delivered;
// again, unless nil, says which tasks may arrive more than once.
func checkDelivered(t testing.TB, rs []receipt, want map[string]string, again map[string]bool) (repeats int) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range rs {
		tenant, ok := want[r.ID]
		switch {
		case !ok:
			t.Errorf("the provider got unexpected task %s", r.ID)
		case r.Status != http.StatusOK:
			t.Errorf("the provider answered %d to task %s (Idempotency-Key %q)", r.Status, r.ID, r.Key)
		case r.Tenant != tenant:
			t.Errorf("task %s arrived for tenant %q, enqueued for %q", r.ID, r.Tenant, tenant)
		}
		if seen[r.ID] {
			repeats++
			if !again[r.ID] {
				t.Errorf("task %s delivered more than once", r.ID)
			}
		}
		seen[r.ID] = true
	}
	for id := range want {
		if !seen[id] {
			t.Errorf("task %s never reached the provider", id)
		}
	}
	return repeats
}

// cpuTime is the CPU time process pid has used so far, user and system,
// from /proc/PID/stat.
func cpuTime(t testing.TB, pid int) time.Duration {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: utime and stime are the 14th and 15th of the line.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	const clockTicks = 100 // USER_HZ on Linux
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/stat: %v", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// logLines returns the JSON log lines of logs whose message is msg.
func logLines(t *testing.T, logs, msg string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			continue // not a log line
		}
		if line["msg"] == msg {
			lines = append(lines, line)
		}
	}
	return lines
}

// proxied returns rawURL with its host and port replaced by addr.
func proxied(t *testing.T, rawURL, addr string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// startProxy starts a fault proxy in front of the Redis at rawURL, and
// returns it and the URL that goes through it.
func startProxy(t *testing.T, rawURL string) (*faultproxy.Proxy, string) {
	t.Helper()
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Start(opt.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, proxied(t, rawURL, p.Addr())
}

// decisionTimeout is the fault tests' --decision-timeout.
const decisionTimeout = 500 * time.Millisecond

// TestRedisOutage cuts every worker off Redis for 10 s while they drain a
// throttled backlog: Redis refusing connections, or a partition that drops
// every byte, which the workers see only through their timeouts. It checks
// that the workers neither crash nor spin (CPU time during the outage),
// that each decision fails within the decision timeout, that fail-closed
// workers send nothing without a decision and fail-open ones send and log
// each such task, and that after the outage every task is delivered
// exactly once, within the limits when fail-closed.
func TestRedisOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: each case cuts Redis off for 10 s")
	}
	cases := []outageCase{
		{"down, fail-closed", faultproxy.Refuse, false, false},
		{"partitioned, fail-closed", faultproxy.Blackhole, false, false},
		{"partitioned, fail-open", faultproxy.Blackhole, true, false},
		{"down, fair lines", faultproxy.Refuse, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { redisOutage(t, tc) })
	}
}

// outageCase is a case of TestRedisOutage.
type outageCase struct {
	name     string
	mode     faultproxy.Mode
	failOpen bool
	fair     bool // the fair lines: tasks wait parked, not in the workers
}

// outage is how long TestRedisOutage cuts the workers off Redis.
const outage = 10 * time.Second

// redisOutage is a case of TestRedisOutage.
func redisOutage(t *testing.T, tc outageCase) {
	rawURL := redistest.URL(t)
	rdb := redistest.Client(t)
	queue := redistest.Queue(t, rdb)
	proxy, throughProxy := startProxy(t, rawURL)
	sink := newSMSSink(t)
	lim := limits{tenant: 2, global: 3}
	want := backlog(t, rdb, queue, 15, "acme", "globex")
	args := []string{"--redis", throughProxy, "--policies", lim.policies(t), "--sms-webhook", sink.srv.URL,
		"--queues", queue + "=1", "--prefix", redistest.Prefix(t), "--concurrency", "4",
		"--decision-timeout", decisionTimeout.String(), "--log-level", "debug",
		// First come, first served, denied tasks wait in the
		// workers for their places, never in the retry set: so
		// tasks ask the limiter during the outage, when no task
		// can be fetched from Redis. With the fair lines they wait
		// parked, and the dispatch loop meets the outage.
		"--max-hold", "1m", "--metrics-addr", "127.0.0.1:0"}
	if tc.failOpen {
		args = append(args, "--fail-open")
	}
	if !tc.fair {
		args = append(args, "--fairness", "off")
	}
	procs := startWorkers(t, 2, args...)
	addrs := []string{opsAddr(t, procs[0]), opsAddr(t, procs[1])}

	waitFor(t, 20*time.Second, "6 tasks at the provider", sink.notified, func() bool { return len(sink.delivered()) >= 6 })
	cut, healed := cutRedis(t, proxy, tc.mode, procs)

	waitDrainedAfter(t, rdb, queue, cut, healed)
	sums := scrapeAll(t, addrs...)
	stopWorkers(t, procs...)

	rs := sink.receipts()
	checkDelivered(t, rs, want, nil)
	during := sendsDuring(t, rs, cut, healed)
	failedOpen := checkOutageLogs(t, procs, tc.fair, sums)

	if tc.failOpen {
		// Every send without a decision is logged, so no more
		// reached the provider during the outage than were logged.
		if failedOpen == 0 {
			t.Errorf("no task ran without a decision: fail-open tested nothing")
		}
		if during > failedOpen {
			t.Errorf("%d tasks reached the provider during the outage, %d logged as run without a decision", during, failedOpen)
		}
		var times []time.Time
		for _, r := range rs {
			times = append(times, r.At)
		}
		t.Logf("fail-open: %d tasks ran without a decision, %d of them reached the provider after the outage's first second; the most in one 1 s window %d, global limit %d",
			failedOpen, during, arrivals.MaxInWindow(times, time.Second), lim.global)
		return
	}
	if failedOpen > 0 {
		t.Errorf("fail-closed, %d tasks ran without a decision", failedOpen)
	}
	if during > 0 {
		t.Errorf("fail-closed, %d tasks reached the provider during the outage, after its first second", during)
	}
	lim.check(t, rs)
}

// cutRedis sets proxy to mode for the outage, fails t if a worker of procs
// exits or spins meanwhile, and returns when the cut began and ended.
func cutRedis(t *testing.T, proxy *faultproxy.Proxy, mode faultproxy.Mode, procs []*workerProc) (cut, healed time.Time) {
	t.Helper()
	cpu := make([]time.Duration, len(procs))
	for i, p := range procs {
		cpu[i] = cpuTime(t, p.cmd.Process.Pid)
	}
	conns := proxy.Accepted()
	cut = time.Now()
	proxy.Set(mode)
	select {
	case <-procs[0].done:
		t.Fatalf("worker 0 exited during the outage: %v", procs[0].err)
	case <-procs[1].done:
		t.Fatalf("worker 1 exited during the outage: %v", procs[1].err)
	case <-time.After(outage):
	}
	for i, p := range procs {
		used := cpuTime(t, p.cmd.Process.Pid) - cpu[i]
		t.Logf("worker %d: %v of CPU in the %v outage", i, used, outage)
		// A worker that spins on errors burns a core; one that
		// waits uses a few percent.
		if used > outage/4 {
			t.Errorf("worker %d used %v of CPU in the %v outage: it spins", i, used, outage)
		}
	}
	conns = proxy.Accepted() - conns
	healed = time.Now()
	proxy.Set(faultproxy.Pass)
	t.Logf("%d connections opened to Redis during the outage by both workers", conns)
	return cut, healed
}

// sendsDuring returns how many of rs arrived during the cut, after its
// first second, and logs when the first after it arrived.
func sendsDuring(t *testing.T, rs []receipt, cut, healed time.Time) (during int) {
	t.Helper()
	firstAfter := -1
	for i, r := range rs {
		if r.At.After(cut.Add(time.Second)) && r.At.Before(healed) {
			during++
		}
		if firstAfter < 0 && r.At.After(healed) {
			firstAfter = i
		}
	}
	if firstAfter >= 0 {
		t.Logf("the first task after the outage reached the provider %v after it ended", rs[firstAfter].At.Sub(healed).Round(time.Millisecond))
	}
	return during
}

// checkOutageLogs checks what procs logged of the outage, each decision
// failed within the decision timeout, and that sums, the metrics, count
// the same; it returns how many tasks ran without a decision.
func checkOutageLogs(t *testing.T, procs []*workerProc, fair bool, sums metricSums) (failedOpen int) {
	t.Helper()
	var undecided []map[string]any
	for _, p := range procs {
		undecided = append(undecided, logLines(t, p.logs.String(), "limiter did not decide")...)
		failedOpen += len(logLines(t, p.logs.String(), "limiter unavailable; running the task without a decision (fail-open)"))
	}
	if fair {
		var failed int
		for _, p := range procs {
			failed += len(logLines(t, p.logs.String(), "could not dispatch the fair lines"))
		}
		t.Logf("the dispatch loops failed %d times during the outage", failed)
		if failed == 0 {
			t.Errorf("no dispatch of the fair lines failed during the outage: the outage tested nothing")
		}
	} else if len(undecided) == 0 {
		t.Errorf("no decision failed during the outage: the outage tested nothing")
	}
	var slowest time.Duration
	for _, line := range undecided {
		// The worker logs durations as text ("1.2s").
		text, _ := line["latency"].(string)
		latency, err := time.ParseDuration(text)
		if err != nil {
			t.Fatalf("a failed decision's latency %#v is not a duration: %v", line["latency"], err)
		}
		slowest = max(slowest, latency)
		if latency > decisionTimeout+time.Second {
			t.Errorf("a decision failed after %v, with a decision timeout of %v: %v", latency, decisionTimeout, line["err"])
		}
	}
	t.Logf("%d decisions failed during the outage, the slowest after %v (decision timeout %v)", len(undecided), slowest, decisionTimeout)
	// The metrics count what the logs say.
	if got, want := sums["sluice_limiter_errors_total{task_type=sms:send}"], float64(len(undecided)); got != want {
		t.Errorf("sluice_limiter_errors_total = %v, want %v, the decisions logged as failed", got, want)
	}
	if got, want := sums["sluice_fail_open_admissions_total{task_type=sms:send}"], float64(failedOpen); got != want {
		t.Errorf("sluice_fail_open_admissions_total = %v, want %v, the tasks logged as run without a decision", got, want)
	}
	return failedOpen
}

// TestPartitionedWorker cuts one of three workers off Redis for 10 s, a
// partition that drops every byte, while the others go on: the partitioned
// worker admits nothing (it sends nothing after the first second of the
// partition), the others keep delivering within the limits, and after the
// partition every task has been delivered exactly once. It runs first
// come, first served, where the tasks wait in the workers (--max-hold), so
// the cut one asks the limiter during the partition, and with the fair
// lines, where the tasks wait parked in the retry set and the cut one's
// dispatch loop asks Redis for grants during the partition.
func TestPartitionedWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the partition lasts 10 s")
	}
	cases := []struct {
		name  string
		args  []string
		tried string // what the cut worker logs of each call that fails during the partition
	}{
		{"first come, first served", []string{"--max-hold", "1m", "--fairness", "off"}, "limiter did not decide"},
		{"fair lines", []string{"--fairness", "on"}, "could not dispatch the fair lines"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { partitionedWorker(t, tc.args, tc.tried) })
	}
}

// partitionedWorker is TestPartitionedWorker with the workers' extra args;
// tried is the message the cut worker logs of a call to Redis that failed.
func partitionedWorker(t *testing.T, extra []string, tried string) {
	const partition = 10 * time.Second
	rawURL := redistest.URL(t)
	rdb := redistest.Client(t)
	queue := redistest.Queue(t, rdb)
	proxy, throughProxy := startProxy(t, rawURL)
	sink := newSMSSink(t)
	lim := limits{tenant: 2, global: 4}
	want := backlog(t, rdb, queue, 30, "acme", "globex")
	policies, prefix := lim.policies(t), redistest.Prefix(t) // the workers must share them
	args := func(name, url string) []string {
		return append([]string{"--redis", url, "--policies", policies, "--sms-webhook", sink.url(name),
			"--queues", queue + "=1", "--prefix", prefix, "--concurrency", "4",
			"--decision-timeout", decisionTimeout.String(), "--log-level", "debug"}, extra...)
	}
	procs := append(startWorkers(t, 1, args("cut", throughProxy)...), startWorkers(t, 2, args("other", rawURL)...)...)

	waitFor(t, 20*time.Second, "6 tasks at the provider", sink.notified, func() bool { return len(sink.delivered()) >= 6 })
	cut := time.Now()
	proxy.Set(faultproxy.Blackhole)
	select {
	case <-procs[0].done:
		t.Fatalf("the partitioned worker exited: %v", procs[0].err)
	case <-time.After(partition):
	}
	healed := time.Now()
	proxy.Set(faultproxy.Pass)

	waitDrainedAfter(t, rdb, queue, cut, healed)
	stopWorkers(t, procs...)

	rs := sink.receipts()
	checkDelivered(t, rs, want, nil)
	lim.check(t, rs)
	sent := map[string]int{} // during the partition, after its first second, by worker
	for _, r := range rs {
		if r.At.After(cut.Add(time.Second)) && r.At.Before(healed) {
			sent[r.Worker]++
		}
	}
	if n := sent["cut"]; n > 0 {
		t.Errorf("the partitioned worker sent %d tasks during the partition", n)
	}
	if sent["other"] == 0 {
		t.Errorf("the other workers sent nothing during the partition")
	}
	failed := logLines(t, procs[0].logs.String(), tried)
	if len(failed) == 0 {
		t.Errorf("the partitioned worker logged no %q: it asked Redis nothing during the partition, which tested nothing", tried)
	}
	t.Logf("during the %v partition: the other workers sent %d tasks, the partitioned one none and logged %d of %q",
		partition, sent["other"], len(failed), tried)
}

// TestWorkerKilledMidTask kills a worker process with SIGKILL while its
// sends are in flight (the provider holds each request 300 ms), and checks
// that every task is delivered, that the tasks whose sends were in flight
// at the kill reach the provider again, with the Idempotency-Key of their
// first delivery, and that no other task does. It runs twice: with limits
// that do not bind, and with a provider limit that does, so that at the
// kill most tasks wait in the fair lines (parked in the retry set, or held
// by a worker for their place) and the killed worker's grants and line
// entries are left behind; there the provider's windows are checked too.
//
// asynq gives a killed worker's tasks back only when their lease has
// expired, and its timings are fixed (asynq v0.26, none in asynq.Config):
// a lease lasts 30 s (rdb.LeaseDuration) and is extended every 5 s, and the
// recoverer takes only leases expired 30 s ago or more, when a server
// starts and then once a minute. The worker retries a recovered task at
// once (worker.RetryDelay), so recovery takes 55 to 60 s after the kill
// with a new worker started once the leases qualify.
func TestWorkerKilledMidTask(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: asynq recovers a killed worker's tasks only 55-60 s after the kill (fixed in asynq v0.26)")
	}
	cases := []struct {
		name string
		lim  limits
	}{
		// Limits high enough not to bind: the fault here is the kill.
		{"limits not binding", limits{global: 1000}},
		// 60 tasks at 5 a second: most wait in the lines at the kill.
		{"tasks waiting in the lines", limits{tenant: 3, global: 5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { workerKilledMidTask(t, tc.lim) })
	}
}

// workerKilledMidTask is TestWorkerKilledMidTask under the limits lim; the
// provider's windows are checked when lim binds (under 60 a second).
func workerKilledMidTask(t *testing.T, lim limits) {
	rawURL := redistest.URL(t)
	rdb := redistest.Client(t)
	queue := redistest.Queue(t, rdb)
	sink := newSlowSMSSink(t, 300*time.Millisecond)
	policies, prefix := lim.policies(t), redistest.Prefix(t)
	args := func(name string) []string {
		return []string{"--redis", rawURL, "--policies", policies, "--sms-webhook", sink.url(name),
			"--queues", queue + "=1", "--prefix", prefix, "--concurrency", "4", "--log-level", "warn"}
	}
	want := backlog(t, rdb, queue, 30, "acme", "globex")
	binding := lim.global < len(want)
	victim := startWorkers(t, 1, args("victim")...)[0]
	others := startWorkers(t, 1, args("other")...)

	killed, midSend := killVictim(t, sink, victim)
	inFlight := tasksAtKill(t, rdb, queue, binding, len(midSend))

	// Let the leases of the victim's tasks qualify for the recoverer, then
	// start a worker, whose recoverer runs at once: without it, the one of
	// the running worker may come up to a minute later.
	leases := "asynq:{" + queue + "}:lease"
	waitFor(t, 70*time.Second, "the killed worker's leases to expire 30 s ago", nil, func() bool {
		last, err := rdb.ZRevRangeWithScores(context.Background(), leases, 0, 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(last) == 0 || time.Unix(int64(last[0].Score), 0).Before(time.Now().Add(-31*time.Second))
	})
	others = append(others, startWorkers(t, 1, args("other")...)...)
	waitServing(t, rdb, others...)
	waitDrained(t, rdb, queue, 30*time.Second)
	recovered := time.Since(killed)
	stopWorkers(t, others...)

	rs := sink.receipts()
	repeats := checkDelivered(t, rs, want, inFlight)
	if binding {
		lim.check(t, rs)
	}
	for id := range midSend {
		if n := sink.delivered()[id]; n < 2 {
			t.Errorf("task %s, mid-send at the kill, reached the provider %d times, want again", id, n)
		}
	}
	t.Logf("SIGKILL with %d tasks active, %d mid-send: %d reached the provider again, with the same Idempotency-Key; all %d tasks done %v after the kill",
		len(inFlight), len(midSend), repeats, len(want), recovered.Round(100*time.Millisecond))
}

// killVictim kills victim with SIGKILL once it is sending: it has sends in
// flight, as the provider holds each for 300 ms. It returns when, and the
// tasks the victim was sending.
func killVictim(t *testing.T, sink *smsSink, victim *workerProc) (killed time.Time, midSend map[string]bool) {
	t.Helper()
	waitFor(t, 20*time.Second, "4 sends of the victim at the provider", sink.notified, func() bool {
		n := 0
		for _, r := range sink.receipts() {
			if r.Worker == "victim" {
				n++
			}
		}
		return n >= 4
	})
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.done
	killed = time.Now()
	// The victim's requests the sink was holding were cut mid-send: the
	// victim never saw them answered, so asynq must run them again.
	midSend = map[string]bool{}
	waitFor(t, 5*time.Second, "the provider to see the victim's connections close", nil, func() bool {
		for _, r := range sink.receipts() {
			if r.Worker == "victim" && r.Cut {
				midSend[r.ID] = true
			}
		}
		return len(midSend) > 0
	})
	return killed, midSend
}

// tasksAtKill returns the tasks active in queue just after the kill, and
// fails t if the limits bind but no task is parked in the retry set.
// midSend is how many of the victim's were mid-send.
func tasksAtKill(t *testing.T, rdb *redis.Client, queue string, binding bool, midSend int) (inFlight map[string]bool) {
	t.Helper()
	// Once the victim has exited nothing it held changes, so every task it
	// held is still active now; so may be a few of the other worker's.
	active, err := asynq.NewInspectorFromRedisClient(rdb).ListActiveTasks(queue, asynq.PageSize(100))
	if err != nil {
		t.Fatal(err)
	}
	inFlight = map[string]bool{}
	for _, a := range active {
		inFlight[a.ID] = true
	}
	qi, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(queue)
	if err != nil {
		t.Fatal(err)
	}
	if binding && qi.Retry == 0 {
		t.Fatalf("at the kill no task was parked in the retry set (%d pending, %d active): the lines held nothing, which tested nothing",
			qi.Pending, qi.Active)
	}
	t.Logf("at the kill: %d tasks active, %d of the victim's mid-send, %d parked, %d pending",
		len(active), midSend, qi.Retry, qi.Pending)
	return inFlight
}

// TestRedisRestartKeepsTasks stops Redis (SHUTDOWN, which with AOF flushes
// the log) while workers drain a throttled backlog, some of it waiting in
// the retry set, starts it again on the same port and directory, and
// checks that the workers, which reconnect, deliver every task exactly
// once, within the limits as the provider saw them.
func TestRedisRestartKeepsTasks(t *testing.T) {
	bin := os.Getenv("REDIS_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	if _, err := exec.LookPath(bin); err != nil {
		testneed.Missing(t, "no redis-server: %v", err)
	}
	dir := t.TempDir()
	persist := []string{"--appendonly", "yes", "--appendfsync", "always", "--dir", dir}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := redisproc.Start(ctx, bin, persist...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })

	sink := newSMSSink(t)
	lim := limits{tenant: 2, global: 3}
	queue := "restart"
	want := backlog(t, rdb, queue, 15, "acme", "globex")
	// A task denied for longer than --max-hold (2 s) goes back through the
	// retry set, which must outlive the restart.
	procs := startWorkers(t, 2, "--redis", srv.URL(), "--policies", lim.policies(t), "--sms-webhook", sink.srv.URL,
		"--queues", queue+"=1", "--concurrency", "4", "--log-level", "warn")

	waitFor(t, 20*time.Second, "6 tasks at the provider", sink.notified, func() bool { return len(sink.delivered()) >= 6 })
	qi, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(queue)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before the restart: %d delivered, %d pending, %d active, %d in the retry set",
		len(sink.delivered()), qi.Pending, qi.Active, qi.Retry)
	if qi.Retry == 0 {
		t.Errorf("no task in the retry set before the restart: the restart tests nothing throttled")
	}

	// SHUTDOWN makes Redis write its AOF and exit; the client's call fails
	// as the connection closes.
	_ = rdb.Shutdown(ctx).Err()
	waitFor(t, 10*time.Second, "Redis to stop", nil, func() bool {
		c, err := net.DialTimeout("tcp", srv.Addr, 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return false
		}
		return true
	})
	down := time.Now()
	time.Sleep(2 * time.Second) // the outage the workers see
	_, port, _ := net.SplitHostPort(srv.Addr)
	restarted := exec.Command(bin, append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "",
		"--logfile", filepath.Join(dir, "redis-restarted.log")}, persist...)...)
	if err := restarted.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = restarted.Wait(); close(exited) }()
	t.Cleanup(func() { _ = restarted.Process.Kill(); <-exited })
	waitFor(t, 10*time.Second, "Redis to answer after the restart", nil, func() bool {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "redis-restarted.log"))
			t.Fatalf("restarted redis-server exited:\n%s", log)
		default:
		}
		return rdb.Ping(ctx).Err() == nil
	})
	up := time.Now()
	t.Logf("Redis down for %v", up.Sub(down).Round(10*time.Millisecond))

	waitDrainedAfter(t, rdb, queue, down, up)
	stopWorkers(t, procs...)
	rs := sink.receipts()
	checkDelivered(t, rs, want, nil)
	lim.check(t, rs)
}
