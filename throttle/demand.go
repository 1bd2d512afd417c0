package throttle

import (
	"context"
	"fmt"
	"strconv"
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
