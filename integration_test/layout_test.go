package integration_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
)

// relayWindow is the window of TestLayoutChange's rules: 6 s, so that
// the change, which takes a second or two, falls within the windows it
// carries over (checked: a change that took longer would test nothing).
const relayWindow = 6 * time.Second

// TestLayoutChange: two cmd/worker processes on a Redis of the test's
// own drain a backlog on one shard; once a third has arrived they are
// stopped, admin layout --shards 3 changes the layout, and two new
// workers, given no --shards, run the three shards and the old queue
// too, which holds the tasks that were waiting. Every task arrives once,
// within its limits as the provider saw them, and the record of both
// generations of workers holds no window over: each tenant's windows and
// the global ones carried over the change. Each case binds one rule
// alone, so that a window not carried over would show.
func TestLayoutChange(t *testing.T) {
	for _, tc := range []struct {
		name string
		lim  limits // a window of relayWindow
		per  int    // tasks a tenant
	}{
		{"tenant windows", limits{tenant: 3, global: 100}, 5},
		{"global windows", limits{tenant: 100, global: 8}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) { layoutChange(t, tc.lim, tc.per) })
	}
}

// layoutChange is a case of TestLayoutChange: 6 tenants of perTenant SMS,
// under lim.
func layoutChange(t *testing.T, lim limits, perTenant int) {
	rdb := redistest.OwnClient(t, 0)
	ctx := context.Background()
	url := "redis://" + rdb.Options().Addr + "/0"
	enqueueBin, err := buildEnqueue()
	if err != nil {
		t.Fatal(err)
	}
	adminBin, err := buildAdmin()
	if err != nil {
		t.Fatal(err)
	}
	sink := newSMSSink(t)
	prefix := "sluice:"
	policyFile := writePolicies(t, fmt.Sprintf(`
margin: 50ms
tasks:
  sms:send:
    - { name: tenant, scope: tenant, limit: %d, window: %v }
    - { name: provider, scope: global, limit: %d, window: %v }
`, lim.tenant, relayWindow, lim.global, relayWindow))
	args := []string{"--redis", url, "--policies", policyFile, "--sms-webhook", sink.srv.URL,
		"--concurrency", "4", "--log-level", "debug"}
	first := startWorkers(t, 2, args...)
	waitFor(t, 20*time.Second, "the workers to write the layout", nil, func() bool {
		return rdb.Get(ctx, keyspace.LayoutKey(prefix)).Val() == "shards=1"
	})
	var tenants []string
	for i := range 6 {
		tenants = append(tenants, fmt.Sprintf("t%02d", i))
	}
	want, _ := enqueueByLayout(t, enqueueBin, url, prefix, layout.Layout{Shards: 1}, tenants, perTenant)
	waitFor(t, 30*time.Second, "a third of the tasks at the provider", sink.notified, func() bool {
		return len(sink.receipts()) >= len(want)/3
	})
	stopWorkers(t, first...)
	before := len(sink.receipts())
	out, err := exec.Command(adminBin, "layout", "--redis", url, "--policies", policyFile, "--shards", "3", "--yes").CombinedOutput()
	if err != nil {
		t.Fatalf("admin layout --shards 3: %v\n%s", err, out)
	}
	t.Logf("admin layout: %s", strings.TrimSpace(string(out)))
	second := startWorkers(t, 2, args...)
	waitFor(t, 30*time.Second, "the new workers to start", nil, func() bool {
		return strings.Contains(second[0].logs.String(), `"msg":"worker started"`) &&
			strings.Contains(second[1].logs.String(), `"msg":"worker started"`)
	})
	started := time.Now()
	waitFor(t, time.Minute, "every task at the provider", sink.notified, func() bool {
		return len(sink.delivered()) == len(want)
	})
	stopWorkers(t, second...)

	for _, p := range second {
		if logs := p.logs.String(); !strings.Contains(logs, `"shards":3`) || !strings.Contains(logs, "sms:send,") && !strings.Contains(logs, ",sms:send\"") {
			t.Errorf("a new worker does not run three shards and the old queue sms:send: %s", firstLine(logs))
		}
	}
	rs := sink.receipts()
	// The windows of the last sends before the change must still matter
	// when the new workers start, or the test proved nothing.
	took := started.Sub(rs[before-1].At)
	t.Logf("the new workers started %v after the last send before the change", took.Round(time.Millisecond))
	if took > relayWindow/2 {
		t.Errorf("the new workers started %v after the last send before the change, more than half the window: the windows it carried had nearly emptied", took.Round(time.Millisecond))
	}
	checkDelivered(t, rs, want, nil)
	checkProviderWindows(t, rs, relayWindow, lim.tenant, lim.global)
	checkHistory(t, len(rs), append(first, second...)...)
}

// firstLine returns the first line of text.
func firstLine(text string) string {
	line, _, _ := strings.Cut(text, "\n")
	return line
}
