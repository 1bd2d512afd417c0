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
	best := 0
	for _, n := range inWindow(times, w) {
		best = max(best, n)
	}
	return best
}

// OverLimit returns how many of times arrived above limit: an arrival is
// over when the span of w that ends with it, (t-w, t], holds more than limit
// arrivals, itself and those before it included. Each is an arrival that a
// provider enforcing the limit by counting its own arrivals would have
// refused (had it counted refusals too); zero means the limit held in every
// window. Of arrivals at the same instant, the later ones in times are the
// ones over. times need not be sorted and are not changed.
func OverLimit(times []time.Time, w time.Duration, limit int) int {
	over := 0
	for _, n := range inWindow(times, w) {
		if n > limit {
			over++
		}
	}
	return over
}

// inWindow returns, for each of times in order of time (stable), how many
// arrivals the span of w that ends with it holds, itself and those before
// it included.
func inWindow(times []time.Time, w time.Duration) []int {
	ts := slices.Clone(times)
	slices.SortStableFunc(ts, time.Time.Compare)
	out := make([]int, len(ts))
	lo := 0
	for hi := range ts {
		for ts[hi].Sub(ts[lo]) >= w {
			lo++
		}
		out[hi] = hi - lo + 1
	}
	return out
}
