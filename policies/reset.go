package policies

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// ResetPlan returns what ResetTenant(ctx, rdb, prefix, p, taskType, rule, tenant)
// would do, without doing it: the windows of tenant it would empty (rules
// of ScopeTenant) and the global windows it would leave as they are,
// shared as they are by every tenant. A rule that names only global rules
// is an error matching ErrSelection, as are those of Windows.
func ResetPlan(p *Policies, taskType, rule, tenant string) (reset, left []RuleWindow, err error) {
	windows, err := Windows(p, taskType, rule, tenant)
	if err != nil {
		return nil, nil, err
	}
	for _, w := range windows {
		if w.Scope == ScopeGlobal {
			left = append(left, w)
		} else {
			reset = append(reset, w)
		}
	}
	if rule != "" && len(reset) == 0 {
		return nil, nil, selectionErrorf("rule %q of %s is global: its window is shared by every tenant, and a tenant's reset never empties it", rule, left[0].TaskType)
	}
	return reset, left, nil
}

// ResetTenant empties tenant's windows of the rules of ScopeTenant that
// ResetPlan(p, taskType, rule, tenant) selects, with the limiter's Reset:
// the admissions in them and the places in line reserved there, whatever
// the algorithm. It never empties a global window: those are returned in
// left, untouched. reset holds the windows emptied, all of them unless
// Redis failed part way. Tasks that held places in an emptied window are
// placed again when they come back. rdb and prefix are as for Usage; on
// more than one shard the windows and the lines woken are those of
// tenant's shard.
func ResetTenant(ctx context.Context, rdb redis.UniversalClient, prefix string, p *Policies, taskType, rule, tenant string) (reset, left []RuleWindow, err error) {
	plan, left, err := ResetPlan(p, taskType, rule, tenant)
	if err != nil {
		return nil, nil, err
	}
	s, err := readShards(ctx, rdb, prefix)
	if err != nil {
		return nil, left, fmt.Errorf("reset for tenant %s: %w", tenant, err)
	}
	for _, w := range plan {
		for _, g := range s.logs(w) {
			if err := s.limiter(g).Reset(ctx, w.Key); err != nil {
				return reset, left, fmt.Errorf("reset %s rule %s for tenant %s%s: %w", w.TaskType, w.Rule, tenant, s.in(g), err)
			}
		}
		reset = append(reset, w)
	}
	// The fair lines look at the room made at once, not when their next
	// slot was due.
	woken := map[string]bool{}
	for _, w := range reset {
		if !woken[w.TaskType] {
			woken[w.TaskType] = true
			g := s.layout.Group(w.TaskType, tenant)
			if err := s.limiter(g).Lines(throttle.LinesConfig{}).Wake(ctx, w.TaskType); err != nil {
				return reset, left, fmt.Errorf("reset %s for tenant %s%s: %w", w.TaskType, tenant, s.in(g), err)
			}
		}
	}
	return reset, left, nil
}
