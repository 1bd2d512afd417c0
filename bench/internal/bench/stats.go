package bench

import (
	"math"
	"slices"
	"time"
)

// Round is one measurement: one contender, one number of callers, one round.
type Round struct {
	Calls        int64   `json:"calls"`         // calls started in the measured span
	PerSecond    float64 `json:"per_second"`    // Calls over the span
	AllowedShare float64 `json:"allowed_share"` // of Calls, the share allowed
	P50          float64 `json:"p50_us"`        // latency percentiles of one call, µs
	P90          float64 `json:"p90_us"`
	P99          float64 `json:"p99_us"`
	P999         float64 `json:"p999_us"`

	// RedisUsPerCall is the time Redis spent in EVALSHA per call, µs, over
	// the warm-up and the measured span (INFO commandstats): the cost of
	// the script itself. It assumes the Redis serves no one else meanwhile.
	RedisUsPerCall float64 `json:"redis_us_per_call"`
}

// Measurement is a contender's results at one number of callers, one per
// round, and their median.
type Measurement struct {
	// Median holds, field by field, the median of Rounds: each percentile is
	// the median of that percentile over the rounds.
	Median Round   `json:"median"`
	Rounds []Round `json:"rounds"`
}

// Ratio is a ratio of throughputs taken round by round, so that both sides
// of each ratio ran within seconds of each other.
type Ratio struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value that at least p percent of the
// values do not exceed. It returns 0 for no values.
func percentile(sorted []time.Duration, p float64) time.Duration { return percentileOf(sorted, p) }

// percentileOf is percentile for sorted values of any ordered kind.
func percentileOf[T any](sorted []T, p float64) T {
	var zero T
	if len(sorted) == 0 {
		return zero
	}
	// The epsilon keeps binary fractions from pushing an exact rank up one:
	// 99.9% of 1,000 is 999.0000000000001 in float64.
	rank := int(math.Ceil(p/100*float64(len(sorted)) - 1e-9))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// median returns the median of xs, the mean of the middle two for an even
// count, and 0 for none. It does not change xs.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// summarize makes a Round of the latencies of the calls started in a span of
// length span, allowed of which were allowed. It sorts lat.
func summarize(lat []time.Duration, allowed int64, span time.Duration) Round {
	slices.Sort(lat)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	r := Round{
		Calls: int64(len(lat)),
		P50:   us(percentile(lat, 50)),
		P90:   us(percentile(lat, 90)),
		P99:   us(percentile(lat, 99)),
		P999:  us(percentile(lat, 99.9)),
	}
	if span > 0 {
		r.PerSecond = float64(len(lat)) / span.Seconds()
	}
	if len(lat) > 0 {
		r.AllowedShare = float64(allowed) / float64(len(lat))
	}
	return r
}

// medianRound returns the field-by-field median of rounds.
func medianRound(rounds []Round) Round {
	field := func(f func(Round) float64) float64 {
		xs := make([]float64, len(rounds))
		for i, r := range rounds {
			xs[i] = f(r)
		}
		return median(xs)
	}
	return Round{
		Calls:        int64(math.Round(field(func(r Round) float64 { return float64(r.Calls) }))),
		PerSecond:    field(func(r Round) float64 { return r.PerSecond }),
		AllowedShare: field(func(r Round) float64 { return r.AllowedShare }),
		P50:          field(func(r Round) float64 { return r.P50 }),
		P90:          field(func(r Round) float64 { return r.P90 }),
		P99:          field(func(r Round) float64 { return r.P99 }),
		P999:         field(func(r Round) float64 { return r.P999 }),

		RedisUsPerCall: field(func(r Round) float64 { return r.RedisUsPerCall }),
	}
}

// measurement makes a Measurement of rounds.
func measurement(rounds []Round) Measurement {
	return Measurement{Median: medianRound(rounds), Rounds: rounds}
}

// throughputRatio returns the ratios num[i].PerSecond / den[i].PerSecond of
// the rounds where both are measured and den is not zero: their median,
// least and greatest. It is the zero Ratio when there is no such round.
func throughputRatio(num, den []Round) Ratio {
	perSecond := func(rounds []Round) []float64 {
		xs := make([]float64, len(rounds))
		for i, r := range rounds {
			xs[i] = r.PerSecond
		}
		return xs
	}
	return perSecondRatio(perSecond(num), perSecond(den))
}

// perSecondRatio returns the ratios num[i] / den[i] of the rounds where both
// are measured and den is not zero, as throughputRatio does for Rounds.
func perSecondRatio(num, den []float64) Ratio {
	var rs []float64
	for i := range min(len(num), len(den)) {
		if den[i] > 0 {
			rs = append(rs, num[i]/den[i])
		}
	}
	if len(rs) == 0 {
		return Ratio{}
	}
	return Ratio{Median: median(rs), Min: slices.Min(rs), Max: slices.Max(rs)}
}
