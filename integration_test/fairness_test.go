package integration_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/arrivals"
	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestFairnessThroughCLIs runs the fair service through the commands, as a
// user would, on a single Redis, a three-master cluster and through
// Sentinel: cmd/enqueue puts a backlog of one tenant in a queue, two
// cmd/worker processes send it, and then a newcomer and an urgent task
// must be served ahead of the backlog (see fairThrough).
func TestFairnessThroughCLIs(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		fairThrough(t, redistest.URL(t), redistest.Client(t))
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		fairThrough(t, "redis+cluster://"+redistest.ClusterAddrs(t)[0], redistest.Cluster(t))
	})
	t.Run("sentinel", func(t *testing.T) {
		t.Parallel()
		sentinels, master := redistest.Sentinel(t, 3)
		url := fmt.Sprintf("redis+sentinel://%s/0?master_name=%s&addr=%s&addr=%s",
			sentinels[0], redistest.SentinelMaster, sentinels[1], sentinels[2])
		rdb := redis.NewClient(&redis.Options{Addr: master})
		t.Cleanup(func() { _ = rdb.Close() })
		fairThrough(t, url, rdb)
	})
}

// fairThrough enqueues 60 SMS of tenant acme with cmd/enqueue through url,
// starts two workers, and once 12 are sent enqueues 3 SMS of tenant
// initech; once 12 more are sent, 2 SMS of acme at priority 1. It counts,
// by the provider's order of arrival, the backlog's sends that came
// between each enqueue and the last of its tasks: a few (the slots given
// before it arrived, and its fair share), where first come, first served
// would send the whole backlog first. Every task arrives once, no window
// holds more than the limit, and the queue is left empty.
func fairThrough(t *testing.T, url string, rdb redis.UniversalClient) {
	t.Helper()
	if _, err := buildWorker(); err != nil {
		t.Fatal(err)
	}
	enqueueBin, err := buildEnqueue()
	if err != nil {
		t.Fatal(err)
	}
	sink := newSMSSink(t)
	queue := redistest.Queue(t, rdb)
	prefix := redistest.Prefix(t)
	const limit = 10 // a second, shared by all tenants
	policies := writePolicies(t, fmt.Sprintf(`
tasks:
  sms:send:
    - { name: provider, scope: global, limit: %d, window: 1s }
`, limit))
	enqueue := func(tenant, id string, n int, more ...string) time.Time {
		t.Helper()
		return enqueueSMS(t, enqueueBin, url, queue, tenant, id, n, append([]string{"--prefix", prefix}, more...)...)
	}
	waitSent := func(n int) {
		t.Helper()
		waitFor(t, 60*time.Second, fmt.Sprintf("%d SMS at the provider", n), sink.notified, func() bool { return len(sink.receipts()) >= n })
	}
	enqueue("acme", "acme", 60)
	procs := startWorkers(t, 2, "--redis", url, "--policies", policies, "--sms-webhook", sink.srv.URL,
		"--queues", queue+"=1", "--prefix", prefix, "--concurrency", "10", "--log-level", "warn")
	waitSent(12)
	newcomer := enqueue("initech", "initech", 3)
	waitSent(27)
	urgent := enqueue("acme", "urgent", 2, "--priority", "1")
	waitSent(65)
	stopWorkers(t, procs...)

	rs := sink.receipts()
	slices.SortFunc(rs, func(a, b receipt) int { return a.At.Compare(b.At) })
	ahead := func(since time.Time, idPrefix string) int { return backlogAhead(t, rs, since, idPrefix) }
	if n := ahead(newcomer, "initech-"); n > 8 {
		t.Errorf("%d of the backlog's sends came between the newcomer's enqueue and its last send, want at most 8", n)
	}
	if n := ahead(urgent, "urgent-"); n > 6 {
		t.Errorf("%d of the backlog's sends came between the urgent tasks' enqueue and their last send, want at most 6", n)
	}
	seen := map[string]bool{}
	var all []time.Time
	for _, r := range rs {
		if seen[r.ID] {
			t.Errorf("task %s sent twice", r.ID)
		}
		seen[r.ID] = true
		all = append(all, r.At)
	}
	if len(seen) != 65 {
		t.Errorf("%d distinct tasks sent, want 65", len(seen))
	}
	if n := arrivals.MaxInWindow(all, time.Second); n > limit {
		t.Errorf("the provider saw %d in one window, limit %d", n, limit)
	}
	if left := queueLeft(t, rdb, queue); left != "" {
		t.Errorf("queue %s still holds %s", queue, left)
	}
	t.Logf("backlog sends before the newcomer's last: %d; before the urgent tasks' last: %d", ahead(newcomer, "initech-"), ahead(urgent, "urgent-"))
}

// backlogAhead counts the sends of rs, in order of arrival, of the backlog
// (acme's, not urgent) that arrived after since and before the last send
// whose ID starts with idPrefix.
func backlogAhead(t *testing.T, rs []receipt, since time.Time, idPrefix string) int {
	t.Helper()
	last := -1
	for i, r := range rs {
		if strings.HasPrefix(r.ID, idPrefix) {
			last = i
		}
	}
	if last < 0 {
		t.Fatalf("no send of %s", idPrefix)
	}
	n := 0
	for _, r := range rs[:last] {
		if r.At.After(since) && strings.HasPrefix(r.ID, "acme-") {
			n++
		}
	}
	return n
}

// enqueueSMS runs cmd/enqueue (bin) to put n SMS of tenant, IDs from id, on
// queue through url, and returns when it returned, its tasks in Redis.
func enqueueSMS(t *testing.T, bin, url, queue, tenant, id string, n int, more ...string) time.Time {
	t.Helper()
	runEnqueue(t, bin, append([]string{"sms", "--redis", url, "--queue", queue, "--tenant", tenant,
		"--to", "+15551234567", "--body", "hello", "--count", fmt.Sprint(n), "--id", id}, more...)...)
	return time.Now()
}

// runEnqueue runs cmd/enqueue (bin) with args, within 30 s, and fails t
// with its output if it fails.
func runEnqueue(t *testing.T, bin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = readmeEnv()
	if ca, ok := os.LookupEnv(redisconn.RedisCAFileEnv); ok {
		cmd.Env = append(cmd.Env, redisconn.RedisCAFileEnv+"="+ca)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("enqueue %v: %v\n%s", args[:min(len(args), 8)], err, out)
	}
}
