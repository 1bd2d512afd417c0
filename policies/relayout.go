package policies

import (
	"context"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/throttle"
)

// Relaid is what Relayout moved.
type Relaid struct {
	Moved  int              // tenant windows moved to their tenant's new group
	Merged int              // entries of the old shards' global logs merged into the pool's
	Parked []throttle.Grant // tasks the old lines held, still parked in asynq
}

// Relayout moves the windows and fair lines of the task types under
// prefix from layout from to layout to (docs/SCALING.md, "Changing the
// layout"), with no worker running: the lines of every old group are
// reset (their tasks stay parked: the caller runs them); each tenant
// rule's windows move to the tenant's group under to; each global rule's
// logs of the old shards are merged into the pool's log (the default
// group's), where its windows carry over, and its leases are dropped, to
// be opened again from the pool. The rules are those whose keys Redis
// holds, "rule/<type>/<name>[/<tenant>]", whether p has them or not; a
// rule p has in shadow mode stays in the default group whatever the
// layout. types are the task types of the groups to look in, p's too.
// Every step can run again.
func Relayout(ctx context.Context, rdb redis.UniversalClient, prefix string, p *Policies, types []string, from, to layout.Layout) (Relaid, error) {
	if from.Shards <= 1 && to.Shards <= 1 {
		return Relaid{}, nil // one group before and after: nothing moves
	}
	base := limiter(rdb, prefix)
	group := func(g string) *throttle.Limiter {
		if g == throttle.DefaultGroup {
			return base
		}
		return base.InGroup(g)
	}
	types = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(types), p.TaskTypes()...))))
	var out Relaid
	for _, typ := range types {
		// The lines first: their reset takes their grants' places out of
		// the logs.
		for _, g := range from.Groups(typ) {
			cl, err := group(g).Lines(throttle.LinesConfig{}).ResetLines(ctx, typ)
			out.Parked = append(out.Parked, cl.Parked()...)
			if err != nil {
				return out, err
			}
		}
		globals := map[string]bool{}
		for _, r := range p.Rules(typ) {
			globals[r.Name] = r.Scope == ScopeGlobal && !r.Shadow
		}
		for _, g := range from.Groups(typ) {
			if err := relayGroup(ctx, base, group, p, typ, g, from, to, globals, &out); err != nil {
				return out, err
			}
		}
		if err := dropLeases(ctx, base, typ, globals, from, to); err != nil {
			return out, err
		}
	}
	return out, nil
}

// dropLeases drops the leases of the global rules of typ (those of
// globals set) in the pool and every group of from and to, whose names
// may be the same: the shares start again from the pool.
func dropLeases(ctx context.Context, base *throttle.Limiter, typ string, globals map[string]bool, from, to layout.Layout) error {
	groups := append(append([]string{throttle.DefaultGroup}, from.Groups(typ)...), to.Groups(typ)...)
	groups = slices.Compact(slices.Sorted(slices.Values(groups)))
	for name, global := range globals {
		if !global {
			continue
		}
		for _, g := range groups {
			if err := base.Leases().Drop(ctx, ruleKey(typ, name), g); err != nil {
				return err
			}
		}
	}
	return nil
}

// relayGroup moves the rule keys of typ that group g of from holds: a
// tenant rule's to its tenant's group under to, a global rule's log into
// the pool's (on more than one shard), and sets each global rule found in
// globals.
func relayGroup(ctx context.Context, base *throttle.Limiter, group func(string) *throttle.Limiter, p *Policies,
	typ, g string, from, to layout.Layout, globals map[string]bool, out *Relaid) error {
	head := ruleKey(typ, "")
	keys, err := group(g).Keys(ctx, head)
	if err != nil {
		return err
	}
	for _, k := range keys {
		name, tenant, isTenant := strings.Cut(strings.TrimPrefix(k, head), "/")
		if shadow(p, typ, name) {
			continue
		}
		if !isTenant {
			globals[name] = true
			if from.Shards > 1 {
				n, err := group(g).MergeLogInto(ctx, k, base)
				if err != nil {
					return err
				}
				out.Merged += n
			}
			continue
		}
		if dst := to.Group(typ, tenant); dst != g {
			if err := group(g).MoveTo(ctx, k, group(dst)); err != nil {
				return err
			}
			out.Moved++
		}
	}
	return nil
}

// shadow reports whether p has rule name of taskType in shadow mode.
func shadow(p *Policies, taskType, name string) bool {
	for _, r := range p.Rules(taskType) {
		if r.Name == name {
			return r.Shadow
		}
	}
	return false
}
