package integration_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testneed"
)

// The rules of TestUpgradeFrom010: windows of 6 s, so that each spans the
// switch from the old workers to the new.
const (
	upgradeWindow    = 6 * time.Second
	upgradeTenantMax = 4
	upgradeGlobalMax = 15
)

// TestUpgradeFrom010 upgrades a deployment of Sluice 0.1.0 as
// docs/SCALING.md, "From 0.1.0", says. Two 0.1.0 workers drain SMS that
// 0.1.0's enqueue and this version's put in `default` (no worker of this
// version has written the layout yet); a worker of this version started
// beside them refuses, naming them; they are stopped, `admin reset-lines`
// runs the tasks they parked, and two workers of this version drain the
// rest, with more enqueued by both versions. Every task arrives once, the
// provider saw no window over across the switch, the new workers started
// within half a window of the last old send (so the old windows counted),
// and their record holds no window over.
func TestUpgradeFrom010(t *testing.T) {
	rel, enqueueBin, adminBin := upgradeBinaries(t)
	rdb := redistest.OwnClient(t, 0)
	ctx := context.Background()
	url := "redis://" + rdb.Options().Addr + "/0"
	sink := newSMSSink(t)
	policyFile := writePolicies(t, fmt.Sprintf(`
margin: 50ms
tasks:
  sms:send:
    - { name: tenant, scope: tenant, limit: %d, window: %v }
    - { name: provider, scope: global, limit: %d, window: %v }
`, upgradeTenantMax, upgradeWindow, upgradeGlobalMax, upgradeWindow))
	args := func(who string) []string {
		return []string{"--redis", url, "--policies", policyFile, "--sms-webhook", sink.url(who),
			"--concurrency", "4", "--log-level", "debug"}
	}
	var tenants []string
	for i := range 6 {
		tenants = append(tenants, fmt.Sprintf("t%02d", i))
	}
	want := map[string]string{}
	enqueue := func(bin, tag, queue string, n int) {
		for id, tenant := range enqueueEach(t, bin, url, tenants, tag, queue, n) {
			want[id] = tenant
		}
	}
	oldEnqueue := filepath.Join(rel, "enqueue")

	// Never held in the worker: their denied tasks park in 0.1.0's lines,
	// which only admin reset-lines brings back before their park ends.
	old := startWorkersOf(t, filepath.Join(rel, "worker"), 2, append(args("old"), "--max-hold", "-1s")...)
	waitServing(t, rdb, old...)
	early := startWorkers(t, 1, args("new")...)[0]
	enqueue(oldEnqueue, "a", "default", 2)
	enqueue(enqueueBin, "b", "default", 2) // no layout written yet: default
	checkRefusedBeside(t, rdb, early, old)

	// A full window sent, and tasks parked in 0.1.0's lines (their entries
	// in <base>qt, a key both versions share).
	waitFor(t, 30*time.Second, "a window's sends, and tasks parked in 0.1.0's lines", sink.notified, func() bool {
		return len(sink.receipts()) >= upgradeGlobalMax && rdb.HLen(ctx, keyspace.LinesBase("sluice:")+"qt").Val() > 0
	})
	stopWorkers(t, old...)
	oldSent := len(sink.receipts())
	resetOldLines(t, adminBin, url)
	young := startWorkers(t, 2, args("new")...)
	waitFor(t, 20*time.Second, "the new workers to write the layout", nil, func() bool {
		return rdb.Get(ctx, keyspace.LayoutKey("sluice:")).Val() == "shards=1"
	})
	started := time.Now()
	enqueue(oldEnqueue, "c", "default", 2)
	enqueue(enqueueBin, "d", "sms:send", 2)
	waitFor(t, 90*time.Second, "every task at the provider", sink.notified, func() bool {
		return len(sink.delivered()) == len(want)
	})
	stopWorkers(t, young...)

	rs := sink.receipts()
	t.Logf("%d sends: %d by the 0.1.0 workers, %d by the new ones", len(rs), oldSent, len(rs)-oldSent)
	if oldSent == 0 || oldSent == len(want) {
		t.Fatalf("the 0.1.0 workers sent %d of %d before they stopped: the test proves nothing", oldSent, len(want))
	}
	took := started.Sub(rs[oldSent-1].At)
	t.Logf("the new workers started %v after the last old send", took.Round(time.Millisecond))
	if took > upgradeWindow/2 {
		t.Errorf("the new workers started %v after the last old send, more than half the window", took.Round(time.Millisecond))
	}
	checkDelivered(t, rs, want, nil)
	checkProviderWindows(t, rs, upgradeWindow, upgradeTenantMax, upgradeGlobalMax)
	checkHistory(t, len(rs)-oldSent, young...)
}

