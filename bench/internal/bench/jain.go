package bench

import (
	"time"

	"github.com/sluicehq/sluice/internal/arrivals"
)

// Fairness among backlogged tenants (docs/FAIRNESS.md, "What is
// promised"): over every stretch of jainStretch windows, starting at each
// whole window from the start, the tenants that stay backlogged throughout
// (a delivery of theirs is still to come after the stretch) should each
// get their max-min share of the provider rule. The drain's tenants have
// one tenant limit, which binds (full, short and slow scenarios) or not
// (weighted), so those shares are in proportion to the weights, and Jain's
// index of their sends in the stretch divided by their weights,
// (Σx)² ÷ (n·Σx²), measures it: 1 when all sent their share, 1/n when one
// sent everything.
const jainStretch = 5

// JainResult is the least Jain's index over the stretches of a drain.
type JainResult struct {
	Min       float64 `json:"min"`        // the least index; 1 when no stretch had two backlogged tenants
	AtSeconds float64 `json:"at_seconds"` // the start of the stretch it was in
	Tenants   int     `json:"tenants"`    // the backlogged tenants in that stretch
	Stretches int     `json:"stretches"`  // stretches with two backlogged tenants or more
}

// jainOf measures deliveries (each tenant's first arrivals, sorted) since
// start, in stretches of jainStretch windows; weights are the tenants'
// (nil: all 1).
func jainOf(deliveries [][]time.Time, weights []float64, start time.Time, window time.Duration) JainResult {
	res := JainResult{Min: 1}
	var end time.Time
	for _, times := range deliveries {
		if n := len(times); n > 0 && times[n-1].After(end) {
			end = times[n-1]
		}
	}
	span := jainStretch * window
	for s := start; !s.Add(span).After(end); s = s.Add(window) {
		var counts []float64
		for t, times := range deliveries {
			if n := len(times); n == 0 || !times[n-1].After(s.Add(span)) {
				continue // not backlogged to the end of the stretch
			}
			c := 0
			for _, at := range times {
				if !at.Before(s) && at.Before(s.Add(span)) {
					c++
				}
			}
			w := 1.0
			if t < len(weights) {
				w = weights[t]
			}
			counts = append(counts, float64(c)/w)
		}
		if len(counts) < 2 {
			continue
		}
		res.Stretches++
		if j := arrivals.Jain(counts...); j < res.Min {
			res.Min, res.AtSeconds, res.Tenants = j, s.Sub(start).Seconds(), len(counts)
		}
	}
	return res
}
