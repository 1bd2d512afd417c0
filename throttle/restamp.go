package throttle

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/lua"
)

// restampSlack is how much further back than `late` Restamp looks for the
// task's admission: the call itself takes time, and Redis's clock is not
// the caller's.
const restampSlack = 100 * time.Millisecond

// Restamp moves the admission of task id, which these lines gave at most
// late ago (on the caller's clock), to now in every sliding log of checks,
// so that a send leaving late is counted in the windows the provider will
// see it in (docs/FAIRNESS.md, "A late send is stamped again"). Counter
// rules are left as they are. It reports false, moving nothing, when a log
// no longer holds the admission (it was reset) or when the move would put
// a window over its limit: the task must not be sent then. When it moved
// them, at is the time they stand at by the Redis clock (now, or their
// own time when that is not before now); the zero time when checks hold
// no sliding log.
func (ls *Lines) Restamp(ctx context.Context, id string, checks []LineCheck, late time.Duration) (at time.Time, ok bool, err error) {
	fail := func(err error) (time.Time, bool, error) {
		return time.Time{}, false, fmt.Errorf("throttle: restamp %s: %w", id, err)
	}
	if ls.l.err != nil {
		return time.Time{}, false, ls.l.err
	}
	if id == "" {
		return fail(fmt.Errorf("%w: no task id", ErrInvalidKey))
	}
	all := make([]Check, len(checks))
	for i, c := range checks {
		all[i] = c.Check
	}
	keys, _, err := ls.l.resolve(all)
	if err != nil {
		return fail(err)
	}
	var logs, leases []string
	args := []any{id, (max(late, 0) + restampSlack).Microseconds()}
	for i, c := range all {
		if c.Policy.Algorithm.String() == SlidingLog.String() {
			logs, leases = append(logs, keys[i]), append(leases, leaseOf(keys[i]))
			args = append(args, c.Policy.Limit, c.Policy.Window.Microseconds(), c.Cost, b2i(c.Leased))
		}
	}
	if len(logs) == 0 {
		return time.Time{}, true, nil
	}
	n, err := lua.Restamp.Run(ctx, ls.l.rdb, append(logs, leases...), args...).Int64()
	if err != nil {
		return fail(err)
	}
	if n == 0 {
		return time.Time{}, false, nil
	}
	return time.UnixMicro(n), true, nil
}
