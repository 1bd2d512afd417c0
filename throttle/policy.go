package throttle

import (
	"fmt"
	"time"
)

// Bounds of a Policy.
const (
	// MaxLimit is the largest Limit a Policy may have. The sliding log keeps
	// one sorted-set member per admitted unit: about 130 bytes of Redis
	// memory each once a key holds more than 128 (40 or fewer below, where
	// Redis packs small sets), as measured by
	// `go test -run '^$' -bench MemoryPerUnit ./throttle`. A full key of
	// MaxLimit units is then 12 to 13 MB, and an AllowN of cost MaxLimit
	// writes that many members in one script, during which Redis serves no
	// one else.
	MaxLimit = 100_000

	// MaxCounterLimit is the largest Limit of a Policy whose Algorithm keeps
	// a few numbers per key (SlidingWindow, GCRA, FixedWindow): their memory
	// does not grow with the Limit, and an AllowN of any cost writes the same
	// few fields. The bound keeps their arithmetic exact: Redis runs Lua with
	// double-precision numbers, exact for integers below 2^53, and the
	// scripts multiply counts by counts (up to 2 × MaxCounterLimit², that is
	// 2 × 10^14).
	MaxCounterLimit = 10_000_000

	// MinWindow is the shortest Window a Policy may have.
	MinWindow = time.Millisecond

	// MaxWindow is the longest Window a Policy may have.
	MaxWindow = 10 * 366 * 24 * time.Hour
)

// Policy is a rate limit: at most Limit units of cost admitted in any Window.
// Policy{Limit: 10, Window: time.Second} admits ten one-unit requests in any
// one-second span, not ten per calendar second: an entry admitted at 12:00:00.300
// counts until 12:00:01.300. That is the default Algorithm, the exact
// sliding log; the others approximate it in constant memory (see Algorithm).
type Policy struct {
	// Limit is the most units of cost admitted in any Window: 1 to MaxLimit
	// with the sliding log, 1 to MaxCounterLimit with the other rate
	// algorithms; for Concurrency, the most slots held at once, 1 to
	// MaxConcurrency.
	Limit int

	// Window is the span the limit applies to, MinWindow to MaxWindow. It is
	// used to the microsecond; anything finer is dropped. For Concurrency
	// it is a slot's lease: how long a slot lives without renewal.
	Window time.Duration

	// Algorithm is how the units of the window are counted: "" (the
	// default) and SlidingLog are the exact sliding-window log;
	// SlidingWindow, GCRA and FixedWindow keep a few numbers per key,
	// whatever the Limit, and approximate it. A key keeps its state under
	// each algorithm apart, so changing a policy's Algorithm starts its keys
	// afresh.
	Algorithm Algorithm
}

// PerSecond returns a Policy of limit units a second.
func PerSecond(limit int) Policy { return Policy{Limit: limit, Window: time.Second} }

// PerMinute returns a Policy of limit units a minute.
func PerMinute(limit int) Policy { return Policy{Limit: limit, Window: time.Minute} }

// PerHour returns a Policy of limit units an hour.
func PerHour(limit int) Policy { return Policy{Limit: limit, Window: time.Hour} }

// PerDay returns a Policy of limit units in any 24 hours.
func PerDay(limit int) Policy { return Policy{Limit: limit, Window: 24 * time.Hour} }

// Validate reports whether p is usable, with an error that wraps
// ErrInvalidPolicy and says which field is wrong.
func (p Policy) Validate() error {
	switch {
	case !p.Algorithm.valid():
		return errUnknownAlgorithm(p.Algorithm)
	case p.Limit < 1:
		return fmt.Errorf("%w: limit %d is below 1", ErrInvalidPolicy, p.Limit)
	case p.Limit > p.Algorithm.maxLimit():
		of := ""
		if p.Algorithm.counter() || p.Algorithm == Concurrency {
			of = " for " + string(p.Algorithm)
		}
		return fmt.Errorf("%w: limit %d is above the maximum of %d%s", ErrInvalidPolicy, p.Limit, p.Algorithm.maxLimit(), of)
	case p.Window < MinWindow:
		return fmt.Errorf("%w: window %v is shorter than %v", ErrInvalidPolicy, p.Window, MinWindow)
	case p.Window > MaxWindow:
		return fmt.Errorf("%w: window %v is longer than %v", ErrInvalidPolicy, p.Window, MaxWindow)
	}
	return nil
}

// String returns the policy as "10/1s", followed by the algorithm when it is
// not the default: "10/1s gcra".
func (p Policy) String() string {
	if p.Algorithm == "" || p.Algorithm == SlidingLog {
		return fmt.Sprintf("%d/%v", p.Limit, p.Window)
	}
	return fmt.Sprintf("%d/%v %s", p.Limit, p.Window, p.Algorithm)
}

// Decision is the outcome of one limiter call. With Policy{Limit: 10,
// Window: time.Minute} and 7 units already in the window, AllowN(..., 3)
// returns Allowed true, Count 10, Remaining 0, RetryAfter 0, and ResetAfter
// one minute; a further Allow then returns Allowed false, Count 10, and a
// RetryAfter equal to the time until the oldest of the ten entries is a minute
// old. The fields describe the sliding log, the default Algorithm; under the
// others Count is the algorithm's own count (see Algorithm), a request is
// allowed exactly when Count + cost <= Limit, RetryAfter is the time until
// the algorithm would admit it, and ResetAfter the time until the key holds
// nothing that limits.
type Decision struct {
	// Allowed reports whether the request fits. From Allow, AllowN and a
	// MultiDecision's own Decision it means the request was admitted and
	// recorded. From Peek it means a request of cost 1 would be admitted now;
	// nothing is recorded. In MultiDecision.Checks it means the check alone
	// would admit the request: when another check denies, nothing is
	// recorded.
	Allowed bool

	// Limit is the policy's Limit.
	Limit int

	// Count is the number of units in the window after this decision: it
	// includes this request's cost when Allowed.
	Count int

	// Remaining is max(0, Limit-Count): how many more units fit now.
	Remaining int

	// RetryAfter is 0 when Allowed. Otherwise it is the exact time until this
	// request would be admitted if nothing else were admitted meanwhile: the
	// time until the entry at index Count-Limit+cost-1 (oldest first) leaves
	// the window.
	RetryAfter time.Duration

	// ResetAfter is the time until the window is empty; 0 when it is.
	ResetAfter time.Duration
}
