package worker_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/syncbuf"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// shardedPolicies: a provider's 10 a second shared by every tenant, over
// the shards, and 3 a second per tenant.
const shardedPolicies = `
tasks:
  sms:send:
    - name: provider
      scope: global
      limit: 10
      window: 1s
    - name: tenant
      scope: tenant
      limit: 3
      window: 1s
`

// TestShardsKeepTheGlobalLimit: a worker of three shards on a Redis of its
// own serves the shards' queues, which the producer fills by tenant; the
// global rule is leased over the shards, and the record of admissions,
// summed over them, never holds more than 10 in a second, while every
// shard admits. A worker asked for another layout is refused.
func TestShardsKeepTheGlobalLimit(t *testing.T) {
	t.Parallel()
	const tenants, each = 12, 5
	rdb := redistest.OwnClient(t, 40)
	prefix := keyspace.DefaultPrefix
	p, err := policies.Parse(t.Name(), []byte(shardedPolicies))
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sent := make(smsRecorder, tenants*each)
	three := layout.Layout{Shards: 3}
	srv, err := worker.NewServer(rdb, worker.Config{
		ThrottleConfig: worker.ThrottleConfig{Shards: three.Shards, Logger: logger, DelayedTaskCheckInterval: serverCheckInterval},
		Policies:       policies.Static(p), SMS: sent, Email: provider.LogProvider{},
		Prefix: prefix, ShutdownTimeout: 5 * time.Second, Concurrency: 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(append(append(three.Groups(producer.TypeEmail), three.Groups(producer.TypeSMS)...), layout.Legacy)))
	if got := srv.Queues(); !slices.Equal(got, want) {
		t.Fatalf("queues %v, want every shard's of both types and default: %v", got, want)
	}
	ctx := context.Background()
	if err := srv.CheckLayout(ctx); err != nil { // as Run does, before the producer reads it
		t.Fatal(err)
	}
	_, stop := testwait.RunServer(t, srv)
	defer stop()

	pc := producer.NewClientFromRedisClient(rdb, producer.WithPrefix(prefix))
	for i := range tenants * each {
		if _, err := pc.EnqueueSMS(ctx, fmt.Sprintf("tenant-%d", i%tenants), goodSMS); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{}
	for range tenants * each {
		m := testwait.Receive(t, sent, "an SMS")
		got[three.Group(producer.TypeSMS, m.Tenant)]++
	}
	t.Logf("sends by shard: %v", got)
	if len(got) != three.Shards {
		t.Errorf("sends came from %d shards, want %d: %v", len(got), three.Shards, got)
	}
	for _, g := range three.Groups(producer.TypeSMS) {
		if n := len(redistest.Keys(t, rdb, keyspace.Base(prefix, g))); n == 0 {
			t.Errorf("shard %s holds no key: its rules were not checked in its group", g)
		}
	}

	var h history.History
	if err := h.Read(strings.NewReader(logs.String())); err != nil {
		t.Fatal(err)
	}
	if h.Admissions() < tenants*each {
		t.Errorf("the record holds %d admissions, fewer than the %d sends", h.Admissions(), tenants*each)
	}
	overs, fullest := h.Check(5)
	for _, o := range overs {
		t.Errorf("the record holds %d entries of %s in (%d, %d] µs, over its limit of %d: %v", o.Held, o.Key, o.From, o.To, o.Limit, o.Tasks)
	}
	t.Logf("the fullest window of each log: %v", fullest)

	other, err := worker.NewServer(rdb, worker.Config{
		ThrottleConfig: worker.ThrottleConfig{Shards: 2, Logger: logger},
		Policies:       policies.Static(p), SMS: provider.LogProvider{}, Prefix: prefix,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.CheckLayout(ctx); err == nil || !strings.Contains(err.Error(), "shards=3") || !strings.Contains(err.Error(), "shards=2") {
		t.Errorf("a worker of 2 shards against a Redis of 3: %v, want an error naming both", err)
	}
}

// TestAllLines: a server gives the status page the lines of every shard,
// by group name; on one shard, its one lines.
func TestAllLines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() { rdb.Del(context.Background(), redistest.Keys(t, rdb, prefix)...) })
	p, err := policies.Parse(t.Name(), []byte(shardedPolicies))
	if err != nil {
		t.Fatal(err)
	}
	server := func(shards int) *worker.Server {
		srv, err := worker.NewServer(rdb, worker.Config{
			ThrottleConfig: worker.ThrottleConfig{Shards: shards},
			Policies:       policies.Static(p), SMS: provider.LogProvider{}, Prefix: prefix,
		})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	if one := server(1); !slices.Equal(one.AllLines(), []*throttle.Lines{one.Lines()}) || one.Lines() == nil {
		t.Errorf("one shard: AllLines %v, want Lines alone", one.AllLines())
	}

	three := layout.Layout{Shards: 3}
	all := server(three.Shards).AllLines()
	groups := slices.Sorted(slices.Values(three.Groups(producer.TypeSMS)))
	if len(all) != len(groups) {
		t.Fatalf("three shards: %d lines, want %d", len(all), len(groups))
	}
	// A flow waiting in one shard's group is in the lines of that rank.
	account := throttle.LineCheck{Check: throttle.Check{Key: "account", Policy: throttle.Policy{Limit: 1, Window: time.Hour}, Cost: 1}, Shared: true}
	shard := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)).InGroup(groups[1]).Lines(throttle.LinesConfig{})
	for i := range 2 {
		if _, err := shard.Arrive(ctx, throttle.Arrival{Class: producer.TypeSMS, Tenant: "acme", Weight: 1, Queue: groups[1],
			ID: fmt.Sprint("task-", i), Checks: []throttle.LineCheck{account}}); err != nil {
			t.Fatal(err)
		}
	}
	for i, ls := range all {
		flows, err := ls.Waiting(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(flows), map[bool]int{true: 1}[i == 1]; got != want {
			t.Errorf("lines %d (%s): %d waiting flows, want %d", i, groups[i], got, want)
		}
	}
}

// TestShardsNeedLeasableRules: a global rule over more than one shard
// must be a sliding log or a concurrency cap, adaptive or not; a worker
// refuses policies with another at start, and a reload to them keeps the
// policies in force.
func TestShardsNeedLeasableRules(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	leasable, err := policies.Parse(t.Name(), []byte(`
tasks:
  sms:send:
    - { name: provider, scope: global, limit: 200, window: 1s, adaptive: true }
    - { name: relay, scope: global, concurrency: 4, adaptive: true }
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := worker.NewServer(rdb, worker.Config{ThrottleConfig: worker.ThrottleConfig{Shards: 2}, Policies: policies.Static(leasable),
		SMS: provider.LogProvider{}, Email: provider.LogProvider{}}); err != nil {
		t.Errorf("NewServer with a global adaptive rate and cap over 2 shards: %v", err)
	}
	gcra := strings.Replace(shardedPolicies, "window: 1s\n    - name: tenant", "window: 1s\n      algorithm: gcra\n    - name: tenant", 1)
	p, err := policies.Parse(t.Name(), []byte(gcra))
	if err != nil {
		t.Fatal(err)
	}
	cfg := worker.Config{ThrottleConfig: worker.ThrottleConfig{Shards: 2}, Policies: policies.Static(p),
		SMS: provider.LogProvider{}, Email: provider.LogProvider{}}
	want := "sms:send rule provider: a global rule over more than one shard must be a sliding log"
	if _, err := worker.NewServer(rdb, cfg); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("NewServer with a GCRA global rule over 2 shards: %v, want %q", err, want)
	}

	path := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(path, []byte(shardedPolicies), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := policies.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Policies = f
	if _, err := worker.NewServer(rdb, cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(gcra), 0o644); err != nil {
		t.Fatal(err)
	}
	before := f.Current()
	if err := f.Reload(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a reload to a GCRA global rule: %v, want %q", err, want)
	}
	if f.Current() != before {
		t.Error("a reload the shards cannot keep exact replaced the policies")
	}
}

// TestBalancingHandsOver: the worker that balances a type's leases stops;
// another worker takes the balancing over once its claim lapses, and the
// shares follow the demand: tasks waiting in one shard alone get 9 of the
// global rule's 10 units.
func TestBalancingHandsOver(t *testing.T) {
	t.Parallel()
	rdb := redistest.OwnClient(t, 40)
	prefix := keyspace.DefaultPrefix
	ctx := context.Background()
	p, err := policies.Parse(t.Name(), []byte(strings.Replace(shardedPolicies, "limit: 3", "limit: 100", 1)))
	if err != nil {
		t.Fatal(err)
	}
	two := layout.Layout{Shards: 2}
	start := func() (*worker.Server, func()) {
		srv, err := worker.NewServer(rdb, worker.Config{
			ThrottleConfig: worker.ThrottleConfig{Shards: two.Shards, DelayedTaskCheckInterval: serverCheckInterval},
			Policies:       policies.Static(p), SMS: provider.LogProvider{}, Email: provider.LogProvider{},
			Prefix: prefix, ShutdownTimeout: 5 * time.Second, Concurrency: 10,
		})
		if err != nil {
			t.Fatal(err)
		}
		_, stop := testwait.RunServer(t, srv)
		return srv, stop
	}
	_, stopFirst := start()
	claim := keyspace.LinesBase(prefix) + "claim:balancer:" + producer.TypeSMS
	held := func() string { return rdb.Get(ctx, claim).Val() }
	testwait.Eventually(t, func() (bool, string) { return held() != "", "no worker balancing" })
	holder := held()
	_, stopSecond := start()
	defer stopSecond()
	stopFirst()

	// Demand in shard 1 alone: tenants whose shard it is.
	pc := producer.NewClientFromRedisClient(rdb, producer.WithPrefix(prefix))
	for i, n := 0, 0; n < 60; i++ {
		if tenant := fmt.Sprintf("t%d", i); two.Shard(tenant) == 1 {
			if _, err := pc.EnqueueSMS(ctx, tenant, goodSMS); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	rule := p.For(producer.TypeSMS, "")[0].Check
	leases := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)).Leases()
	testwait.Eventually(t, func() (bool, string) {
		lease, err := leases.Read(ctx, rule, two.Groups(producer.TypeSMS)[1])
		units := lease.Share * int64(rule.Policy.Limit) / throttle.LeaseParts
		return err == nil && units >= 9, fmt.Sprintf("shard 1's lease worth %d of 10 units (%v)", units, err)
	})
	if now := held(); now == "" || now == holder {
		t.Errorf("the claim is held by %q, want the second worker's, not the stopped one's (%q)", now, holder)
	}
}

// TestShardsWeighShares: two tenants of weights 1 and 2, in two shards of
// three, each with a backlog under a global rule of 30 a second, and no
// tenant rule that binds. Across shards a tenant's share is its shard's
// floor (a tenth of the rule spread over the shards: one unit each) and
// the rest by weight (docs/SCALING.md, "Targets"): 1 + 27/3 = 10 and
// 1 + 27 × 2/3 = 19 a second, a ratio of 1.9, where one Redis gives 2.
// Counted over 2 s once the shares have followed the demand, the ratio is
// within 1.5 to 2.3: weights ignored would give 1.
func TestShardsWeighShares(t *testing.T) {
	t.Parallel()
	light, heavy := tenantsOfShards(layout.Layout{Shards: 3})
	got := shardShares(t, fmt.Sprintf("weights: { %s: 2 }\n", heavy), map[string]int{light: 3, heavy: 3})
	ratio := float64(got[heavy]) / float64(max(got[light], 1))
	t.Logf("sends in 2 s: %s (weight 1) %d, %s (weight 2) %d: a ratio of %.2f", light, got[light], heavy, got[heavy], ratio)
	if got[light] == 0 || got[heavy] == 0 || ratio < 1.5 || ratio > 2.3 {
		t.Errorf("sends in 2 s %v: a ratio of %.2f, want 1.5 to 2.3 (1.9 by the targets)", got, ratio)
	}
}

// TestShardsKeepTheReserve: a backlog at priority 1 in one shard and one
// at priority 3 in another, under a global rule of 30 a second. The less
// urgent keep their reserve across shards: their shard's floor (one unit)
// and a tenth of the 27 units past the floors, 3.7 of the 29 the two
// shards use, about 13% (one Redis reserves them 10%); without the
// reserve they would have the floor alone, 1 in 29. Counted over 2 s, the
// less urgent get at least 9% of the sends and the urgent at least 80%.
func TestShardsKeepTheReserve(t *testing.T) {
	t.Parallel()
	urgent, later := tenantsOfShards(layout.Layout{Shards: 3})
	got := shardShares(t, "", map[string]int{urgent: 1, later: 3})
	all := float64(got[urgent] + got[later])
	t.Logf("sends in 2 s: %s (priority 1) %d, %s (priority 3) %d: %.0f%% to the less urgent", urgent, got[urgent], later, got[later], 100*float64(got[later])/all)
	if all == 0 || float64(got[later]) < 0.09*all || float64(got[urgent]) < 0.8*all {
		t.Errorf("sends in 2 s %v: want at least 9%% to priority 3 and 80%% to priority 1", got)
	}
}

// tenantsOfShards returns a tenant of shard 0 and one of shard 1 of l.
func tenantsOfShards(l layout.Layout) (string, string) {
	var a, b string
	for i := 0; a == "" || b == ""; i++ {
		switch name := fmt.Sprintf("t%d", i); l.Shard(name) {
		case 0:
			a = cmp.Or(a, name)
		case 1:
			b = cmp.Or(b, name)
		}
	}
	return a, b
}

// shardShares runs a worker of three shards on a Redis of its own, with
// the policies head (weights) and a global rule of 30 a second, a backlog
// of 150 SMS for each tenant of priority (tenant -> its priority), and
// counts each tenant's sends over 2 s, once 60 have gone and the shares
// have followed the demand.
func shardShares(t *testing.T, head string, priority map[string]int) map[string]int {
	t.Helper()
	p, err := policies.Parse(t.Name(), []byte(head+`
tasks:
  sms:send:
    - { name: provider, scope: global, limit: 30, window: 1s }
    - { name: tenant, scope: tenant, limit: 1000, window: 1s }
`))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redistest.OwnClient(t, 40)
	const each = 150
	sent := make(smsRecorder, len(priority)*each)
	srv, err := worker.NewServer(rdb, worker.Config{
		ThrottleConfig: worker.ThrottleConfig{Shards: 3, DelayedTaskCheckInterval: serverCheckInterval},
		Policies:       policies.Static(p), SMS: sent, Email: provider.LogProvider{},
		ShutdownTimeout: 5 * time.Second, Concurrency: 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.CheckLayout(ctx); err != nil {
		t.Fatal(err)
	}
	pc := producer.NewClientFromRedisClient(rdb)
	for range each {
		for tenant, prio := range priority {
			if _, err := pc.EnqueueSMS(ctx, tenant, goodSMS, producer.Priority(prio)); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, stop := testwait.RunServer(t, srv)
	defer stop()
	for range 60 {
		testwait.Receive(t, sent, "an SMS")
	}
	got := map[string]int{}
	for end := time.After(2 * time.Second); ; {
		select {
		case m := <-sent:
			got[m.Tenant]++
			continue
		case <-end:
		}
		return got
	}
}

// TestShardsNeedTheQueues: a Throttle of more than one shard without the
// queues' Redis, where each shard's demand is read, is refused, whatever
// its fairness; one shard needs none.
func TestShardsNeedTheQueues(t *testing.T) {
	t.Parallel()
	p, err := policies.Parse("policies.yaml", []byte("tasks:\n  sms:send:\n    - { name: provider, scope: global, limit: 5, window: 1s }\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := throttle.NewLimiter(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	for _, fairness := range []worker.Fairness{worker.FairnessOn, worker.FairnessOff} {
		_, err := worker.NewThrottle(l, policies.Static(p), &worker.ThrottleConfig{Shards: 2, Fairness: fairness})
		if want := "worker: 2 shards need ThrottleConfig.QueueRedis"; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("fairness %d, 2 shards, no QueueRedis: %v; want %q...", fairness, err, want)
		}
	}
	if _, err := worker.NewThrottle(l, policies.Static(p), &worker.ThrottleConfig{Shards: 1}); err != nil {
		t.Errorf("one shard, no QueueRedis: %v", err)
	}
}
