package throttle

import (
	"cmp"
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

	// BalancePeriod is how often the workers step a Balancer, and how
	// soon a caller refused a place under a lease asks again
	// (lua/lease_worth.lua holds it too).
	BalancePeriod = 100 * time.Millisecond
)

// A DemandFunc returns what waits in group: for each priority from
// MostUrgent to LeastUrgent, the sum of the weights of what waits there
// (Lines.Demand's reply). Where no fair lines run, the caller knows what
// waits: a worker serving first come, first served counts its shard's
// queue (docs/SCALING.md, "First come, first served over shards").
type DemandFunc func(ctx context.Context, group string) ([]float64, error)

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
	demand DemandFunc // nil: the lines' (Lines.Demand)
	lines  []*Lines   // each group's lines, when demand is nil
	opened bool       // the pools of rules are open
	owed   []bool     // by group: a wake not sent yet, for a share that rose
	limits LimitFunc  // the limits in force of adaptive rules; nil: none adapts
	steps  int        // the steps taken: whose turn a cap's tie is
}

// A LimitFunc returns rule held to its limit in force: an adaptive rule's
// check with the limit the workers hold it to now, below its ceiling.
type LimitFunc func(ctx context.Context, rule Check) Check

// HoldTo makes b move the shares of each rule as f says its limit is now,
// so that a give keeps every window within the limit the groups are held
// to (docs/INFLIGHT.md, "Across shards"). It returns b.
func (b *Balancer) HoldTo(f LimitFunc) *Balancer {
	b.limits = f
	return b
}

// NewBalancer returns the Balancer of class's leased rules over groups,
// on l's client and prefix. rules are the rules as the workers check them
// (key, limit, window with the margin); groups the shards' groups, at
// least two; demand, what waits in a group: nil for the fair lines' (the
// class's flows in each group's lines, which the Balancer wakes when
// their share rises).
func (l *Limiter) NewBalancer(class string, groups []string, rules []Check, demand DemandFunc) (*Balancer, error) {
	if len(groups) < 2 || len(rules) == 0 || class == "" {
		return nil, fmt.Errorf("throttle: %w: a balancer needs a class, two groups or more, and a rule", ErrInvalidConfig)
	}
	b := &Balancer{l: l, class: class, groups: slices.Clone(groups), rules: slices.Clone(rules), demand: demand, owed: make([]bool, len(groups))}
	if demand == nil {
		for _, g := range groups {
			b.lines = append(b.lines, l.InGroup(g).Lines(LinesConfig{}))
		}
	}
	return b, nil
}

// Class returns the class whose leased rules b balances.
func (b *Balancer) Class() string { return b.class }

// Step reads each group's demand, sets the targets, moves the shares
// toward them, completes the moves left unsettled, and wakes the lines of
// the groups that received. It returns the shares each group of b's
// groups wants now, by rule, in the order of NewBalancer's.
func (b *Balancer) Step(ctx context.Context) ([][]int64, error) {
	demand, err := b.parts(ctx)
	if err != nil {
		return nil, err
	}
	b.steps++
	leases := b.l.Leases()
	var targets [][]int64
	var moveErr error
	for _, rule := range b.rules {
		if b.limits != nil {
			rule = b.limits(ctx, rule)
		}
		if !b.opened {
			if _, moveErr = leases.Open(ctx, rule); moveErr != nil {
				break
			}
		}
		target := b.targets(demand, rule)
		targets = append(targets, target)
		if moveErr = b.move(ctx, leases, rule, target, b.owed); moveErr != nil {
			break
		}
	}
	b.opened = b.opened || moveErr == nil
	// A share raised, by a move, a recovery or a target cleared: a class
	// whose lease was worth less than a task sleeps until woken. Only the
	// groups that may admit more are woken, a wake costing each worker's
	// loop of the group a dispatch; a wake owed stays owed until it is
	// sent, whatever failed since.
	errs := []error{moveErr}
	for i, ls := range b.lines {
		if b.owed[i] {
			err := ls.Wake(ctx, b.class)
			b.owed[i] = err != nil
			errs = append(errs, err)
		}
	}
	if moveErr != nil {
		return nil, errors.Join(errs...)
	}
	return targets, errors.Join(errs...)
}