// upgradeBinaries builds 0.1.0's commands (their directory, rel) and
// this version's enqueue and admin.
func upgradeBinaries(t *testing.T) (rel, enqueueBin, adminBin string) {
	t.Helper()
	rel, err := buildRelease010()
	switch {
	case errors.Is(err, errNoGit):
		t.Skip(err) // a source export: no history to build 0.1.0 from
	case errors.Is(err, errNoRelease):
		testneed.Missing(t, "%v", err)
	case err != nil:
		t.Fatal(err)
	}
	if enqueueBin, err = buildEnqueue(); err != nil {
		t.Fatal(err)
	}
	if adminBin, err = buildAdmin(); err != nil {
		t.Fatal(err)
	}
	return rel, enqueueBin, adminBin
}

// checkRefusedBeside waits for early, a worker of this version started
// beside the 0.1.0 workers old, to exit, and fails t unless it refused,
// naming them, and wrote no layout.
func checkRefusedBeside(t *testing.T, rdb redis.UniversalClient, early *workerProc, old []*workerProc) {
	t.Helper()
	select {
	case <-early.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("a worker started beside 0.1.0's still runs after 30 s: it did not refuse")
	}
	logs := early.logs.String()
	if early.err == nil || !strings.Contains(logs, "no worker of this version") ||
		!strings.Contains(logs, "pid "+strconv.Itoa(old[0].cmd.Process.Pid)) {
		t.Errorf("a worker started beside 0.1.0's (exit %v) did not refuse naming them:\n%s", early.err, logs)
	}
	if rdb.Exists(context.Background(), keyspace.LayoutKey("sluice:")).Val() != 0 {
		t.Errorf("the refused worker wrote the layout")
	}
}

// resetOldLines runs admin reset-lines (adminBin) for sms:send, and fails
// t unless it moved tasks that 0.1.0's workers parked.
func resetOldLines(t *testing.T, adminBin, url string) {
	t.Helper()
	out, err := exec.Command(adminBin, "reset-lines", "--redis", url, "--type", "sms:send", "--yes").CombinedOutput()
	if err != nil {
		t.Fatalf("admin reset-lines: %v\n%s", err, out)
	}
	t.Logf("admin reset-lines: %s", strings.TrimSpace(string(out)))
	if m := regexp.MustCompile(`moved (\d+) parked tasks`).FindSubmatch(out); m == nil || string(m[1]) == "0" {
		t.Errorf("admin reset-lines moved no task parked by 0.1.0's workers: the test shows nothing of them")
	}
}

// enqueueEach runs the enqueue binary bin for each tenant: n SMS with IDs
// <tenant><tag>-1 ... -n, given no queue, and checks they went to queue.
// It returns the tenant of each task by ID.
func enqueueEach(t *testing.T, bin, url string, tenants []string, tag, queue string, n int) map[string]string {
	t.Helper()
	want := map[string]string{}
	printed := regexp.MustCompile(`^enqueued \d+ of \d+ sms tasks for tenant \S+ on queue (\S+)\n$`)
	for _, tenant := range tenants {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, bin, "sms", "--redis", url, "--tenant", tenant, "--to", "+15551234567",
			"--body", "hello", "--count", strconv.Itoa(n), "--id", tenant+tag).CombinedOutput()
		cancel()
		m := printed.FindStringSubmatch(string(out))
		if err != nil || m == nil {
			t.Fatalf("%s sms: %v\n%s", bin, err, out)
		}
		if m[1] != queue {
			t.Errorf("%s put tenant %s's SMS on queue %s, want %s", bin, tenant, m[1], queue)
		}
		for j := range n {
			want[fmt.Sprintf("%s%s-%d", tenant, tag, j+1)] = tenant
		}
	}
	return want
}
