package worker

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
)

// lateShare says when a send counts as late: after this share of the
// smallest margin of its log rules has passed since its admission, leaving
// the rest of the margin for the way to the provider.
const lateShare = 2 // half the margin

// lateAfter returns how long after its admission a task of these rules may
// still be sent as admitted; 0 when no log rule has a margin to cover it.
func lateAfter(applied []policies.Applied) time.Duration {
	var least time.Duration
	for _, a := range applied {
		if a.Margin > 0 && a.Check.Policy.Algorithm.String() == throttle.SlidingLog.String() && (least == 0 || a.Margin < least) {
			least = a.Margin
		}
	}
	return least / lateShare
}

// fresh lets a task admitted by the fair lines go, or restamps its
// admission first when it is late: admitted is the earliest local time the
// admission can have been made (the call's start, plus the wait for its
// place), so the lateness is never underestimated. A task that cannot be
// restamped is not sent: it comes back through the retry set, its slot
// spent and its retry budget not (docs/FAIRNESS.md, "A late send is
// stamped again").
func (t *Throttle) fresh(ctx context.Context, f *fairLines, id string, applied []policies.Applied, checks []throttle.LineCheck, admitted time.Time) error {
	limit := lateAfter(applied)
	late := time.Since(admitted)
	if limit == 0 || late <= limit {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	at, moved, err := f.lines.Restamp(rctx, id, checks, late)
	err = timedOut(rctx, err)
	cancel()
	switch {
	case err != nil && t.mode == throttle.FailOpen && ctx.Err() == nil:
		t.logger.Warn("could not restamp a late send; sending it as admitted (fail-open)", "task", id, "late", late, "err", err)
		return nil
	case err != nil:
		return &provider.ThrottledError{RetryAfter: t.backoff, By: "late send not restamped", Err: err}
	case !moved:
		t.logger.Warn("a send too late after its admission to restamp comes back", "task", id, "late", late)
		return &provider.ThrottledError{RetryAfter: t.backoff, By: "late send"}
	}
	recordRestamp(t.logger, id, late, at)
	return nil
}