// parts returns each group's part of the demand, the parts summing to 1,
// or nil when nothing waits: the flows waiting at the most urgent priority
// that waits in any group share what the less urgent ones' reserves
// leave, by the sum of their weights in each group; each less urgent
// priority waiting anywhere gets DefaultReserve percent, by its own
// weights (docs/SCALING.md, "Targets"): the lines' reserve, which the
// workers leave at its default.
func (b *Balancer) parts(ctx context.Context) ([]float64, error) {
	byLevel := make([][]float64, len(b.groups))
	total := make([]float64, LeastUrgent)
	for i := range b.groups {
		w, err := b.weights(ctx, i)
		if err != nil {
			return nil, err
		}
		for l, x := range w {
			total[l] += x
		}
		byLevel[i] = w
	}
	top := slices.IndexFunc(total, func(x float64) bool { return x > 0 })
	if top < 0 {
		return nil, nil
	}
	reserve := float64(DefaultReserve) / 100
	parts := make([]float64, len(b.groups))
	for l := top; l < LeastUrgent; l++ {
		if total[l] == 0 {
			continue
		}
		weight := reserve
		if l == top {
			weight = 1
			for _, x := range total[top+1:] {
				if x > 0 {
					weight = max(0, weight-reserve)
				}
			}
		}
		for i, w := range byLevel {
			parts[i] += weight * w[l] / total[l]
		}
	}
	return parts, nil
}

// weights returns what waits in group i, by priority.
func (b *Balancer) weights(ctx context.Context, i int) ([]float64, error) {
	if b.demand == nil {
		return b.lines[i].Demand(ctx, b.class)
	}
	w, err := b.demand(ctx, b.groups[i])
	if err == nil && len(w) != LeastUrgent {
		err = fmt.Errorf("throttle: the demand of group %s: %d priorities, want %d", b.groups[i], len(w), LeastUrgent)
	}
	return w, err
}

// floorUnits is the units each of n groups keeps of rule, never moved:
// DefaultBalancerFloor percent of its limit spread evenly, at least one
// each when the limit allows, so that a group with no demand admits its
// first tasks at once. A cap gets no such unit: a slot pinned to an idle
// group stands unused however long the others wait (docs/INFLIGHT.md,
// "Across shards").
func floorUnits(rule Check, n int) int64 {
	limit := int64(rule.Policy.Limit)
	units := limit * DefaultBalancerFloor / 100 / int64(n)
	if units == 0 && limit >= int64(n) && rule.Policy.Algorithm != Concurrency {
		units = 1
	}
	return units
}

// targets returns each group's share of rule, in whole units: its floor,
// and of the rest its part of the demand (evenly when none waits: parts
// nil), the units left by rounding going to the largest remainders. A
// cap first gives a slot to each group where tasks wait, when it has
// enough, and breaks ties of remainders in turn, step by step: its slots
// are whole, and a group that lost every tie would wait for good on the
// others' backlog (docs/INFLIGHT.md, "Across shards").
func (b *Balancer) targets(parts []float64, rule Check) []int64 {
	n, limit := len(b.groups), int64(rule.Policy.Limit)
	floor := floorUnits(rule, n)
	units, frac := make([]int64, n), make([]float64, n)
	for i := range units {
		units[i] = floor
	}
	rest := limit - floor*int64(n)
	isCap := rule.Policy.Algorithm == Concurrency
	if isCap && parts != nil {
		var waiting []int
		for i, p := range parts {
			if p > 0 && units[i] == 0 {
				waiting = append(waiting, i)
			}
		}
		if int64(len(waiting)) <= rest {
			for _, i := range waiting {
				units[i]++
			}
			rest -= int64(len(waiting))
		}
	}
	left := rest
	for i := range units {
		part := float64(rest) / float64(n)
		if parts != nil {
			part = float64(rest) * parts[i]
		}
		whole := int64(math.Floor(part))
		units[i], frac[i], left = units[i]+whole, part-float64(whole), left-whole
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
		if isCap && parts != nil {
			order[i] = (i + b.steps) % n // ties in turn while tasks wait
		}
	}
	slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(frac[y], frac[x]) })
	for _, i := range order[:min(int(left), n)] {
		units[i]++
	}
	shares, sum, largest := make([]int64, n), int64(0), 0
	for i, u := range units {
		shares[i] = (u*LeaseParts + limit - 1) / limit // the least share worth u
		sum += shares[i]
		if shares[i] > shares[largest] {
			largest = i
		}
	}
	shares[largest] -= max(0, sum-LeaseParts) // a limit that does not divide LeaseParts
	return shares
}

