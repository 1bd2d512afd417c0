package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/arrivals"
	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/producer"
)

// TestFairBoundsThroughCLIs drains a backlog of 800 SMS of one tenant
// through two worker processes (tenant and provider rules of 50 a second,
// the default margin), while newcomers (a tenant's first 3 SMS) and urgent
// SMS (the backlog's tenant at priority 1) are enqueued with cmd/enqueue
// at random times, about one every 0.7 s, the first as 600 of the backlog
// are put on asynq's pending list by a producer that does not park (the
// visitors are parked at enqueue). Every newcomer's first send and
// every urgent send must reach the provider within the bound of
// docs/FAIRNESS.md, slot interval + fetch interval + 100 ms (21 + 100 +
// 100 ms), counted from its enqueue's return, and behind no more of
// the backlog's sends than fit in that time: one miss fails. It runs on a
// single Redis and on a three-master cluster, one after the other and
// beside no other test (not parallel), so that the machine's other work
// does not stretch the waits it counts.
func TestFairBoundsThroughCLIs(t *testing.T) {
	if testing.Short() {
		t.Skip("a drain of 20 s a backend")
	}
	t.Run("single", func(t *testing.T) {
		fairBounds(t, redistest.URL(t), redistest.Client(t), 1)
	})
	t.Run("cluster", func(t *testing.T) {
		fairBounds(t, "redis+cluster://"+redistest.ClusterAddrs(t)[0], redistest.Cluster(t), 1)
	})
	t.Run("cluster, three shards", func(t *testing.T) {
		fairBounds(t, "redis+cluster://"+redistest.ClusterAddrs(t)[0], redistest.Cluster(t), 3)
	})
}

// visitor is a newcomer or an urgent task, enqueued during the drain.
type visitor struct {
	id    string        // its task's ID, or with "-<n>" after it its tasks'
	at    time.Time     // when it returned, its tasks in Redis
	bound time.Duration // its first send's bound
}

// owns reports whether task id is one of v's.
func (v visitor) owns(id string) bool { return id == v.id || strings.HasPrefix(id, v.id+"-") }

// boundsDrain is what fairDrain saw: the provider's receipts in order of
// arrival, the visitors, and each send's time from admission to arrival.
type boundsDrain struct {
	rs       []receipt
	visitors []visitor
	total    int
	delays   []time.Duration // sorted
	late     map[string]bool // tasks that reached the provider later than the margin after admission
	admitted []time.Time     // the provider rule's admissions, as its log recorded them
	missing  int             // sends whose admission was not read
}

// The drain's rules: 50 a second of each tenant and of the provider, the
// policies' default margin, the worker's default fetch interval.
const (
	boundsLimit   = 50
	boundsBacklog = 800
	// boundsLate of the backlog are put on the pending list once the
	// first window is sent, just before the first visitor.
	boundsLate   = 600
	boundsMargin = 50 * time.Millisecond
	boundsFetch  = 100 * time.Millisecond
	boundsSlot   = (time.Second + boundsMargin) / boundsLimit
	// The newcomer's and the urgent task's bound of docs/FAIRNESS.md.
	boundsBound = boundsSlot + boundsFetch + 100*time.Millisecond
	// With shards, a newcomer outside the backlog's shard whose shard
	// used its floor within the window waits for a balancer step to see
	// it and the next to move what the backlog's shard stopped using
	// (docs/SCALING.md, "Bounds across shards").
	boundsAcross = boundsBound + 2*100*time.Millisecond
)

// boundsQueues are where fairDrain's tasks go: one queue of the test's
// own, or with shards (on a cluster) each tenant's shard's queue.
type boundsQueues struct {
	queue string
	lay   layout.Layout
}

// of returns the queue of tenant's SMS.
func (q boundsQueues) of(tenant string) string {
	if q.lay.Shards > 1 {
		return q.lay.Queue("sms:send", tenant)
	}
	return q.queue
}

// all returns every queue of the drain.
func (q boundsQueues) all() []string {
	if q.lay.Shards > 1 {
		return q.lay.TypeQueues("sms:send")
	}
	return []string{q.queue}
}

