package policies

import (
	"context"
	"fmt"
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

// Relayout moves the windows and fair lines of p's task types under
// prefix from layout from to layout to (docs/SCALING.md, "Changing the
// layout"), with no worker running: the lines of every old group are
// reset (their tasks stay parked: the caller runs them); each tenant
// rule's windows move to the tenant's group under to; each global rule's
// logs of the old shards are merged into the pool's log (the default
// group's), where its windows carry over, and its leases are dropped, to
// be opened again from the pool. Rules in shadow mode stay in the default
// group whatever the layout. A key too long to be decoded stops it before
// it changes anything.
func Relayout(ctx context.Context, rdb redis.UniversalClient, prefix string, p *Policies, from, to layout.Layout) (Relaid, error) {
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
	for _, typ := range p.TaskTypes() {
		for _, g := range from.Groups(typ) {
			if _, hashed, err := group(g).Keys(ctx, ""); err != nil {
				return Relaid{}, err
			} else if len(hashed) > 0 {
				return Relaid{}, fmt.Errorf("policies: group %s holds %d keys too long to place in a new layout (such as %s): reset them first", g, len(hashed), hashed[0])
			}
		}
	}
	var out Relaid
	for _, typ := range p.TaskTypes() {
		// The lines first: their reset takes their grants' places out of
		// the logs.
		for _, g := range from.Groups(typ) {
			cl, err := group(g).Lines(throttle.LinesConfig{}).ResetLines(ctx, typ)
			if err != nil {
				return out, err
			}
			out.Parked = append(out.Parked, cl.Parked()...)
		}
		for _, r := range p.Rules(typ) {
			if r.Shadow {
				continue
			}
			var err error
			if r.Scope == ScopeGlobal {
				err = relayGlobal(ctx, base, group, typ, r, from, &out)
			} else {
				err = relayTenant(ctx, group, typ, r, from, to, &out)
			}
			if err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// relayTenant moves the windows of tenant rule r of typ from the groups of
// from to their tenants' groups under to.
func relayTenant(ctx context.Context, group func(string) *throttle.Limiter, typ string, r Rule, from, to layout.Layout, out *Relaid) error {
	head := ruleKey(typ, r.Name) + "/"
	for _, g := range from.Groups(typ) {
		keys, _, err := group(g).Keys(ctx, head)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := group(g).MoveTo(ctx, k, group(to.Group(typ, strings.TrimPrefix(k, head)))); err != nil {
				return err
			}
			out.Moved++
		}
	}
	return nil
}

// relayGlobal merges the logs of global rule r of typ in the shards of
// from into the pool's, and drops its leases.
func relayGlobal(ctx context.Context, base *throttle.Limiter, group func(string) *throttle.Limiter, typ string, r Rule, from layout.Layout, out *Relaid) error {
	key := ruleKey(typ, r.Name)
	if from.Shards > 1 {
		for _, g := range from.Groups(typ) {
			n, err := group(g).MergeLogInto(ctx, key, base)
			if err != nil {
				return err
			}
			out.Merged += n
		}
	}
	return base.Leases().Drop(ctx, key, throttle.DefaultGroup)
}