// stepDown returns the target of group g, whose lease is above its
// target want of rule (in shares): a busy giver's steps down from what
// its log holds by a period's part of a window of its excess; an idle
// one's, the pool's and a cap's fall to want at once (docs/SCALING.md,
// "Moving a busy share"; a cap frees a slot only when a send ends).
func (b *Balancer) stepDown(ctx context.Context, leases *Leases, rule Check, g string, lease Lease, want int64) (int64, error) {
	if g == DefaultGroup || rule.Policy.Algorithm == Concurrency {
		return want, nil
	}
	held, err := leases.Held(ctx, rule, g)
	if err != nil {
		return 0, err
	}
	limit, window := int64(rule.Policy.Limit), rule.Policy.Window.Microseconds()
	from := min(lease.Share, (held*LeaseParts+limit-1)/limit)
	if lease.Target >= 0 {
		from = min(from, lease.Target)
	}
	if from <= want {
		return want, nil
	}
	step := ((lease.Share-want)*BalancePeriod.Microseconds() + window - 1) / window
	return max(want, from-step), nil
}

// move completes the moves left unsettled, sets the givers' targets, then
// moves shares from the pool and the groups above their target to those
// below, largest gaps first. It marks in rose (by b.groups' index) each
// group whose share, or what it admits, may have grown, as soon as it
// has: every group when a recovery completed a move.
func (b *Balancer) move(ctx context.Context, leases *Leases, rule Check, target []int64, rose []bool) error {
	all := append([]string{DefaultGroup}, b.groups...)
	mark := func(i int) { // i indexes all, whose first is the pool
		if i > 0 {
			rose[i-1] = true
		}
	}
	var late error // moves left to recovery: no replica acknowledged them yet
	for _, g := range all {
		n, err := leases.Recover(ctx, rule, g, DefaultRecoverAfter)
		if errors.Is(err, ErrNotReplicated) {
			late = errors.Join(late, err)
		} else if err != nil {
			return err
		}
		if n > 0 { // rare: a mover stopped between its steps
			for i := range rose {
				rose[i] = true
			}
		}
	}
	share := make([]int64, len(all))
	want := append([]int64{0}, target...) // the pool wants nothing
	for i, g := range all {
		lease, err := leases.Read(ctx, rule, g)
		if err != nil {
			return err
		}
		share[i] = lease.Share
		if i > 0 && lease.Goal != want[i] {
			if err := leases.SetGoal(ctx, rule, g, want[i]); err != nil {
				return err
			}
		}
		t := int64(-1) // a receiver gives nothing anyway
		if share[i] > want[i] {
			if t, err = b.stepDown(ctx, leases, rule, g, lease, want[i]); err != nil {
				return err
			}
		}
		if t != lease.Target {
			// A target held it down: cleared or raised, it may admit more.
			// A first target (none was, -1) only lowers it.
			if lease.Target >= 0 && (t < 0 || t > lease.Target) {
				mark(i)
			}
			if err := leases.SetTarget(ctx, rule, g, t); err != nil {
				return err
			}
		}
	}
	for _, to := range gapsFirst(want, share, -1) {
		for _, from := range gapsFirst(want, share, 1) {
			need := want[to] - share[to]
			if need <= 0 {
				break
			}
			n, err := leases.Move(ctx, rule, all[from], all[to], min(need, share[from]-want[from]))
			if errors.Is(err, ErrNotReplicated) {
				// Given, not yet taken: this giver waits for its replica.
				late, share[from] = errors.Join(late, err), want[from]
				continue
			}
			if err != nil {
				return err
			}
			share[from], share[to] = share[from]-n, share[to]+n
			if n > 0 {
				mark(to)
			}
		}
	}
	return late
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