// workers returns the workers' arguments, args and the queue or shards,
// and the groups of the global rule's logs (none: the default group).
// With shards it writes the layout under prefix, so that enqueue parks
// each task in its tenant's shard.
func (q boundsQueues) workers(t *testing.T, rdb redis.UniversalClient, prefix string, args ...string) ([]string, []string) {
	t.Helper()
	if q.lay.Shards <= 1 {
		return append(args, "--queues", q.queue+"=1"), nil
	}
	if err := layout.Ensure(context.Background(), rdb, prefix, q.lay); err != nil {
		t.Fatal(err)
	}
	return append(args, "--shards", strconv.Itoa(q.lay.Shards)), q.lay.Groups("sms:send")
}

// fairDrain enqueues the backlog, starts two workers (of shards shards),
// enqueues the visitors at random times until the backlog is nearly sent,
// and waits for every send.
func fairDrain(t *testing.T, url string, rdb redis.UniversalClient, shards int) boundsDrain {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	enqueueBin, err := buildEnqueue()
	if err != nil {
		t.Fatal(err)
	}
	sink := newSMSSink(t)
	prefix := redistest.Prefix(t)
	q := boundsQueues{queue: redistest.Queue(t, rdb), lay: layout.Layout{Shards: shards}}
	const limit, backlog = boundsLimit, boundsBacklog
	policies := writePolicies(t, fmt.Sprintf(`
tasks:
  sms:send:
    - { name: tenant, scope: tenant, limit: %d, window: 1s }
    - { name: provider, scope: global, limit: %d, window: 1s }
`, limit, limit))
	enqueue := func(tenant, id string, n int, more ...string) visitor {
		t.Helper()
		bound := boundsBound
		if shards > 1 && q.lay.Shard(tenant) != q.lay.Shard("acme") {
			bound = boundsAcross
		}
		at := enqueueSMS(t, enqueueBin, url, q.of(tenant), tenant, id, n, append([]string{"--prefix", prefix}, more...)...)
		return visitor{id: id, at: at, bound: bound}
	}
	sent := func() int { return len(sink.receipts()) }
	args, groups := q.workers(t, rdb, prefix, "--redis", url, "--policies", policies, "--sms-webhook", sink.srv.URL,
		"--prefix", prefix, "--concurrency", "10", "--log-level", "warn")
	recorded := recordAdmissions(t, rdb, prefix, "rule/sms:send/provider", groups...)
	enqueue("acme", "acme", backlog-boundsLate)
	procs := startWorkers(t, 2, args...)
	waitFor(t, 60*time.Second, "the backlog's first window sent", sink.notified, func() bool { return sent() >= 2*limit })
	// The rest of the backlog comes from a producer that does not park
	// (as one of another prefix, or of an earlier release): it stands on asynq's
	// pending list when the first visitor comes, which is parked at
	// enqueue and must not wait for the workers to take that list in.
	enqueueUnparked(t, rdb, q.of("acme"), "acme", "acme-late", boundsLate)
	pending := "asynq:{" + q.of("acme") + "}:pending"
	var visitors []visitor
	var pendingAt []int64 // the pending list's length as each visitor came
	total := backlog
	for sent() < backlog-3*limit {
		pendingAt = append(pendingAt, rdb.LLen(context.Background(), pending).Val())
		if len(visitors) > 0 {
			time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
		}
		if len(visitors)%2 == 0 {
			id := fmt.Sprintf("new%d", len(visitors))
			visitors = append(visitors, enqueue(id, id, 3))
			total += 3
		} else {
			id := fmt.Sprintf("urgent%d", len(visitors))
			visitors = append(visitors, enqueue("acme", id, 1, "--priority", "1"))
			total++
		}
	}
	t.Logf("the pending list as the visitors came: %v", pendingAt)
	waitFor(t, 60*time.Second, fmt.Sprintf("all %d SMS at the provider", total), sink.notified, func() bool { return sent() >= total })
	stopWorkers(t, procs...)

	rs := sink.receipts()
	slices.SortFunc(rs, func(a, b receipt) int { return a.At.Compare(b.At) })
	d := boundsDrain{rs: rs, visitors: visitors, total: total}
	d.delays, d.late, d.admitted, d.missing = recorded.delays(rs, boundsMargin)
	for _, queue := range q.all() {
		if left := queueLeft(t, rdb, queue); left != "" {
			t.Errorf("queue %s still holds %s", queue, left)
		}
	}
	return d
}

