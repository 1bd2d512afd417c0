package integration_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/arrivals"
	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestDeliveryOnCluster runs cmd/enqueue and two cmd/worker processes with
// a redis+cluster:// URL that names one node of a three-master Redis
// Cluster: the clients find the others. asynq's keys of a queue share the
// hash tag {queue}, and the limiter's the tag {limits}, so each lives on one
// master, which the test checks midway.
func TestDeliveryOnCluster(t *testing.T) {
	addrs := redistest.ClusterAddrs(t)
	rdb := redistest.Cluster(t)
	url := "redis+cluster://" + addrs[0]
	deliverThrough(t, url, rdb, func(queue, prefix string) {
		slotsOf := func(keys []string) map[int64][]string {
			slots := map[int64][]string{}
			for _, k := range keys {
				slot, err := rdb.ClusterKeySlot(context.Background(), k).Result()
				if err != nil {
					t.Fatal(err)
				}
				slots[slot] = append(slots[slot], k)
			}
			return slots
		}
		limiter := redistest.Keys(t, rdb, prefix)
		if len(limiter) == 0 {
			t.Errorf("no limiter keys under %s while the workers drain the queue", prefix)
		}
		if slots := slotsOf(limiter); len(slots) > 1 {
			t.Errorf("the limiter's keys are in %d hash slots, want one (the group {limits}): %v", len(slots), slots)
		}
		if slots := slotsOf(redistest.QueueKeys(t, rdb, queue)); len(slots) != 1 {
			t.Errorf("the keys of queue %s are in %d hash slots, want one (the tag {%s}): %v", queue, len(slots), queue, slots)
		}
	})
}

// TestDeliveryThroughSentinel runs cmd/enqueue and two cmd/worker processes
// with a redis+sentinel:// URL that names three sentinels and no master:
// the tasks reach the master only if the clients found it through them.
func TestDeliveryThroughSentinel(t *testing.T) {
	sentinels, master := redistest.Sentinel(t, 3)
	url := fmt.Sprintf("redis+sentinel://%s/0?master_name=%s&addr=%s&addr=%s",
		sentinels[0], redistest.SentinelMaster, sentinels[1], sentinels[2])
	rdb := redis.NewClient(&redis.Options{Addr: master})
	t.Cleanup(func() { _ = rdb.Close() })
	deliverThrough(t, url, rdb, nil)
}

// TestDeliveryOverTLS runs cmd/enqueue and two cmd/worker processes with a
// rediss:// URL as the ACL user with redistest.SluiceACL, to a Redis that
// listens only for TLS with a certificate of a CA made for the test, which
// the commands trust through redisconn.RedisCAFileEnv: the commands need nothing
// the user may not do.
func TestDeliveryOverTLS(t *testing.T) {
	srv := redistest.StartTLS(t)
	t.Setenv(redisconn.RedisCAFileEnv, srv.CAFile)
	deliverThrough(t, srv.URL(srv.User, srv.Password), srv.Admin, nil)
	srv.CheckACLLog(t)
}

