package policies

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
)

// Bounds of a concurrency rule's lease (docs/INFLIGHT.md).
const (
	// DefaultLease is how long a slot of a concurrency rule lives without
	// renewal when the rule sets no lease: a dead worker's slots free
	// within it, and a worker renews its slots every third of it. A
	// worker stalled longer loses its slots (docs/INFLIGHT.md).
	DefaultLease = 2 * time.Second

	// MinLease and MaxLease bound a rule's lease: a worker renews every
	// third of it, and a dead worker's slots are held for all of it.
	MinLease = time.Second
	MaxLease = time.Minute
)

// parseCap reads the rest of a concurrency rule, r its name, scope and
// mode: at most concurrency sends in flight at once, each slot leased.
// The fields of a rate (limit, window, margin, algorithm) are refused on
// it, and a tenant overrides only its concurrency.
func parseCap(r Rule, rf ruleFile) (Rule, error) {
	for _, f := range []struct {
		name string
		set  bool
	}{{"limit", rf.Limit.Kind != 0}, {"window", rf.Window != ""}, {"margin", rf.Margin != nil}, {"algorithm", rf.Algorithm != ""}} {
		if f.set { // always the same one named, whatever else is given
			return r, fmt.Errorf("%s: a concurrency rule caps the sends in flight; it has no %s (give concurrency, or limit and window, not both)", f.name, f.name)
		}
	}
	n, err := parseConcurrency(&rf.Concurrency)
	if err != nil {
		return r, fmt.Errorf("concurrency: %v", err)
	}
	lease := DefaultLease
	if rf.Lease != nil {
		if lease, err = parseWindow(*rf.Lease); err != nil {
			return r, fmt.Errorf("lease: %v", err)
		}
		if lease < MinLease || lease > MaxLease {
			return r, fmt.Errorf("lease: %v is not %v to %v", lease, MinLease, MaxLease)
		}
	}
	r.Policy = throttle.Policy{Limit: n, Window: lease, Algorithm: throttle.Concurrency}
	r.marginSet = true // none: a slot is held until the send ends
	if len(rf.Tenants) > 0 && rf.Scope != ScopeTenant {
		return r, fmt.Errorf("tenants: overrides need scope %q", ScopeTenant)
	}
	for tenant, o := range rf.Tenants {
		if err := producer.ValidateTenant(tenant); err != nil {
			return r, fmt.Errorf("tenants: %v", err)
		}
		if o.Limit.Kind != 0 || o.Window != nil {
			return r, fmt.Errorf("tenants: %s: the rule is a concurrency rule; override its concurrency, not a limit or window", tenant)
		}
		pol := r.Policy
		if o.Concurrency.Kind != 0 {
			if pol.Limit, err = parseConcurrency(&o.Concurrency); err != nil {
				return r, fmt.Errorf("tenants: %s: concurrency: %v", tenant, err)
			}
		}
		if r.Tenants == nil {
			r.Tenants = map[string]throttle.Policy{}
		}
		r.Tenants[tenant] = pol
	}
	return r, nil
}

// parseConcurrency reads a concurrency: a whole number, 1 to
// throttle.MaxConcurrency.
func parseConcurrency(n *yaml.Node) (int, error) {
	if resolve(n).ShortTag() == "!!null" {
		return 0, errors.New("missing: give how many sends may be in flight at once, a whole number such as 4")
	}
	v, err := parseLimit(n, 0)
	switch {
	case err != nil:
		return 0, err
	case v < 1 || v > throttle.MaxConcurrency:
		return 0, fmt.Errorf("%d is not 1 to %d", v, throttle.MaxConcurrency)
	}
	return v, nil
}

// parseAdaptive reads adaptive and min of r, a rate or concurrency rule
// read but for them: min needs adaptive, and lies between 1 and every
// ceiling of the rule (its limit, and each tenant's).
func parseAdaptive(r Rule, rf ruleFile) (Rule, error) {
	adaptive := false
	if rf.Adaptive.Kind != 0 {
		n := resolve(&rf.Adaptive)
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&adaptive) != nil {
			return r, fmt.Errorf("adaptive: %q is not true or false", oneLine(n.Value))
		}
	}
	if !adaptive {
		if rf.Min.Kind != 0 {
			return r, errors.New("min: only an adaptive rule (adaptive: true) has a floor")
		}
		return r, nil
	}
	if r.Shadow {
		return r, errors.New("adaptive: a rule in shadow mode does not adapt: it never sends, so no answer moves it")
	}
	if alg := r.Policy.Algorithm; alg != "" && alg != throttle.SlidingLog && alg != throttle.Concurrency {
		return r, fmt.Errorf("adaptive: a rule of algorithm %s does not adapt; use the sliding log or concurrency", alg)
	}
	r.Adaptive = true
	if !r.marginSet {
		// Its limit in force is learned from what the provider counts,
		// the spread of arrivals included: a margin would only lower it.
		r.Margin, r.marginSet = 0, true
	}
	r.Min = max(1, r.Policy.Limit/10)
	if rf.Min.Kind != 0 {
		m, err := parseLimit(&rf.Min, 0)
		if err != nil {
			return r, fmt.Errorf("min: %v", err)
		}
		if m < 1 {
			return r, fmt.Errorf("min: %d is below 1", m)
		}
		r.Min = m
	}
	if r.Min > r.Policy.Limit {
		return r, fmt.Errorf("min: %d is above the ceiling %d", r.Min, r.Policy.Limit)
	}
	for _, tenant := range slices.Sorted(maps.Keys(r.Tenants)) { // the same one named each time
		if pol := r.Tenants[tenant]; r.Min > pol.Limit {
			return r, fmt.Errorf("tenants: %s: its ceiling %d is below the rule's min %d", tenant, pol.Limit, r.Min)
		}
	}
	return r, nil
}