// enqueueUnparked puts n SMS of tenant, IDs id-1 to id-n, on queue's
// pending list as fast as 8 connections can, as a producer that does not
// park them would.
func enqueueUnparked(t *testing.T, rdb redis.UniversalClient, queue, tenant, id string, n int) {
	t.Helper()
	pc := producer.NewClientFromRedisClient(rdb, producer.WithoutParking())
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int, n)
	for i := range n {
		next <- i + 1
	}
	close(next)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				_, err := pc.EnqueueSMS(context.Background(), tenant, producer.SMS{To: "+15551234567", Body: "hello"},
					asynq.Queue(queue), asynq.TaskID(fmt.Sprintf("%s-%d", id, i)))
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// fairBounds checks every visitor's wait against its bound, and the
// drain's sends.
func fairBounds(t *testing.T, url string, rdb redis.UniversalClient, shards int) {
	d := fairDrain(t, url, rdb, shards)
	waits, over := d.waits(t, true)
	t.Logf("%d newcomers and urgent SMS; waits %v; the worst %v; %d over their bound (%v, or %v outside the backlog's shard)",
		len(d.visitors), roundAll(waits), waits[len(waits)-1].Round(time.Millisecond), over, boundsBound, boundsAcross)
	if len(d.visitors) < 10 {
		t.Errorf("only %d newcomers and urgent SMS came during the drain", len(d.visitors))
	}
	d.check(t, true)
}

// waits returns each visitor's wait, from its enqueue to its first send,
// sorted, and how many were over their bound; with strict, each one over
// it, or behind more of the backlog's sends than fit in it, fails t. It
// logs the waits of the newcomers outside the backlog's shard apart.
func (d boundsDrain) waits(t *testing.T, strict bool) ([]time.Duration, int) {
	t.Helper()
	var waits, across []time.Duration
	over := 0
	for _, v := range d.visitors {
		first := slices.IndexFunc(d.rs, func(r receipt) bool { return v.owns(r.ID) })
		if first < 0 {
			t.Errorf("%s: not sent", v.id)
			continue
		}
		// From its enqueue's return: the task was in Redis by then, a
		// little before (the measure can only be a few ms short).
		wait := d.rs[first].At.Sub(v.at)
		waits = append(waits, wait)
		if v.bound == boundsAcross {
			across = append(across, wait)
		}
		ahead := 0 // the backlog's sends between its enqueue and its first send
		for _, r := range d.rs[:first] {
			if r.At.After(v.at) && strings.HasPrefix(r.ID, "acme-") {
				ahead++
			}
		}
		if wait > v.bound {
			over++
			if strict {
				t.Errorf("%s waited %v, over its bound of %v", v.id, wait.Round(time.Millisecond), v.bound)
			}
		}
		if most := int(v.bound/boundsSlot) + 1; strict && ahead > most {
			t.Errorf("%s: %d of the backlog's sends came between its enqueue and its first send, want at most %d", v.id, ahead, most)
		}
	}
	slices.Sort(waits)
	if len(across) > 0 {
		slices.Sort(across)
		t.Logf("%d newcomers outside the backlog's shard waited %v", len(across), roundAll(across))
	}
	return waits, over
}

