package policies

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
)

// ErrSelection is matched (errors.Is) by the errors of Windows, Usage,
// ResetPlan and ResetTenant about what they were asked for: a tenant id
// that is not valid, a task type or a rule that the policies do not have,
// or a global rule given to a reset. Such an error is found before
// anything is sent to Redis.
var ErrSelection = errors.New("no such windows")

// selectionError is an error that matches ErrSelection and says, in its
// own words, what was asked for that does not exist.
type selectionError struct{ msg string }

func (e *selectionError) Error() string        { return e.msg }
func (e *selectionError) Is(target error) bool { return target == ErrSelection }

// selectionErrorf returns a *selectionError.
func selectionErrorf(format string, args ...any) error {
	return &selectionError{msg: fmt.Sprintf(format, args...)}
}

// RuleWindow is one rule of the policies as it applies to one tenant: the
// window that workers check for the tenant's tasks of one type. For a rule
// of ScopeTenant it is the tenant's own window; for ScopeGlobal the one that
// every tenant shares.
type RuleWindow struct {
	// TaskType is the task type the rule belongs to, such as "sms:send".
	TaskType string

	// Rule is the rule's name.
	Rule string

	// Scope is ScopeTenant or ScopeGlobal.
	Scope string

	// Tenant is the tenant whose window this is; "" for a global rule,
	// whose window is shared by every tenant.
	Tenant string

	// Key is the limiter key of the window (see Policies.For), such as
	// "rule/sms:send/tenant-per-second/acme".
	Key string

	// Limit is the most tasks admitted in any Window: the rule's, or the
	// tenant's override.
	Limit int

	// Window is the span Limit applies to, as the policies file writes it
	// (the rule's, or the tenant's override), without Margin.
	Window time.Duration

	// Margin is what the worker adds to Window (see Rule.Margin): an
	// admission counts for Window + Margin.
	Margin time.Duration

	// Algorithm is the rule's algorithm; "" is the sliding log.
	Algorithm throttle.Algorithm

	// Shadow reports a rule in shadow mode (Rule.Shadow): its window fills
	// as if it were enforced, but it holds no task back.
	Shadow bool

	// Min is an adaptive rule's floor (Rule.Min); Limit is then its
	// ceiling. 0 for a rule that does not adapt.
	Min int
}

// Check returns the limiter check that workers make for w, as
// Policies.For does: Window widened by Margin, a cost of 1.
func (w RuleWindow) Check() throttle.Check {
	return throttle.Check{
		Key:    w.Key,
		Policy: throttle.Policy{Limit: w.Limit, Window: w.Window + w.Margin, Algorithm: w.Algorithm},
		Cost:   1,
	}
}

// Windows returns the windows of the rules of p that apply to tenant's
// tasks: tenant's own window of every rule of ScopeTenant, and the shared
// window of every rule of ScopeGlobal. taskType "" means every task type of
// p, in name order, and otherwise one that p has rules for; rule "" means
// every rule, in file order, and otherwise the rules of that name (one per
// task type that has it). The keys and policies are those of
// Policies.For. It asks nothing of Redis. An error matches ErrSelection and
// names the tenant, task type or rule that is wrong.
func Windows(p *Policies, taskType, rule, tenant string) ([]RuleWindow, error) {
	if p == nil {
		return nil, errors.New("no policies")
	}
	if err := producer.ValidateTenant(tenant); err != nil {
		if fe, ok := errors.AsType[*producer.FieldError](err); ok {
			return nil, selectionErrorf("tenant %s: %s", fe.Value, fe.Problem)
		}
		return nil, selectionErrorf("tenant: %v", err)
	}
	types := p.TaskTypes()
	if taskType != "" {
		if len(p.Rules(taskType)) == 0 {
			return nil, selectionErrorf("task type %q has no rules in %s (it runs unthrottled); %s", taskType, p.Source(), p.listTypes())
		}
		types = []string{taskType}
	}
	var out []RuleWindow
	for _, t := range types {
		rules := p.Rules(t)
		for i, a := range p.For(t, tenant) {
			r := rules[i]
			if rule != "" && r.Name != rule {
				continue
			}
			pol := r.Policy
			w := RuleWindow{TaskType: t, Rule: r.Name, Scope: r.Scope, Key: a.Check.Key, Limit: a.Check.Policy.Limit,
				Algorithm: pol.Algorithm, Shadow: a.Shadow, Min: a.Min}
			if r.Scope == ScopeTenant {
				w.Tenant = tenant
				if o, ok := r.Tenants[tenant]; ok {
					pol = o
				}
			}
			// The check is For's: the margin is what it added.
			w.Window, w.Margin = pol.Window, a.Check.Policy.Window-pol.Window
			out = append(out, w)
		}
	}
	if rule != "" && len(out) == 0 {
		where := "task type " + strings.Join(types, ", ")
		if taskType == "" {
			where = "any task type"
		}
		return nil, selectionErrorf("rule %q is not a rule of %s in %s; %s", rule, where, p.Source(), p.listRules(types))
	}
	return out, nil
}

// TaskTypes returns the task types that p has rules for, in name order.
func (p *Policies) TaskTypes() []string {
	types := make([]string, 0, len(p.tasks))
	for t := range p.tasks {
		types = append(types, t)
	}
	slices.Sort(types)
	return types
}

// listTypes says which task types p has rules for, for an error message.
func (p *Policies) listTypes() string {
	types := p.TaskTypes()
	if len(types) == 0 {
		return "it has rules for no task type"
	}
	return "it has rules for " + strings.Join(types, ", ")
}

// listRules says which rules the task types have, for an error message.
func (p *Policies) listRules(types []string) string {
	var names []string
	for _, t := range types {
		for _, r := range p.Rules(t) {
			names = append(names, t+" "+r.Name)
		}
	}
	if len(names) == 0 {
		return "it has no rules"
	}
	return "its rules: " + strings.Join(names, ", ")
}
