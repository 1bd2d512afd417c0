package policies

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/throttle"
)

// shards are the limiter groups where the workers keep their windows and
// fair lines: the one default group on one shard, one group a task type
// and shard on more (docs/SCALING.md, "Shards and their names").
type shards struct {
	layout layout.Layout
	base   *throttle.Limiter // the workers' limiter, of the default group
}

// readShards reads the layout of the workers whose Redis is rdb and whose
// keys start with prefix ("" for throttle.DefaultPrefix); a Redis that
// names none has one group, as in Sluice 0.x.
func readShards(ctx context.Context, rdb redis.UniversalClient, prefix string) (shards, error) {
	if prefix == "" {
		prefix = throttle.DefaultPrefix
	}
	l, _, err := layout.Read(ctx, rdb, prefix)
	if err != nil {
		return shards{}, err
	}
	return shards{layout: l, base: limiter(rdb, prefix)}, nil
}

// sharded reports whether the layout has more than one shard.
func (s shards) sharded() bool { return s.layout.Shards > 1 }

// limiter returns the limiter of group g: the workers' own, as they make
// it, for the default group and on one shard.
func (s shards) limiter(g string) *throttle.Limiter {
	if !s.sharded() || g == throttle.DefaultGroup {
		return s.base
	}
	return s.base.InGroup(g)
}

// logs returns the groups whose logs hold w's window. On more than one
// shard: a tenant rule's is its tenant's shard; a global rule has one in
// each shard, and the pool's (the default group), which holds the windows
// carried over from one shard (docs/SCALING.md, "Where shares come from").
// A rule in shadow mode stays in the default group whatever the layout:
// the workers check it on its own, with their limiter of that group.
func (s shards) logs(w RuleWindow) []string {
	switch {
	case !s.sharded() || w.Shadow:
		return []string{throttle.DefaultGroup}
	case w.Scope == ScopeGlobal:
		return append([]string{throttle.DefaultGroup}, s.layout.Groups(w.TaskType)...)
	}
	return []string{s.layout.Group(w.TaskType, w.Tenant)}
}

// in names group g in an error on more than one shard, where it says which
// shard failed; "" on one.
func (s shards) in(g string) string {
	if !s.sharded() {
		return ""
	}
	return " in group " + g
}
