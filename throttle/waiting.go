package throttle

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// WaitingFlow is a flow of the fair lines with tasks waiting: what the
// status page shows of it, and what a policies reload gives new rules
// (Refresh).
type WaitingFlow struct {
	Flow
	InLine int     // tasks in its line, not yet given a slot
	Weight float64 // the tenant's weight, as its last task brought it
	// Grants is how many slots the tenant was given in the class over the
	// last one to two ShareSpans, at any priority: its share of the
	// class's shared rules while it waits.
	Grants int
}

// ShareSpan is the span in which the fair lines count each tenant's
// grants, for WaitingFlow.Grants: shareSpan in lua/lines_base.lua, which Waiting
// checks.
const ShareSpan = 5 * time.Second

// Waiting returns the flows of the lines' group that have tasks waiting,
// at most most of them (at most MaxFlows), with their lines and recent
// grants. It only reads: the classes that wait, then one script call, given
// their keys, whose Redis time grows with most: a page that shows them
// should ask for a few hundred.
func (ls *Lines) Waiting(ctx context.Context, most int) ([]WaitingFlow, error) {
	if ls.l.err != nil {
		return nil, ls.l.err
	}
	fail := func(err error) ([]WaitingFlow, error) {
		return nil, fmt.Errorf("throttle: read the waiting flows: %w", err)
	}
	group := ls.group()
	most = min(max(most, 1), MaxFlows)
	s := ls.settings(group)
	classes, err := ls.l.rdb.ZRange(ctx, s.Base+"qw", 0, -1).Result()
	if err != nil {
		return fail(err)
	}
	var keys []string
	args := []any{most}
	for _, c := range classes {
		keys = append(keys, s.ClassKeys(c)...)
		args = append(args, c)
	}
	reply, err := ls.scripts.Waiting.Run(ctx, ls.l.rdb, s.Keys(keys...), s.Args(args...)...).Slice()
	if err != nil {
		return fail(err)
	}
	if len(reply) < 4 {
		return fail(fmt.Errorf("the script replied %d values", len(reply)))
	}
	if span, _ := reply[3].(int64); span != ShareSpan.Microseconds() {
		return fail(fmt.Errorf("the script counts grants in spans of %dus, not ShareSpan", span))
	}
	var out []WaitingFlow
	for i := 4; i+5 < len(reply); i += 6 {
		c, _ := reply[i].(string)
		l, _ := reply[i+1].(string)
		tn, _ := reply[i+2].(string)
		inLine, _ := reply[i+3].(int64)
		w, _ := reply[i+4].(string)
		grants, _ := reply[i+5].(int64)
		p, err := strconv.Atoi(l)
		if err != nil {
			return fail(fmt.Errorf("priority %q", l))
		}
		weight, err := strconv.ParseFloat(w, 64)
		if err != nil {
			return fail(fmt.Errorf("weight %q", w))
		}
		out = append(out, WaitingFlow{Flow: Flow{Class: c, Priority: p, Tenant: tn}, InLine: int(inLine), Weight: weight, Grants: int(grants)})
	}
	return out, nil
}
