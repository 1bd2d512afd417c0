package throttle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Defaults of a Balancer.
const (
	// DefaultBalancerFloor is the share of a rule, in percent, spread
	// evenly over the groups and never moved: a group with no demand still
	// admits its first tasks at once (docs/SCALING.md, "Targets").
	DefaultBalancerFloor = 10

	// DefaultRecoverAfter is how old a move left unsettled must be before
	// a Balancer completes it (Leases.Recover).
	DefaultRecoverAfter = 2 * time.Second
)

// Balancer moves the shares of the leased rules of one class (a task
// type) between the groups of a layout of shards by demand: the pool's
// first, then from the groups above their target to those below
// (docs/SCALING.md, "Targets"). Every move is safe whoever else moves
// (Leases); one Balancer at a time only avoids churn. Not safe for
// concurrent use: call Step from one goroutine.
type Balancer struct {
	l      *Limiter
	class  string
	groups []string
	rules  []Check
	floor  int64 // shares each group keeps, never moved
	lines  []*Lines
}

// NewBalancer returns the Balancer of class's leased rules over groups,
// on l's client and prefix. rules are the rules as their checks have them
// (key, policy); groups the shards' groups, at least two.
func (l *Limiter) NewBalancer(class string, groups []string, rules []Check) (*Balancer, error) {
	if len(groups) < 2 || len(rules) == 0 || class == "" {
		return nil, fmt.Errorf("throttle: %w: a balancer needs a class, two groups or more, and a rule", ErrInvalidConfig)
	}
	b := &Balancer{l: l, class: class, groups: slices.Clone(groups), rules: slices.Clone(rules),
		floor: LeaseParts * DefaultBalancerFloor / 100 / int64(len(groups))}
	for _, g := range groups {
		b.lines = append(b.lines, l.InGroup(g).Lines(LinesConfig{}))
	}
	return b, nil
}

// Step reads each group's demand, sets the targets, moves the shares
// toward them, completes the moves left unsettled, and wakes the lines of
// the groups that received. It returns the shares each group of b's
// groups wants now, by rule, in the order of NewBalancer's.
func (b *Balancer) Step(ctx context.Context) ([][]int64, error) {
	demand, err := b.demand(ctx)
	if err != nil {
		return nil, err
	}
	leases := b.l.Leases()
	var targets [][]int64
	woken := make([]bool, len(b.groups))
	for _, rule := range b.rules {
		if _, err := leases.Open(ctx, rule); err != nil {
			return nil, err
		}
		target := b.targets(demand)
		targets = append(targets, target)
		got, err := b.move(ctx, leases, rule, target)
		if err != nil {
			return nil, err
		}
		for i := range woken {
			woken[i] = woken[i] || got[i]
		}
	}
	var errs []error
	for i, ls := range b.lines {
		if woken[i] {
			errs = append(errs, ls.Wake(ctx, b.class))
		}
	}
	return targets, errors.Join(errs...)
}

// demand returns each group's weight of demand: the sum of the weights of
// its flows waiting at the most urgent priority that waits in any group.
func (b *Balancer) demand(ctx context.Context) ([]float64, error) {
	waiting := make([][]WaitingFlow, len(b.groups))
	top := LeastUrgent + 1
	for i, ls := range b.lines {
		flows, err := ls.Waiting(ctx, MaxFlows)
		if err != nil {
			return nil, fmt.Errorf("throttle: balance %s: %w", b.class, err)
		}
		for _, f := range flows {
			if f.Class == encodeKeyPart(b.class) && f.InLine > 0 {
				waiting[i] = append(waiting[i], f)
				top = min(top, f.Priority)
			}
		}
	}
	demand := make([]float64, len(b.groups))
	for i, flows := range waiting {
		for _, f := range flows {
			if f.Priority == top {
				demand[i] += f.Weight
			}
		}
	}
	return demand, nil
}

// targets returns each group's share: its floor, and of the rest a part
// in proportion to its demand, or an even part when none waits.
func (b *Balancer) targets(demand []float64) []int64 {
	n := int64(len(b.groups))
	rest := LeaseParts - b.floor*n
	total := 0.0
	for _, d := range demand {
		total += d
	}
	target := make([]int64, n)
	for i, d := range demand {
		part := float64(rest) / float64(n)
		if total > 0 {
			part = float64(rest) * d / total
		}
		target[i] = b.floor + int64(math.Floor(part))
	}
	return target
}

// move sets the givers' targets, then moves shares from the pool and the
// groups above their target to those below, largest gaps first, and
// completes the moves left unsettled. It reports which groups received.
func (b *Balancer) move(ctx context.Context, leases *Leases, rule Check, target []int64) ([]bool, error) {
	all := append([]string{DefaultGroup}, b.groups...)
	for _, g := range all {
		if _, err := leases.Recover(ctx, rule, g, DefaultRecoverAfter); err != nil {
			return nil, err
		}
	}
	share := make([]int64, len(all))
	for i, g := range all {
		lease, err := leases.Read(ctx, rule, g)
		if err != nil {
			return nil, err
		}
		share[i] = lease.Share
	}
	want := append([]int64{0}, target...) // the pool wants nothing
	for i, g := range all {
		t := int64(-1) // a receiver gives nothing anyway
		if share[i] > want[i] {
			t = want[i]
		}
		if err := leases.SetTarget(ctx, rule, g, t); err != nil {
			return nil, err
		}
	}
	got := make([]bool, len(b.groups))
	for _, to := range gapsFirst(want, share, -1) {
		for _, from := range gapsFirst(want, share, 1) {
			need := want[to] - share[to]
			if need <= 0 {
				break
			}
			n, err := leases.Move(ctx, rule, all[from], all[to], min(need, share[from]-want[from]))
			if err != nil {
				return nil, err
			}
			share[from], share[to] = share[from]-n, share[to]+n
			got[to-1] = got[to-1] || n > 0
		}
	}
	return got, nil
}

// gapsFirst returns the indexes whose share is above their want (sign 1)
// or below it (sign −1), the largest gap first.
func gapsFirst(want, share []int64, sign int64) []int {
	var idx []int
	for i := range want {
		if sign*(share[i]-want[i]) > 0 {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return int(sign*(share[b]-want[b]) - sign*(share[a]-want[a]))
	})
	return idx
}
