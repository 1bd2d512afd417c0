package policies_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle"
)

// shardedPolicies: a tenant rule, and two global rules split over the
// shards.
const shardedPolicies = `
margin: 0s
tasks:
  sms:send:
    - {name: per-tenant, scope: tenant, limit: 5, window: 1h}
    - {name: provider, scope: global, limit: 10, window: 1h}
    - {name: burst, scope: global, limit: 4, window: 1h}
`

// tenantsApart returns two tenants whose tasks of taskType are in other
// shards of l.
func tenantsApart(t *testing.T, l layout.Layout, taskType string) (a, b string) {
	t.Helper()
	a = "acme"
	for i := range 100 {
		b = fmt.Sprint("tenant-", i)
		if l.Group(taskType, b) != l.Group(taskType, a) {
			return a, b
		}
	}
	t.Fatal("no tenant outside acme's shard")
	return "", ""
}

// sharded is a Redis of three shards under a prefix of its own, with
// windows of shardedPolicies in two tenants' shards.
type sharded struct {
	rdb    *redis.Client
	prefix string
	layout layout.Layout
	p      *policies.Policies
	base   *throttle.Limiter
	a, b   string // tenants of two shards
	ga, gb string // their groups
}

// newSharded admits, as the workers do, 2 tasks of a and 3 of b in their
// shards, 2 of each in burst, and one of the provider carried over in the
// pool's log; and gives a's and b's shards leases, which no reset may
// touch.
func newSharded(t *testing.T) *sharded {
	t.Helper()
	ctx := context.Background()
	s := &sharded{rdb: redistest.Client(t), prefix: redistest.Prefix(t), layout: layout.Layout{Shards: 3}, p: parsePolicies(t, shardedPolicies)}
	t.Cleanup(func() {
		if keys := redistest.Keys(t, s.rdb, s.prefix); len(keys) > 0 {
			_ = s.rdb.Del(context.Background(), keys...).Err()
		}
	})
	if err := layout.Ensure(ctx, s.rdb, s.prefix, s.layout); err != nil {
		t.Fatal(err)
	}
	s.base = throttle.NewLimiter(s.rdb, throttle.WithPrefix(s.prefix))
	s.a, s.b = tenantsApart(t, s.layout, "sms:send")
	s.ga, s.gb = s.layout.Group("sms:send", s.a), s.layout.Group("sms:send", s.b)
	for _, x := range []struct {
		tenant, group string
		n             int
	}{{s.a, s.ga, 2}, {s.b, s.gb, 3}} {
		l := s.base.InGroup(x.group)
		s.admit(t, l, x.tenant, "per-tenant", x.n)
		s.admit(t, l, x.tenant, "provider", x.n)
		s.admit(t, l, x.tenant, "burst", 2)
	}
	s.admit(t, s.base, s.a, "provider", 1)
	leases := s.base.Leases()
	for _, rule := range []string{"provider", "burst"} {
		w, err := policies.GlobalWindow(s.p, "sms:send", rule)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leases.Open(ctx, w.Check()); err != nil {
			t.Fatal(err)
		}
		for _, g := range []string{s.ga, s.gb} {
			if _, err := leases.Move(ctx, w.Check(), throttle.DefaultGroup, g, throttle.LeaseParts/3); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s
}

// admit admits n tasks of tenant in the window of rule through l.
func (s *sharded) admit(t *testing.T, l *throttle.Limiter, tenant, rule string, n int) {
	t.Helper()
	for _, ap := range s.p.For("sms:send", tenant) {
		for i := 0; ap.Rule == rule && i < n; i++ {
			if d, err := l.AllowN(context.Background(), ap.Check.Key, ap.Check.Policy, 1); err != nil || !d.Allowed {
				t.Fatalf("AllowN %s of %s: %+v, %v", rule, tenant, d, err)
			}
		}
	}
}

// usage returns Usage of tenant's windows as "rule used+inline of limit,
// remaining left", and checks that NextFree agrees with Remaining.
func (s *sharded) usage(t *testing.T, tenant string) []string {
	t.Helper()
	out, us := usageOf(t, s, tenant)
	for _, u := range us {
		if full := u.Remaining == 0; full != (u.NextFree > 0) {
			t.Errorf("%s of %s: Remaining %d and NextFree %v", u.Rule, tenant, u.Remaining, u.NextFree)
		}
		if u.Rule == "burst" && (u.NextFree < 59*time.Minute || u.NextFree != u.EmptyIn) {
			t.Errorf("burst, full: NextFree %v, EmptyIn %v, want both the window's end", u.NextFree, u.EmptyIn)
		}
	}
	return out
}

// woken returns a channel that receives when the lines of group g are
// woken.
func (s *sharded) woken(t *testing.T, g string) <-chan struct{} {
	t.Helper()
	ch, stop, err := s.base.InGroup(g).Lines(throttle.LinesConfig{}).Wakeups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return ch
}

// waitWoken fails t unless ch receives within 5 s.
func waitWoken(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Errorf("%s were not woken", what)
	}
}

// TestShardedWindows: on three shards, Usage reads a tenant rule in its
// tenant's shard and sums a global rule over the shards and the pool;
// ResetTenant empties the tenant's shard alone and wakes its lines;
// ResetGlobal empties every shard's log and the pool's, wakes every
// shard's lines, and leaves the leases as they were.
func TestShardedWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSharded(t)
	a, b := s.a, s.b
	leases := leaseSnapshot(t, s.rdb, s.prefix)
	if len(leases) < 6 {
		t.Fatalf("lease keys %v, want the pool's and two shards' of two rules", leases)
	}
	want := map[string][]string{
		a: {"per-tenant 2+0 of 5, 3 left", "provider 6+0 of 10, 4 left", "burst 4+0 of 4, 0 left"},
		b: {"per-tenant 3+0 of 5, 2 left", "provider 6+0 of 10, 4 left", "burst 4+0 of 4, 0 left"},
	}
	check := func(when string) {
		t.Helper()
		for _, tenant := range []string{a, b} {
			if diff := cmp.Diff(want[tenant], s.usage(t, tenant)); diff != "" {
				t.Errorf("%s, usage of %s (-want +got):\n%s", when, tenant, diff)
			}
		}
	}
	check("at first")

	wa := s.woken(t, s.ga)
	if _, _, err := policies.ResetTenant(ctx, s.rdb, s.prefix, s.p, "sms:send", "per-tenant", a); err != nil {
		t.Fatal(err)
	}
	waitWoken(t, wa, "the lines of "+a+"'s shard")
	want[a][0] = "per-tenant 0+0 of 5, 5 left"
	check("after ResetTenant(" + a + ")")

	groups := s.layout.Groups("sms:send")
	var ws []<-chan struct{}
	for _, g := range groups {
		ws = append(ws, s.woken(t, g))
	}
	if _, err := policies.ResetGlobal(ctx, s.rdb, s.prefix, s.p, "sms:send", "provider"); err != nil {
		t.Fatal(err)
	}
	for i, ch := range ws {
		waitWoken(t, ch, "the lines of shard "+groups[i])
	}
	want[a][1], want[b][1] = "provider 0+0 of 10, 10 left", "provider 0+0 of 10, 10 left"
	check("after ResetGlobal")
	if diff := cmp.Diff(leases, leaseSnapshot(t, s.rdb, s.prefix)); diff != "" {
		t.Errorf("the leases changed (-before +after):\n%s", diff)
	}
}

// leaseSnapshot returns what every lease key under prefix holds: the
// shares (e:) and the moves taken (E:).
func leaseSnapshot(t *testing.T, rdb redis.UniversalClient, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, k := range redistest.Keys(t, rdb, prefix) {
		switch {
		case strings.Contains(k, "}e:"):
			out[k] = fmt.Sprint(rdb.HGetAll(ctx, k).Val())
		case strings.Contains(k, "}E:"):
			out[k] = fmt.Sprint(rdb.ZRangeWithScores(ctx, k, 0, -1).Val())
		}
	}
	return out
}
