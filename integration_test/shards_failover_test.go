package integration_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/arrivals"
	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle"
)

// The limits of TestShardsThroughFailover, a second each.
const (
	moveTenantMax = 4
	moveGlobalMax = 10
)

// arrivedFor reports, when called, whether the provider has at least n
// sends of tenants.
func (s *smsSink) arrivedFor(tenants []string, n int) func() bool {
	return func() bool {
		got := 0
		for _, r := range s.receipts() {
			if slices.Contains(tenants, r.Tenant) {
				got++
			}
		}
		return got >= n
	}
}

// movePolicies writes the policies of the tests whose demand moves from
// shard to shard: moveTenantMax a tenant and moveGlobalMax in all, a
// second each.
func movePolicies(t *testing.T) string {
	t.Helper()
	return writePolicies(t, fmt.Sprintf(`
margin: 50ms
tasks:
  sms:send:
    - { name: tenant, scope: tenant, limit: %d, window: 1s }
    - { name: provider, scope: global, limit: %d, window: 1s }
`, moveTenantMax, moveGlobalMax))
}

// TestShardsThroughFailover: three cmd/worker processes run three shards
// on a cluster of three masters, each with a replica, while the demand
// moves from shard to shard: each phase enqueues SMS for three tenants
// of one shard, the next phase when two thirds of the last have arrived.
// The worker balancing the leases is killed (SIGKILL) in the first phase,
// and the master of the second phase's shard is replaced by its replica
// (CLUSTER FAILOVER) while that shard sends. Then the record of
// admissions holds no window over its limit, the global rule's summed
// over the shards; the provider saw none either; every task arrived once,
// but for those the killed worker held, which are still active for
// asynq's recoverer (TestWorkerKilledMidTask); each phase's shard sent
// more than a third of the global rule in some window, which it can only
// with shares moved from the other shards (an even split leaves each a
// third); and the shares of the rule
// sum to no more than the whole.
func TestShardsThroughFailover(t *testing.T) {
	c := redistest.StartReplicatedCluster(t)
	rdb := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sink := newSMSSink(t)
	prefix := "sluice:" + redistest.Prefix(t)
	policyFile := movePolicies(t)
	three := layout.Layout{Shards: 3}
	var procs []*workerProc
	for i := range 3 {
		procs = append(procs, startWorkers(t, 1, "--redis", c.URL(), "--policies", policyFile,
			"--sms-webhook", sink.url(fmt.Sprintf("w%d", i)), "--prefix", prefix, "--concurrency", "8",
			"--log-level", "debug", "--shards", "3")...)
	}
	waitFor(t, 20*time.Second, "the workers to write the layout", nil, func() bool {
		return rdb.Get(ctx, keyspace.LayoutKey(prefix)).Val() == three.String()
	})
	byShard := tenantsByShard(three, 3)
	run := moveDemand(t, ctx, c, sink, prefix, byShard, procs)

	rs := sink.receipts()
	cut := map[string]bool{}
	for _, r := range rs {
		if r.Cut {
			cut[r.ID] = true
		}
	}
	expect := maps.Clone(run.want)
	for id := range run.stuck {
		if sink.delivered()[id] == 0 {
			delete(expect, id)
			checkStillActive(t, rdb, three.Queue("sms:send", run.want[id]), id)
		}
	}
	checkDelivered(t, rs, expect, cut)
	checkProviderWindows(t, rs, time.Second, moveTenantMax, moveGlobalMax)
	checkHistory(t, len(rs), procs...)
	checkShardsFollowed(t, rs, byShard)
	checkLeaseSum(t, rdb, prefix, policyFile, three)
	t.Logf("killed the balancing worker with %d tasks active; failover of %s to %s; %d tasks, %d of the killed worker's left to asynq's recoverer",
		len(run.stuck), run.old, run.now, len(run.want), len(run.want)-len(expect))
}

// movedRun is what moveDemand did.
type movedRun struct {
	want     map[string]string // the tenant of each task enqueued, by ID
	stuck    map[string]bool   // the tasks active just after the kill
	old, now string            // the master failed over, and its replica
}