// deliverThrough enqueues 10 SMS for each of two tenants with cmd/enqueue
// through url, sends them with two cmd/worker processes through url, and
// checks that the provider received every task once, that no window held
// more than its limit as the provider saw it, and that the queue is left
// empty. rdb is a client of the same Redis, for the checks. midway, unless
// nil, is called once while the workers drain the queue, with the queue and
// the limiter's key prefix. The workers get extra after their own flags.
func deliverThrough(t *testing.T, url string, rdb redis.UniversalClient, midway func(queue, prefix string), extra ...string) {
	t.Helper()
	// Built before the clock starts; startWorkers finds the worker built.
	if _, err := buildWorker(); err != nil {
		t.Fatal(err)
	}
	enqueueBin, err := buildEnqueue()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sink := newSMSSink(t)
	queue := redistest.Queue(t, rdb)
	prefix := "sluice:" + redistest.Prefix(t) // under SluiceACL's ~sluice:*
	const (
		perTenant = 10
		tenantMax = 3 // a second
		globalMax = 5 // a second
	)
	policies := writePolicies(t, fmt.Sprintf(`
margin: 50ms
tasks:
  sms:send:
    - { name: tenant, scope: tenant, limit: %d, window: 1s }
    - { name: provider, scope: global, limit: %d, window: 1s }
`, tenantMax, globalMax))

	// The backlog first, so that the limits bind from the first task.
	want := enqueueThrough(t, enqueueBin, url, queue, perTenant)
	procs := startWorkers(t, 2, append([]string{"--redis", url, "--policies", policies, "--sms-webhook", sink.srv.URL,
		"--queues", queue + "=1", "--prefix", prefix, "--concurrency", "4", "--log-level", "debug"}, extra...)...)

	deadline := time.Now().Add(20 * time.Second)
	for n := 0; n < len(want); n = len(sink.receipts()) {
		if midway != nil && n >= 5 {
			midway(queue, prefix)
			midway = nil
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s the provider has %d of %d tasks", n, len(want))
		}
		select {
		case <-sink.notified:
		case <-time.After(time.Second):
		}
	}
	drained := time.Since(start)
	if midway != nil {
		t.Errorf("the queue drained before the check midway (5 of %d tasks delivered)", len(want))
	}

	// Stop the workers, so that a send still on its way is counted.
	stopWorkers(t, procs...)

	checkThrough(t, sink.receipts(), want, tenantMax, globalMax)
	checkHistory(t, len(want), procs...)
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(queue)
	if err != nil {
		t.Fatal(err)
	}
	if left := info.Pending + info.Active + info.Scheduled + info.Retry + info.Archived; left != 0 {
		t.Errorf("queue %s still holds %d tasks: %d pending, %d active, %d scheduled, %d retry, %d archived",
			queue, left, info.Pending, info.Active, info.Scheduled, info.Retry, info.Archived)
	}
	t.Logf("%s: %d tasks enqueued and delivered in %v", strings.SplitN(url, ":", 2)[0], len(want), drained.Round(10*time.Millisecond))
}

// enqueueThrough enqueues perTenant SMS for each of acme and globex on
// queue with cmd/enqueue (bin) through url, and returns the tenant of each
// task by ID.
func enqueueThrough(t *testing.T, bin, url, queue string, perTenant int) map[string]string {
	t.Helper()
	want := map[string]string{} // task ID -> tenant
	for _, tenant := range []string{"acme", "globex"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, bin, "sms", "--redis", url, "--queue", queue, "--tenant", tenant,
			"--to", "+15551234567", "--body", "hello "+tenant, "--count", fmt.Sprint(perTenant), "--id", tenant)
		cmd.Env = readmeEnv()
		if ca, ok := os.LookupEnv(redisconn.RedisCAFileEnv); ok { // as the workers see it
			cmd.Env = append(cmd.Env, redisconn.RedisCAFileEnv+"="+ca)
		}
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("enqueue %s: %v\n%s", tenant, err, out)
		}
		if got, want := string(out), fmt.Sprintf("enqueued %d of %d sms tasks for tenant %s on queue %s\n", perTenant, perTenant, tenant, queue); got != want {
			t.Errorf("enqueue %s printed %q, want %q", tenant, got, want)
		}
		for i := range perTenant {
			want[fmt.Sprintf("%s-%d", tenant, i+1)] = tenant
		}
	}
	return want
}

// checkThrough checks that the provider answered 200 to each of rs, which
// are the tasks of want, once each, and saw no more in a 1 s window than
// tenantMax of a tenant and globalMax in all.
func checkThrough(t *testing.T, rs []receipt, want map[string]string, tenantMax, globalMax int) {
	t.Helper()
	const window = time.Second
	got := map[string]string{}
	byTenant := map[string][]time.Time{}
	var all []time.Time
	for _, r := range rs {
		if r.Status != http.StatusOK {
			t.Errorf("the provider answered %d to task %s", r.Status, r.ID)
		}
		if _, ok := got[r.ID]; ok {
			t.Errorf("task %s delivered more than once", r.ID)
		}
		got[r.ID] = r.Tenant
		byTenant[r.Tenant] = append(byTenant[r.Tenant], r.At)
		all = append(all, r.At)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tasks delivered, by ID and tenant (-enqueued +delivered):\n%s", diff)
	}
	for _, tenant := range slices.Sorted(maps.Keys(byTenant)) {
		if n := arrivals.MaxInWindow(byTenant[tenant], window); n > tenantMax {
			t.Errorf("tenant %s: the provider saw %d in one window, limit %d", tenant, n, tenantMax)
		}
	}
	if n := arrivals.MaxInWindow(all, window); n > globalMax {
		t.Errorf("the provider saw %d in one window, global limit %d", n, globalMax)
	}
}
