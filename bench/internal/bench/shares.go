package bench

import (
	"math"
	"time"
)

// Weighted shares (docs/FAIRNESS.md, "What is promised"): in a scenario
// with weights, each tenant's sends over shareWindows windows, from the
// end of the first one (whose sends went at once, in enqueue order, before
// anything waited), against its weighted max-min share of all the sends
// of the span (not of the rule as written: the margin and the pace take
// a few, from every tenant alike). Targeted within TargetDrainShare.
const shareWindows = 10

// ShareResult is each tenant's sends against its share.
type ShareResult struct {
	FromSeconds float64       `json:"from_seconds"`
	ToSeconds   float64       `json:"to_seconds"`
	Tenants     []TenantShare `json:"tenants"`
	// MaxDeviation is the largest |sends − share| ÷ share.
	MaxDeviation float64 `json:"max_deviation"`
}

// TenantShare is one tenant's sends against its share.
type TenantShare struct {
	Tenant string  `json:"tenant"`
	Weight float64 `json:"weight"`
	Sends  int     `json:"sends"`
	Share  float64 `json:"share"` // its weighted max-min share of all the sends of the span
}

// sharesOf measures deliveries (each tenant's, sorted) since start; nil
// when the scenario has no weights.
func sharesOf(p *drainPlan, deliveries [][]time.Time, start time.Time) *ShareResult {
	sc := p.sc
	if len(sc.weights) == 0 {
		return nil
	}
	from, to := start.Add(sc.window), start.Add((shareWindows+1)*sc.window)
	sends := make([]int, len(deliveries))
	total := 0
	for t, times := range deliveries {
		for _, at := range times {
			if !at.Before(from) && at.Before(to) {
				sends[t]++
			}
		}
		total += sends[t]
	}
	shares := maxMinShares(sc.weights, float64(total), float64(sc.tenantLimit*shareWindows))
	res := &ShareResult{FromSeconds: sc.window.Seconds(), ToSeconds: (shareWindows + 1) * sc.window.Seconds()}
	for t, n := range sends {
		ts := TenantShare{Tenant: p.tenantNames[t], Weight: sc.weights[t], Sends: n, Share: shares[t]}
		res.Tenants = append(res.Tenants, ts)
		res.MaxDeviation = math.Max(res.MaxDeviation, math.Abs(float64(n)-ts.Share)/ts.Share)
	}
	return res
}

// maxMinShares returns the weighted max-min shares of total among tenants
// of weights, none above limit: water-filling, each round giving the
// tenants not yet capped their weighted part of what is left.
func maxMinShares(weights []float64, total, limit float64) []float64 {
	shares := make([]float64, len(weights))
	capped := make([]bool, len(weights))
	left := total
	for {
		var w float64
		for i, x := range weights {
			if !capped[i] {
				w += x
			}
		}
		if w == 0 {
			return shares
		}
		var hit []int // capped this round, by what was left before it
		for i, x := range weights {
			if !capped[i] && left*x/w >= limit {
				hit = append(hit, i)
			}
		}
		for _, i := range hit {
			shares[i], capped[i], left = limit, true, left-limit
		}
		if len(hit) == 0 {
			for i, x := range weights {
				if !capped[i] {
					shares[i] = left * x / w
				}
			}
			return shares
		}
	}
}
