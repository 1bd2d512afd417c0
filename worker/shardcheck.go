package worker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle"
)

// shardLayout returns the layout cfg runs, refusing one it cannot: more
// than one shard needs the queues' Redis, where the fair lines move
// tasks and first come, first served reads each shard's demand, and
// policies whose global rules can be leased, now and at every reload.
func shardLayout(cfg *ThrottleConfig, policyFile *policies.File) (layout.Layout, error) {
	lay := layout.Layout{Shards: max(cfg.Shards, 1)}
	if _, err := layout.Parse(lay.String()); err != nil {
		return lay, fmt.Errorf("worker: ThrottleConfig.Shards: %w", err)
	}
	if lay.Shards == 1 {
		return lay, nil
	}
	if cfg.QueueRedis == nil {
		return lay, fmt.Errorf("worker: %d shards need ThrottleConfig.QueueRedis, the queues' Redis, where each shard's demand is read (Server sets it)", lay.Shards)
	}
	if err := policyFile.Require(leasable); err != nil {
		return lay, fmt.Errorf("worker: policies %s, under layout %s: %w", policyFile.Current().Source(), lay, err)
	}
	return lay, nil
}

// leasable refuses policies that a layout of more than one shard cannot
// keep exact: an enforced global rule is leased to the shards, and only a
// sliding log's shares and a cap's slots can move (docs/SCALING.md,
// docs/INFLIGHT.md "Across shards").
func leasable(p *policies.Policies) error {
	for _, typ := range p.TaskTypes() {
		for _, r := range p.Rules(typ) {
			if r.Scope != policies.ScopeGlobal || r.Shadow {
				continue
			}
			if r.Policy.Algorithm != throttle.Concurrency && r.Policy.Algorithm.String() != throttle.SlidingLog.String() {
				return fmt.Errorf("%s rule %s: a global rule over more than one shard must be a sliding log (algorithm: %s) or a concurrency cap, not %s: only their shares can move between shards (docs/SCALING.md)",
					typ, r.Name, throttle.SlidingLog, r.Policy.Algorithm)
			}
		}
	}
	return nil
}

// shardQueues refuses queues that leave out a shard of a task type served:
// the producers put that shard's tasks there, and no worker would fetch
// them.
func shardQueues(l layout.Layout, queues map[string]int, served []string) error {
	var missing []string
	for _, t := range served {
		for _, q := range l.TypeQueues(t) {
			if _, ok := queues[q]; !ok {
				missing = append(missing, q)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return fmt.Errorf("worker: the queues leave out %s, where producers put the tasks of layout %s: serve them too, or leave the queues to the worker",
		strings.Join(missing, ", "), l)
}
