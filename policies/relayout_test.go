package policies_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/policies"
)

// usageOf returns Usage of tenant's windows as "rule used+inline of
// limit, remaining left", and as Usage returns them.
func usageOf(t *testing.T, s *sharded, tenant string) ([]string, []policies.RuleUsage) {
	t.Helper()
	us, err := policies.Usage(context.Background(), s.rdb, s.prefix, s.p, "sms:send", tenant)
	if err != nil {
		t.Fatalf("Usage(%s): %v", tenant, err)
	}
	var out []string
	for _, u := range us {
		out = append(out, fmt.Sprintf("%s %d+%d of %d, %d left", u.Rule, u.Used, u.InLine, u.Limit, u.Remaining))
	}
	return out, us
}

// TestRelayout: from three shards to one and back, and to two (whose
// groups share names with three's) and back, as admin layout does it,
// every window carries over: each tenant's own in its tenant's group,
// each global rule's summed over the old shards into the pool's log; the
// old groups keep no key, no lease is left to be opened again, and a
// change run twice (stopped midway, then run again) moves nothing more.
func TestRelayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSharded(t)
	want := map[string][]string{
		s.a: {"per-tenant 2+0 of 5, 3 left", "provider 6+0 of 10, 4 left", "burst 4+0 of 4, 0 left"},
		s.b: {"per-tenant 3+0 of 5, 2 left", "provider 6+0 of 10, 4 left", "burst 4+0 of 4, 0 left"},
	}
	one, two := layout.Layout{Shards: 1}, layout.Layout{Shards: 2}
	for _, step := range []struct{ from, to layout.Layout }{{s.layout, one}, {one, s.layout}, {s.layout, two}, {two, s.layout}} {
		if err := layout.Begin(ctx, s.rdb, s.prefix, step.from, step.to); err != nil {
			t.Fatal(err)
		}
		got, err := policies.Relayout(ctx, s.rdb, s.prefix, s.p, nil, step.from, step.to)
		if err != nil {
			t.Fatalf("%s to %s: %v", step.from, step.to, err)
		}
		if again, err := policies.Relayout(ctx, s.rdb, s.prefix, s.p, nil, step.from, step.to); err != nil || again.Moved+again.Merged > 0 {
			t.Errorf("%s to %s run again: %+v, %v; want nothing more moved", step.from, step.to, again, err)
		}
		if err := layout.Finish(ctx, s.rdb, s.prefix, step.from, step.to); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s to %s: %d tenant windows moved, %d global entries merged", step.from, step.to, got.Moved, got.Merged)
		for _, tenant := range []string{s.a, s.b} {
			if got, _ := usageOf(t, s, tenant); !cmp.Equal(want[tenant], got) {
				diff := cmp.Diff(want[tenant], got)
				t.Errorf("after %s to %s, usage of %s (-want +got):\n%s", step.from, step.to, tenant, diff)
			}
		}
		// The old shards keep nothing; the default group keeps the
		// global logs (the pool's) and the markers, no tenant's window.
		for _, k := range redistest.Keys(t, s.rdb, s.prefix) {
			for _, g := range step.from.Groups("sms:send") {
				if slices.Contains(step.to.Groups("sms:send"), g) {
					continue // a group of both layouts
				}
				if strings.Contains(k, "{"+g+"}") && step.from.Shards > 1 || strings.Contains(k, "{"+g+"}:rule/sms:send/per-tenant/") && step.to.Shards > 1 {
					t.Errorf("after %s to %s, the old group %s keeps %s", step.from, step.to, g, k)
				}
			}
		}
		if leases := leaseSnapshot(t, s.rdb, s.prefix); len(leases) > 0 {
			t.Errorf("after %s to %s, leases left: %v", step.from, step.to, leases)
		}
	}
	if l, _, err := layout.Read(ctx, s.rdb, s.prefix); err != nil || l != s.layout {
		t.Errorf("the layout after the changes: %v, %v; want %v", l, err, s.layout)
	}
	if d, err := layout.Draining(ctx, s.rdb, s.prefix); err != nil || len(d) != 2 || d[0] != one || d[1] != two {
		t.Errorf("the draining layouts: %v, %v; want %v and %v", d, err, one, two)
	}
}
