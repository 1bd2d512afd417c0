package throttle

import (
	"fmt"
	"strings"
)

// Algorithm is how a Policy counts the units of its window. The zero value,
// "", is SlidingLog.
//
// SlidingLog is exact and costs Redis memory for every admitted unit in the
// window (about 130 bytes once a key holds more than 128). The others keep a
// hash of a few integers per key whatever the Limit (136 to 152 bytes with a
// 50-byte key name), and trade exactness for it; docs/LIMITER.md
// ("Algorithms") gives their measured memory and error, and
// `go -C bench run ./cmd/bench --out DIR --only memory,accuracy` measures them again.
// For all of them a denial is a Decision with an exact RetryAfter: the time
// until the algorithm would admit the request if nothing else were admitted
// meanwhile.
//
// Each algorithm keeps a key's state in a Redis key of its own (see
// RedisKeyFor), so a policy whose Algorithm changes starts the key afresh
// under the new one, and the old state expires by itself. A changed Limit
// applies at once. A changed Window: GCRA keeps its arrival time; the window
// counters keep each stored count in the window its own window started in,
// so counts of a window that started before the new previous one are
// forgotten: a key whose window was made shorter may admit, once, as if
// it were empty.
// Only admissions set a counter key's TTL, to when it stops limiting;
// denials and Peek write nothing.
type Algorithm string

// Algorithms of a Policy.
const (
	// SlidingLog is the exact sliding-window log, the default: one sorted-set
	// member per admitted unit, so at most Limit units are admitted in any
	// span of Window. Decision.Count is the number of units in the window.
	SlidingLog Algorithm = "sliding-log"

	// SlidingWindow is the sliding-window counter: a count for each window
	// aligned to a multiple of Window since the Unix epoch of the Redis
	// clock, of which it keeps the current and the previous one. The units
	// counted now are those of the current window plus those of the previous
	// one weighted by the share of it the sliding window still covers,
	// rounded up: Decision.Count = current + ceil(previous × left / Window),
	// where left is the time left in the current window. It assumes the
	// previous window's units were spread evenly over it. When they were
	// not, it admits more or fewer than the log would: on random arrivals at
	// 1.5 times the limit it held 1.05 times the Limit in some span of
	// Window; a steady stream starting in the middle of a window got 1.39
	// times; a burst at the end of one window followed by a steady stream
	// got close to 2 times, its bound (no window aligned to the Window
	// admits more than the Limit).
	SlidingWindow Algorithm = "sliding-window"

	// GCRA is the generic cell rate algorithm (the limiter of
	// github.com/go-redis/redis_rate): one theoretical arrival time per key,
	// moved on by Window/Limit, the emission interval, for every unit
	// admitted. A key left alone admits Limit units at once (the burst);
	// after that one unit every Window/Limit. A span of Window can therefore
	// hold a full burst and then nearly a Window's worth of emission
	// intervals: up to 2 × Limit - 1 units. Decision.Count is the units'
	// worth of theoretical arrival time still ahead of now, rounded up:
	// Limit - Count more units fit at once.
	GCRA Algorithm = "gcra"

	// FixedWindow counts the units of each window aligned to a multiple of
	// Window since the Unix epoch of the Redis clock (a Window of 24 hours
	// starts at 00:00 UTC), and starts again at 0 at the next. A burst at
	// the end of one window and another at the start of the next admit
	// twice the Limit in a span much shorter than Window. RetryAfter and
	// ResetAfter are the time to the next window; Decision.Count is the
	// units of the current window.
	FixedWindow Algorithm = "fixed-window"

	// Concurrency is an in-flight cap, not a rate: at most Limit callers
	// hold a slot at once, each named by its id (AllowInLine), and a slot
	// lapses Window after it was taken or last renewed (Renew) unless it
	// is released first (Release). Cost is 1. A denial's RetryAfter is at
	// most the time until the first slot held lapses: a release may free
	// one sooner. docs/INFLIGHT.md is its design.
	Concurrency Algorithm = "concurrency"
)

// MaxConcurrency is the largest Limit of a Concurrency policy.
const MaxConcurrency = 10_000

// Algorithms returns the rate algorithms a Policy accepts, the default
// first; Concurrency, a cap rather than a rate, is not among them.
func Algorithms() []Algorithm {
	return []Algorithm{SlidingLog, SlidingWindow, GCRA, FixedWindow}
}

// String returns the algorithm's name: "sliding-log" for the zero value.
func (a Algorithm) String() string {
	if a == "" {
		return string(SlidingLog)
	}
	return string(a)
}

// valid reports whether a is "" or one of Algorithms.
func (a Algorithm) valid() bool {
	switch a {
	case "", SlidingLog, SlidingWindow, GCRA, FixedWindow, Concurrency:
		return true
	}
	return false
}

// counter reports whether a keeps a few numbers per key rather than a log:
// the algorithms of lua/counters.lua.
func (a Algorithm) counter() bool {
	return a == SlidingWindow || a == GCRA || a == FixedWindow
}

// maxLimit returns the largest Limit of a Policy with algorithm a.
func (a Algorithm) maxLimit() int {
	if a.counter() {
		return MaxCounterLimit
	}
	if a == Concurrency {
		return MaxConcurrency
	}
	return MaxLimit
}

// errUnknownAlgorithm is the error of an algorithm not in Algorithms.
func errUnknownAlgorithm(a Algorithm) error {
	names := make([]string, 0, 4)
	for _, k := range Algorithms() {
		names = append(names, fmt.Sprintf("%q", k))
	}
	return fmt.Errorf("%w: unknown algorithm %q: use %s", ErrInvalidPolicy, string(a), strings.Join(names, ", "))
}
