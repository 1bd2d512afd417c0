package worker

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle"
)

// On more than one shard a global rule is leased to the shards, and the
// leases follow demand (docs/SCALING.md, "Targets"): every worker tries to
// claim the balancing of each task type, and the one holding the claim
// steps that type's balancer every throttle.BalancePeriod.
const (
	// balanceClaim is how long a claim lasts unless renewed: a worker that
	// stops leaves the balancing to another this late.
	balanceClaim = time.Second
	// balanceStep bounds a step, a move's wait for a replica (500 ms)
	// included, well within the claim, which the next step renews.
	balanceStep = balanceClaim * 3 / 4
)

// runBalancers balances the leases of the policies' global rules until ctx
// ends or Stop is called.
func (t *Throttle) runBalancers(ctx context.Context) {
	holder := rand.Text() // unique per process
	var built *policies.Policies
	var balancers []*throttle.Balancer
	held := map[string]bool{} // the classes this worker balanced at its last step
	ticker := time.NewTicker(throttle.BalancePeriod)
	defer ticker.Stop()
	for {
		if cur := t.policies.Current(); cur != built {
			balancers, built = t.balancers(cur), cur
		}
		for _, b := range balancers {
			now := t.balance(ctx, b, holder, held[b.Class()])
			switch {
			case now && !held[b.Class()]:
				t.logger.Info("balancing the leases of a task type's global rules", "type", b.Class())
			case !now && held[b.Class()]:
				t.logger.Info("another worker balances the leases of a task type's global rules", "type", b.Class())
			}
			held[b.Class()] = now
		}
		select {
		case <-ctx.Done():
			return
		case <-t.stopping:
			return
		case <-ticker.C:
		}
	}
}

// balancers returns a Balancer for each task type of p with global rules
// that are enforced, over the type's shards.
func (t *Throttle) balancers(p *policies.Policies) []*throttle.Balancer {
	var out []*throttle.Balancer
	for _, typ := range p.TaskTypes() {
		var rules []throttle.Check
		adaptive := map[string]policies.Applied{} // by key
		for _, ap := range p.For(typ, "") {
			if ap.Shared && !ap.Shadow {
				rules = append(rules, ap.Check)
				if ap.Min > 0 {
					adaptive[ap.Check.Key] = ap
				}
			}
		}
		if len(rules) == 0 {
			continue
		}
		var demand throttle.DemandFunc // the lines'
		if t.fair == nil {
			demand = t.queueDemand(rules)
		}
		b, err := t.limiter.NewBalancer(typ, t.layout.Groups(typ), rules, demand)
		if err != nil {
			t.logger.Error("cannot balance the global rules of a task type: its shards keep the shares they have", "type", typ, "err", err)
			continue
		}
		if len(adaptive) > 0 {
			b.HoldTo(func(ctx context.Context, c throttle.Check) throttle.Check {
				if ap, ok := adaptive[c.Key]; ok {
					return t.limitInForce(ctx, t.limiter, ap)
				}
				return c
			})
		}
		out = append(out, b)
	}
	return out
}

// balance steps b if this worker holds, or can take, its claim, and
// reports whether it holds it: as it did (was) when Redis did not say.
func (t *Throttle) balance(ctx context.Context, b *throttle.Balancer, holder string, was bool) bool {
	ctx, cancel := context.WithTimeout(ctx, balanceStep)
	defer cancel()
	held, err := b.Claim(ctx, holder, balanceClaim)
	if err != nil {
		held = was
	}
	if err == nil && held {
		_, err = b.Step(ctx)
	}
	if err == nil {
		return held
	}
	t.logger.Debug("could not balance the global rules' leases", "err", err)
	if isDamage(err) {
		t.damage.note("the balancing of the global rules' leases", err)
	}
	return held
}

// queueDemand is what waits in a shard served first come, first served:
// the tasks of its queue (a shard's group is its queue, layout.Group),
// pending, active, or parked and due within the longest window of
// rules, where their places lie; each of weight 1 at the default
// priority. More than one shard needs the queues' Redis (shardLayout).
func (t *Throttle) queueDemand(rules []throttle.Check) throttle.DemandFunc {
	var ahead time.Duration
	for _, r := range rules {
		ahead = max(ahead, r.Policy.Window)
	}
	return func(ctx context.Context, group string) ([]float64, error) {
		w := make([]float64, throttle.LeastUrgent)
		n, err := backlog(ctx, t.queues, group, ahead+t.lead)
		w[throttle.DefaultPriority-1] = float64(n)
		return w, err
	}
}
