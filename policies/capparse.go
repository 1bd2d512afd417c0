package policies

import (
	"errors"
	"fmt"
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
	for field, set := range map[string]bool{"limit": rf.Limit.Kind != 0, "window": rf.Window != "",
		"margin": rf.Margin != nil, "algorithm": rf.Algorithm != ""} {
		if set {
			return r, fmt.Errorf("%s: a concurrency rule caps the sends in flight; it has no %s (give concurrency, or limit and window, not both)", field, field)
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
