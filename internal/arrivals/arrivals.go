// Package arrivals measures arrivals as a provider sees them: the most that
// fall within one window. The demo, the sink and the tests check limits
// with it.
package arrivals

import (
	"slices"
	"time"
)

// MaxInWindow returns the most of times within any span [t, t+w): the span a
// sliding-window limit of w counts, where an entry w old has left. times
// need not be sorted and are not changed.
func MaxInWindow(times []time.Time, w time.Duration) int {
	ts := slices.Clone(times)
	slices.SortFunc(ts, time.Time.Compare)
	best, lo := 0, 0
	for hi := range ts {
		for ts[hi].Sub(ts[lo]) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}