// moveDemand enqueues perTenant SMS for the tenants of each shard of
// byShard in turn, the next when two thirds of the last have arrived;
// kills the worker of procs that balances the leases in the first phase
// and fails over the master of the second phase's shard while it sends;
// and returns once every task but the killed worker's has arrived and the
// other workers have stopped.
func moveDemand(t *testing.T, ctx context.Context, c *redistest.ReplicatedCluster, sink *smsSink, prefix string,
	byShard [][]string, procs []*workerProc) movedRun {
	t.Helper()
	const perTenant = 10
	enqueueBin, err := buildEnqueue()
	if err != nil {
		t.Fatal(err)
	}
	three := layout.Layout{Shards: len(byShard)}
	run := movedRun{want: map[string]string{}}
	phase := func(k int) {
		w, _ := enqueueByLayout(t, enqueueBin, c.URL(), prefix, three, byShard[k], perTenant)
		maps.Copy(run.want, w)
	}
	arrived := func(k, n int) func() bool { return sink.arrivedFor(byShard[k], n) }
	phase(0)
	victim := balancingWorker(t, procs)
	if victim == nil {
		t.Fatal("no worker logged that it balances the leases")
	}
	waitFor(t, 30*time.Second, "a third of the first phase at the provider", sink.notified, arrived(0, perTenant))
	rest := slices.DeleteFunc(slices.Clone(procs), func(p *workerProc) bool { return p == victim })
	tookBefore := tookBalance(rest)
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.done
	run.stuck = activeTasks(t, c.Client(t), three)
	waitFor(t, 30*time.Second, "two thirds of the first phase at the provider", sink.notified, arrived(0, 2*perTenant))

	phase(1)
	waitFor(t, 30*time.Second, "a third of the second phase at the provider", sink.notified, arrived(1, perTenant))
	if run.old, run.now, err = c.Failover(ctx, "{"+three.Group("sms:send", byShard[1][0])+"}"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "two thirds of the second phase at the provider", sink.notified, arrived(1, 2*perTenant))

	phase(2)
	waitFor(t, time.Minute, "every task but the killed worker's at the provider", sink.notified, func() bool {
		got := sink.delivered()
		for id := range run.want {
			if got[id] == 0 && !run.stuck[id] {
				return false
			}
		}
		return true
	})
	stopWorkers(t, rest...)
	if tookBalance(rest) <= tookBefore {
		t.Error("no worker took the balancing over after the kill: the worker killed was not the one balancing")
	}
	return run
}

// checkProviderWindows fails t when the provider saw more than tenantMax
// sends of one tenant, or globalMax in all, in one window.
func checkProviderWindows(t testing.TB, rs []receipt, window time.Duration, tenantMax, globalMax int) {
	t.Helper()
	var all []time.Time
	byTenant := map[string][]time.Time{}
	for _, r := range rs {
		all = append(all, r.At)
		byTenant[r.Tenant] = append(byTenant[r.Tenant], r.At)
	}
	for tenant, at := range byTenant {
		if n := arrivals.MaxInWindow(at, window); n > tenantMax {
			t.Errorf("tenant %s: the provider saw %d in one window, limit %d", tenant, n, tenantMax)
		}
	}
	if n := arrivals.MaxInWindow(all, window); n > globalMax {
		t.Errorf("the provider saw %d in one window, global limit %d", n, globalMax)
	}
}

// tenantsByShard returns n tenant names of each shard of l, by shard.
func tenantsByShard(l layout.Layout, n int) [][]string {
	out := make([][]string, l.Shards)
	for i, left := 0, l.Shards*n; left > 0; i++ {
		tenant := fmt.Sprintf("t%02d", i)
		if s := l.Shard(tenant); len(out[s]) < n {
			out[s] = append(out[s], tenant)
			left--
		}
	}
	return out
}

// The log lines of a worker that begins, or stops, balancing the leases.
const (
	tookBalancing = "balancing the leases of a task type's global rules"
	lostBalancing = "another worker balances the leases"
)