// check fails t unless every task arrived once, the provider rule's log
// never admitted more than the limit in a window widened by the margin,
// and no window of one second held more than the limit at the provider,
// or of a tenant, unless strict is false and the window holds a send that
// reached the provider later than the margin after its admission (its
// member as last read, moved to when it left if it left late): the margin
// is what absorbs that time (docs/WORKERS.md), and such a send is logged.
func (d boundsDrain) check(t *testing.T, strict bool) {
	t.Helper()
	seen := map[string]bool{}
	byTenant := map[string][]receipt{}
	for _, r := range d.rs {
		if seen[r.ID] {
			t.Errorf("task %s sent twice", r.ID)
		}
		seen[r.ID] = true
		byTenant[r.Tenant] = append(byTenant[r.Tenant], r)
	}
	if len(seen) != d.total {
		t.Errorf("%d distinct tasks sent, want %d", len(seen), d.total)
	}
	// Only the sends admitted after the recorder's last read (100 ms)
	// can be missing: the log holds a member for a window.
	if most := boundsLimit/10 + 1; d.missing > most {
		t.Errorf("%d sends' admissions were not read from the log, want at most %d", d.missing, most)
	}
	if n := arrivals.MaxInWindow(d.admitted, time.Second+boundsMargin); n > boundsLimit {
		t.Errorf("the provider rule's log admitted %d in a window of %v, limit %d", n, time.Second+boundsMargin, boundsLimit)
	}
	byTenant["the provider"] = d.rs
	for who, rs := range byTenant {
		for _, w := range overWindows(rs, time.Second, boundsLimit) {
			late := slices.ContainsFunc(w, func(r receipt) bool { return d.late[r.ID] })
			if strict || !late {
				t.Errorf("%s: %d sends within a second from %s, limit %d (sent later than the margin among them: %v)",
					who, len(w), w[0].At.Format("15:04:05.000"), boundsLimit, late)
			} else {
				t.Logf("%s: %d sends within a second from %s, a send later than the margin among them", who, len(w), w[0].At.Format("15:04:05.000"))
			}
		}
	}
	t.Logf("admission to arrival: median %v, p99 %v, p99.9 %v, max %v, over the margin %d of %d (%d admissions not read)",
		quantile(d.delays, 0.5).Round(time.Millisecond/10), quantile(d.delays, 0.99).Round(time.Millisecond/10),
		quantile(d.delays, 0.999).Round(time.Millisecond/10), quantile(d.delays, 1).Round(time.Millisecond/10),
		len(d.late), len(d.delays), d.missing)
}

// overWindows returns the spans of rs (in order of arrival) of more than
// limit sends within w, each the longest from its first send.
func overWindows(rs []receipt, w time.Duration, limit int) [][]receipt {
	var out [][]receipt
	for lo := 0; lo < len(rs); lo++ {
		hi := lo
		for hi+1 < len(rs) && rs[hi+1].At.Sub(rs[lo].At) < w {
			hi++
		}
		if hi-lo+1 > limit {
			out = append(out, rs[lo:hi+1])
		}
	}
	return out
}

// roundAll rounds each duration to the millisecond, for a log line.
func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// TestProviderCountUnderLoad runs the drain of TestFairBoundsThroughCLIs
// on a single Redis while two busy processes keep both cores of the
// machine at work. The provider rule's log must never admit more than its
// limit in a window widened by the margin, and the provider must never
// see more than the limit in a window unless a send that reached it later
// than the margin after its admission is among them: that is the
// guarantee (docs/ARCHITECTURE.md, "At the provider, within the margin").
// The time from admission to arrival, which the margin must absorb, and
// the waits, which the load stretches, are logged (docs/WORKERS.md,
// "Margin").
func TestProviderCountUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("a drain of 20 s")
	}
	for range 2 {
		burner := exec.Command("sh", "-c", "while :; do :; done")
		if err := burner.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = burner.Process.Kill(); _ = burner.Wait() })
	}
	d := fairDrain(t, redistest.URL(t), redistest.Client(t), 1)
	waits, over := d.waits(t, false)
	t.Logf("under load: waits %v; the worst %v; %d of %d over the bound of %v",
		roundAll(waits), waits[len(waits)-1].Round(time.Millisecond), over, len(waits), boundsBound)
	d.check(t, false)
}
