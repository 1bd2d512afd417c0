package policies

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// GlobalWindow returns the window of the rule named rule of taskType, which
// must be of ScopeGlobal: the one ResetGlobal empties. A type without
// rules, a rule it does not have, or one of ScopeTenant is an error
// matching ErrSelection.
func GlobalWindow(p *Policies, taskType, rule string) (RuleWindow, error) {
	if p == nil {
		return RuleWindow{}, fmt.Errorf("no policies")
	}
	rules := p.Rules(taskType)
	if len(rules) == 0 {
		return RuleWindow{}, selectionErrorf("task type %q has no rules in %s (it runs unthrottled); %s", taskType, p.Source(), p.listTypes())
	}
	for i, a := range p.For(taskType, "") {
		r := rules[i]
		if r.Name != rule {
			continue
		}
		if r.Scope != ScopeGlobal {
			return RuleWindow{}, selectionErrorf("rule %q of %s is of scope tenant: reset a tenant's window with admin reset --tenant", rule, taskType)
		}
		return RuleWindow{TaskType: taskType, Rule: r.Name, Scope: r.Scope, Key: a.Check.Key, Limit: a.Check.Policy.Limit,
			Algorithm: r.Policy.Algorithm, Shadow: a.Shadow, Window: r.Policy.Window, Margin: a.Check.Policy.Window - r.Policy.Window}, nil
	}
	return RuleWindow{}, selectionErrorf("task type %s has no rule %q", taskType, rule)
}

// ResetGlobal empties the global window that GlobalWindow(p, taskType,
// rule) names, whatever its key holds (a damaged key included), and wakes
// the fair lines of taskType to give the room made. Every tenant's
// admissions in it are forgotten: up to a window's worth more may be sent
// at once. Places in line reserved there are dropped; their tasks are
// placed again when they come. rdb and prefix are as for Usage. On more
// than one shard it empties every shard's log and the pool's, and wakes
// every shard's lines; the leases stay as they are, so that the shares
// still sum to the limit (docs/SCALING.md).
func ResetGlobal(ctx context.Context, rdb redis.UniversalClient, prefix string, p *Policies, taskType, rule string) (RuleWindow, error) {
	w, err := GlobalWindow(p, taskType, rule)
	if err != nil {
		return w, err
	}
	s, err := readShards(ctx, rdb, prefix)
	if err != nil {
		return w, fmt.Errorf("reset %s rule %s: %w", taskType, rule, err)
	}
	for _, g := range s.logs(w) {
		if err := s.limiter(g).Reset(ctx, w.Key); err != nil {
			return w, fmt.Errorf("reset %s rule %s%s: %w", taskType, rule, s.in(g), err)
		}
	}
	for _, g := range s.layout.Groups(taskType) {
		if err := s.limiter(g).Lines(throttle.LinesConfig{}).Wake(ctx, taskType); err != nil {
			return w, fmt.Errorf("reset %s rule %s%s: %w", taskType, rule, s.in(g), err)
		}
	}
	return w, nil
}