// tookBalance counts the times the workers of procs began balancing.
func tookBalance(procs []*workerProc) int {
	n := 0
	for _, p := range procs {
		n += strings.Count(p.logs.String(), tookBalancing)
	}
	return n
}

// balancingWorker returns the worker of procs that, as its logs say,
// balances the leases now, waiting up to 5 s for one; nil when none does.
func balancingWorker(t *testing.T, procs []*workerProc) *workerProc {
	t.Helper()
	took, lost := tookBalancing, lostBalancing
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, p := range procs {
			logs := p.logs.String()
			if i := strings.LastIndex(logs, took); i >= 0 && i > strings.LastIndex(logs, lost) {
				return p
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// activeTasks returns the IDs of the tasks active in every queue of l.
func activeTasks(t *testing.T, rdb redis.UniversalClient, l layout.Layout) map[string]bool {
	t.Helper()
	in := asynq.NewInspectorFromRedisClient(rdb)
	out := map[string]bool{}
	for _, q := range l.TypeQueues("sms:send") {
		active, err := in.ListActiveTasks(q, asynq.PageSize(100))
		if errors.Is(err, asynq.ErrQueueNotFound) {
			continue // no task was ever enqueued there
		}
		if err != nil {
			t.Fatalf("active tasks of %s: %v", q, err)
		}
		for _, a := range active {
			out[a.ID] = true
		}
	}
	return out
}

// checkStillActive fails t unless task id is active in queue: a task the
// killed worker held, which asynq's recoverer gives back.
func checkStillActive(t *testing.T, rdb redis.UniversalClient, queue, id string) {
	t.Helper()
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(queue, id)
	if err != nil {
		t.Errorf("task %s, held by the killed worker: %v", id, err)
		return
	}
	if info.State != asynq.TaskStateActive {
		t.Errorf("task %s, held by the killed worker and never delivered, is %v, want active", id, info.State)
	}
}

// checkShardsFollowed fails t unless each shard's tenants had more than a
// third of the global rule at the provider in some window: with the
// demand in one shard at a time, shares must have moved to it from the
// others.
func checkShardsFollowed(t *testing.T, rs []receipt, byShard [][]string) {
	t.Helper()
	var peaks []int
	for k, tenants := range byShard {
		var at []time.Time
		for _, r := range rs {
			for _, tenant := range tenants {
				if r.Tenant == tenant {
					at = append(at, r.At)
				}
			}
		}
		n := arrivals.MaxInWindow(at, time.Second)
		peaks = append(peaks, n)
		if n <= moveGlobalMax/3+1 {
			t.Errorf("shard %d sent at most %d in a window of the global rule's %d: its share did not follow its demand", k, n, moveGlobalMax)
		}
	}
	t.Logf("the most each phase's shard sent in one window: %v of %d", peaks, moveGlobalMax)
}

// checkLeaseSum fails t unless the shares of the global rule, over the
// pool and l's shards, sum to at most the whole, and with the moves given
// and not settled to at least the whole.
func checkLeaseSum(t *testing.T, rdb redis.UniversalClient, prefix, policyFile string, l layout.Layout) {
	t.Helper()
	p, err := policies.Load(policyFile)
	if err != nil {
		t.Fatal(err)
	}
	var rule throttle.Check
	for _, ap := range p.For("sms:send", "") {
		if ap.Shared {
			rule = ap.Check
		}
	}
	ls := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)).Leases()
	var held, out int64
	for _, g := range append([]string{throttle.DefaultGroup}, l.Groups("sms:send")...) {
		lease, err := ls.Read(context.Background(), rule, g)
		if err != nil {
			t.Fatal(err)
		}
		held += lease.Share
		for _, m := range lease.Out {
			out += m.Shares
		}
	}
	if held > throttle.LeaseParts || held+out < throttle.LeaseParts {
		t.Errorf("the leases hold %d shares with %d given and not settled; want at most %d held, and at least that with those",
			held, out, throttle.LeaseParts)
	}
}
