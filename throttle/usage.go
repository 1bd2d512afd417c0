package throttle

import (
	"context"
	"time"
)

// Usage is how much of one key's window is used now, and how many places in
// line it holds: what Limiter.Usage reports. Every figure is of one instant
// of the Redis clock.
//
// With PerSecond(4), three units admitted in the last second and nothing in
// line, Used is 3, InLine 0, Remaining 1 and RetryAfter 0. After a burst of
// 20 callers through AllowInLine, 4 admitted and 16 placed in line one
// freed slot after another (4 places in each of the next four seconds),
// Used is 4, InLine 16, InLineSoon 4, Remaining 0, and RetryAfter about
// 5 s: a new caller would come after the 16, in the fifth second.
type Usage struct {
	// Limit is the policy's Limit: the most units admitted in any Window.
	Limit int

	// Used is the number of units admitted in the window now: with the
	// sliding log, the units admitted in the last Window (places in line
	// not included); with the other algorithms, the algorithm's own count
	// (see Algorithm), as Decision.Count.
	Used int

	// InLine is the number of places in line the key holds: units reserved
	// by AllowInLine for denied callers, at times after now, each of which
	// counts against the limit from its time on. Only the sliding log
	// reserves places; 0 with the other algorithms.
	InLine int

	// InLineSoon is how many of InLine are at most one Window after now:
	// the places that share a window with a unit admitted now. Places
	// further ahead leave room now.
	InLineSoon int

	// Remaining is how many more units fit now, at least: 0 exactly when
	// RetryAfter is not (none fits now); otherwise Limit less Used and
	// InLineSoon, and at least 1. Limit-Used-InLine may be 0 or less while
	// a unit fits, when the places lie more than a Window ahead.
	Remaining int

	// RetryAfter is 0 when a unit fits now; otherwise the time until one
	// would, if nothing else were admitted meanwhile, behind the places in
	// line already given: Peek's RetryAfter.
	RetryAfter time.Duration

	// ResetAfter is the time until the key holds nothing that limits,
	// places in line included; 0 when it holds nothing.
	ResetAfter time.Duration
}

// Usage reports how much of key's window under policy p is used now and how
// many places in line it holds, recording nothing. It is Peek with the
// places counted: one call of the decision script, which reads the Redis
// clock once, so that Used, InLine and the decision's figures are of one
// instant. Like Peek it drops the units that have left p's window and
// refreshes the key's expiry, as the next decision would: p must be the
// policy the key is held to, since a shorter window would drop units that
// the longer one still counts. Errors are Peek's: bad input (matched with
// errors.Is, nothing sent to Redis) or a failure of Redis. Safe for
// concurrent use.
func (l *Limiter) Usage(ctx context.Context, key string, p Policy) (Usage, error) {
	md, places, err := l.decide(ctx, "usage", modeUsage, "", []Check{{Key: key, Policy: p, Cost: 1}})
	if err != nil {
		return Usage{}, err
	}
	d := md.Checks[0]
	inLine, soon := int(places[0]), int(places[1])
	u := Usage{
		Limit:      d.Limit,
		Used:       d.Count - inLine,
		InLine:     inLine,
		InLineSoon: soon,
		RetryAfter: d.RetryAfter,
		ResetAfter: d.ResetAfter,
	}
	if u.RetryAfter == 0 {
		u.Remaining = max(1, u.Limit-u.Used-u.InLineSoon)
	}
	return u, nil
}
