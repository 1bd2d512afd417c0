package policies

import (
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// Scopes of a rule.
const (
	ScopeTenant = "tenant" // a window per tenant
	ScopeGlobal = "global" // one window shared by all tenants
)

// Rule is one limit of a task type, read from the policies file.
type Rule struct {
	// Name names the rule in logs, metrics and keys; unique within its task
	// type.
	Name string

	// Scope is ScopeTenant or ScopeGlobal.
	Scope string

	// Policy is the limit, for every tenant without an override. Its
	// Algorithm is the rule's (the file's algorithm:, "" when it sets none:
	// the sliding log).
	Policy throttle.Policy

	// Tenants holds per-tenant policies that replace Policy (ScopeTenant).
	// They have the rule's Algorithm: an override sets a limit or a window,
	// never an algorithm.
	Tenants map[string]throttle.Policy

	// Margin is added to the window of every check of the rule, so that the
	// provider, which counts arrivals rather than admissions, never sees
	// more than the limit in one window when sends take unequal times to
	// reach it. It should cover the spread of that time. When the file sets
	// none, it is DefaultMargin, cut to each policy's window (see MarginFor).
	Margin time.Duration

	// Shadow is set by mode: shadow in the file: the rule is checked and
	// its decisions counted (sluice_shadow_decisions_total), but it never
	// holds a task back, so that a new quota can be tried on live traffic
	// first. A shadow rule records the sends it would have allowed, so its
	// window fills as it would if it were enforced.
	Shadow bool

	// Adaptive is set by adaptive: true: the limit (or concurrency) is a
	// ceiling, and the limit in force follows the provider's answers,
	// kept in Redis and shared by every worker (docs/INFLIGHT.md).
	Adaptive bool

	// Min is an adaptive rule's floor (min:, by default a tenth of the
	// ceiling, at least 1); 0 for a rule that does not adapt.
	Min int

	// marginSet says whether the file set Margin (for the file or the
	// rule), rather than it being the default.
	marginSet bool
}

// MarginFor returns the margin added to the window of policy p, one of the
// rule's: Margin when the file set one, else DefaultMargin or a twentieth
// of p's window when that is shorter.
func (r Rule) MarginFor(p throttle.Policy) time.Duration {
	if r.marginSet {
		return r.Margin
	}
	return defaultMargin(p.Window)
}

// defaultMargin is the margin of a window w when the file sets none.
func defaultMargin(w time.Duration) time.Duration {
	return max(0, min(DefaultMargin, w/20, throttle.MaxWindow-w))
}

// DefaultMargin is the margin of windows when the file sets none, or a
// twentieth of the window when that is shorter (see Rule.MarginFor); the
// file's top-level margin, or the rule's own, replaces it. 50 ms costs a
// 1 s window 5% of its throughput. 20 ms was not enough between containers
// on one 2-core machine (the compose check saw 11 arrivals in a 1 s window
// of 10); across a network to a provider the spread is larger still.
const DefaultMargin = 50 * time.Millisecond
