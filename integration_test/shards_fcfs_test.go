package integration_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestShardsFirstComeFirstServed: two cmd/worker processes serve three
// shards of the test cluster first come, first served (--fairness off,
// docs/SCALING.md, "First come, first served over shards"), while the
// demand moves from shard to shard: each phase enqueues SMS for three
// tenants of one shard, the next when two thirds of the last have
// arrived. Every task arrives once; the provider saw no window over a
// limit; the record of admissions holds none, the global rule's summed
// over the shards; each phase's shard sent more than a third of the
// global rule in some window, which it can only with shares moved from
// the others; and the shares sum to no more than the whole.
func TestShardsFirstComeFirstServed(t *testing.T) {
	addrs := redistest.ClusterAddrs(t)
	rdb := redistest.Cluster(t)
	url := "redis+cluster://" + addrs[0]
	enqueueBin, err := buildEnqueue()
	if err != nil {
		t.Fatal(err)
	}
	sink := newSMSSink(t)
	prefix := "sluice:" + redistest.Prefix(t)
	policyFile := movePolicies(t)
	three := layout.Layout{Shards: 3}
	procs := startWorkers(t, 2, "--redis", url, "--policies", policyFile, "--sms-webhook", sink.srv.URL,
		"--prefix", prefix, "--concurrency", "8", "--log-level", "debug", "--shards", "3", "--fairness", "off")
	waitFor(t, 20*time.Second, "the workers to write the layout", nil, func() bool {
		return rdb.Get(context.Background(), keyspace.LayoutKey(prefix)).Val() == three.String()
	})

	const perTenant = 10
	byShard := tenantsByShard(three, 3)
	want := map[string]string{}
	arrived := func(k, n int) func() bool { return sink.arrivedFor(byShard[k], n) }
	for k := range byShard {
		w, _ := enqueueByLayout(t, enqueueBin, url, prefix, three, byShard[k], perTenant)
		maps.Copy(want, w)
		if k < len(byShard)-1 {
			waitFor(t, 30*time.Second, fmt.Sprintf("two thirds of phase %d at the provider", k+1), sink.notified, arrived(k, 2*perTenant))
		}
	}
	waitFor(t, time.Minute, "every task at the provider", sink.notified, func() bool { return len(sink.delivered()) == len(want) })
	stopWorkers(t, procs...)

	rs := sink.receipts()
	checkDelivered(t, rs, want, nil)
	checkProviderWindows(t, rs, time.Second, moveTenantMax, moveGlobalMax)
	checkHistory(t, len(rs), procs...)
	checkShardsFollowed(t, rs, byShard)
	checkLeaseSum(t, rdb, prefix, policyFile, three)
}
