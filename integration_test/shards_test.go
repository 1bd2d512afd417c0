package integration_test

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestShardsOnCluster: two cmd/worker processes on the three-master test
// cluster take a shard per master (--shards 3: the default needs a cluster
// no other test's worker runs on, layout.TestChoose), and cmd/enqueue,
// given no queue, puts each tenant's SMS in its shard's queue. Each
// shard's queue and limiter keys share one slot, each shard on a master of
// its own; every task is delivered once, within its limits as the provider
// saw them; and the record of admissions holds no window over its limit,
// the global rule's summed over the shards.
func TestShardsOnCluster(t *testing.T) {
	addrs := redistest.ClusterAddrs(t)
	rdb := redistest.Cluster(t)
	ctx := context.Background()
	url := "redis+cluster://" + addrs[0]
	if _, err := buildWorker(); err != nil {
		t.Fatal(err)
	}
	enqueueBin, err := buildEnqueue()
	if err != nil {
		t.Fatal(err)
	}
	sink := newSMSSink(t)
	prefix := "sluice:" + redistest.Prefix(t)
	const (
		tenants, perTenant = 12, 4
		tenantMax          = 3 // a second
		globalMax          = 8 // a second
	)
	policies := writePolicies(t, fmt.Sprintf(`
margin: 50ms
tasks:
  sms:send:
    - { name: tenant, scope: tenant, limit: %d, window: 1s }
    - { name: provider, scope: global, limit: %d, window: 1s }
`, tenantMax, globalMax))
	three := layout.Layout{Shards: len(addrs)}
	procs := startWorkers(t, 2, "--redis", url, "--policies", policies, "--sms-webhook", sink.srv.URL,
		"--prefix", prefix, "--concurrency", "8", "--log-level", "debug", "--shards", fmt.Sprint(three.Shards))

	// The producers follow the layout the first worker writes.
	deadline := time.Now().Add(20 * time.Second)
	for rdb.Get(ctx, keyspace.LayoutKey(prefix)).Val() != three.String() {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s the workers have not written the layout %s", three)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var names []string
	for i := range tenants {
		names = append(names, fmt.Sprintf("t%02d", i))
	}
	want, queues := enqueueByLayout(t, enqueueBin, url, prefix, three, names, perTenant)
	t.Logf("tasks by queue: %v", queues)
	if len(queues) != three.Shards {
		t.Fatalf("the tenants fell in %d shards, want %d: %v", len(queues), three.Shards, queues)
	}

	deadline = time.Now().Add(30 * time.Second)
	for n := 0; n < len(want); n = len(sink.receipts()) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the provider has %d of %d tasks", n, len(want))
		}
		select {
		case <-sink.notified:
		case <-time.After(time.Second):
		}
	}
	stopWorkers(t, procs...)
	checkThrough(t, sink.receipts(), want, tenantMax, globalMax)
	checkHistory(t, len(want), procs...)

	checkShardPlaces(t, rdb, prefix, three)
}

// enqueueByLayout enqueues perTenant SMS for each of tenants with
// cmd/enqueue (bin) through url, given no queue, and checks that each
// went to its tenant's shard's queue under l. It returns the tenant of
// each task by ID, and the tasks by queue. The IDs carry prefix's own
// part: the layout's queues are shared by the tests on one cluster, and
// a task that ran keeps its ID a day (producer.DefaultRetention).
func enqueueByLayout(t *testing.T, bin, url, prefix string, l layout.Layout, tenants []string, perTenant int) (want map[string]string, queues map[string]int) {
	t.Helper()
	want, queues = map[string]string{}, map[string]int{}
	printed := regexp.MustCompile(`^enqueued \d+ of \d+ sms tasks for tenant \S+ on queue (\S+)\n$`)
	own := strings.Trim(strings.TrimPrefix(prefix, "sluice:"), ":")
	for _, tenant := range tenants {
		id := tenant + "." + own
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, bin, "sms", "--redis", url, "--prefix", prefix, "--tenant", tenant,
			"--to", "+15551234567", "--body", "hello", "--count", fmt.Sprint(perTenant), "--id", id)
		cmd.Env = readmeEnv()
		out, err := cmd.CombinedOutput()
		cancel()
		m := printed.FindStringSubmatch(string(out))
		if err != nil || m == nil {
			t.Fatalf("enqueue %s: %v\n%s", tenant, err, out)
		}
		if q := l.Queue("sms:send", tenant); m[1] != q {
			t.Errorf("tenant %s: enqueued on queue %s, want its shard's %s", tenant, m[1], q)
		}
		queues[m[1]] += perTenant
		for j := range perTenant {
			want[fmt.Sprintf("%s-%d", id, j+1)] = tenant
		}
	}
	return want, queues
}

// checkShardPlaces checks that each shard of l keeps its queue's and its
// limiter's keys (under prefix) in one slot, and each shard on a master
// of its own.
func checkShardPlaces(t *testing.T, rdb *redis.ClusterClient, prefix string, l layout.Layout) {
	t.Helper()
	ctx := context.Background()
	masters := map[string]string{} // master -> shard
	for _, g := range l.Groups("sms:send") {
		keys := append(redistest.Keys(t, rdb, keyspace.Base(prefix, g)), redistest.QueueKeys(t, rdb, g)...)
		slots := map[int64]bool{}
		for _, k := range keys {
			slots[rdb.ClusterKeySlot(ctx, k).Val()] = true
		}
		if len(slots) != 1 {
			t.Errorf("shard %s: its queue and limiter keys are in %d slots, want one: %v", g, len(slots), keys)
		}
		m, err := rdb.MasterForKey(ctx, "{"+g+"}")
		if err != nil {
			t.Fatal(err)
		}
		addr := m.Options().Addr
		if other, ok := masters[addr]; ok {
			t.Errorf("shards %s and %s are on one master, %s; want one shard per master", other, g, addr)
		}
		masters[addr] = g
	}
}
