package throttle

import (
	"context"
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/lua"
)

// Demand returns, for each priority from MostUrgent to LeastUrgent, the
// sum of the weights of the flows of class (a task type) in the lines'
// group that have tasks in line, ready or blocked: at most MaxFlows flows,
// the most urgent first, as Waiting. What the balancer reads of a group
// (lua/demand.lua); it only reads, one script call, and none of the share
// counts Waiting reads.
func (ls *Lines) Demand(ctx context.Context, class string) ([]float64, error) {
	if ls.l.err != nil {
		return nil, ls.l.err
	}
	fail := func(err error) ([]float64, error) {
		return nil, fmt.Errorf("throttle: read the demand of %s: %w", class, err)
	}
	s := ls.settings(ls.group())
	c := encodeKeyPart(class)
	reply, err := ls.scripts.Demand.Run(ctx, ls.l.rdb, s.Keys(s.ClassKeys(c)...), s.Args(c, MaxFlows)...).Slice()
	if err != nil {
		return fail(err)
	}
	if len(reply) != 4+LeastUrgent {
		return fail(fmt.Errorf("the script replied %d values", len(reply)))
	}
	out := make([]float64, LeastUrgent)
	for i := range out {
		text, _ := reply[4+i].(string)
		if out[i], err = strconv.ParseFloat(text, 64); err != nil {
			return fail(fmt.Errorf("weight %q", text))
		}
	}
	return out, nil
}

// PlacesDemand is what the first-come-first-served callers of a group
// want of one leased rule (lua/lease_demand.lua).
type PlacesDemand struct {
	Ahead int64 // places in line ahead of now in the group's log
	Asks  int64 // callers refused a place, counted since the lease was made: it only grows
}

// PlacesDemand reads, for each of rules in group g, its places ahead and
// its asks: what the balancer reads of a group where no fair lines run
// (docs/SCALING.md, "First come, first served over shards"). One script
// call; it only reads.
func (ls *Leases) PlacesDemand(ctx context.Context, rules []Check, g string) ([]PlacesDemand, error) {
	fail := func(err error) ([]PlacesDemand, error) {
		return nil, fmt.Errorf("throttle: read the places of group %s: %w", g, err)
	}
	keys := make([]string, 0, 2*len(rules))
	for _, c := range rules {
		k, err := ls.keys(c, g)
		if err != nil {
			return fail(err)
		}
		keys = append(keys, k.window, k.lease)
	}
	reply, err := lua.LeaseDemand.Run(ctx, ls.l.rdb, keys).Int64Slice()
	if err != nil {
		return fail(err)
	}
	if len(reply) != 2*len(rules) {
		return fail(fmt.Errorf("the script replied %d values for %d rules", len(reply), len(rules)))
	}
	out := make([]PlacesDemand, len(rules))
	for i := range out {
		out[i] = PlacesDemand{Ahead: reply[2*i], Asks: reply[2*i+1]}
	}
	return out, nil
}
