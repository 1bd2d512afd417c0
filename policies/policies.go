package policies

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// Policies are the rules of each task type. A Policies value is never
// changed after it is built, so it is safe for concurrent use; a reload
// builds a new one.
type Policies struct {
	source  string
	tasks   map[string][]Rule
	weights map[string]float64 // the file's weights:, by tenant
}

// Applied is one rule as it applies to a task: its name, the limiter
// check, and whether the rule is in shadow mode (Rule.Shadow).
type Applied struct {
	Rule   string
	Check  throttle.Check
	Shadow bool
	// Shared reports a rule of ScopeGlobal, whose window all tenants
	// share: the fair lines share it among them (docs/FAIRNESS.md).
	Shared bool
	// Margin is what Check.Policy.Window was widened by (Rule.MarginFor).
	Margin time.Duration
	// Min is an adaptive rule's floor (Rule.Min): Check.Policy.Limit is
	// then its ceiling, and the limit in force lies between; 0 when the
	// rule does not adapt.
	Min int
}

// For returns the rules that apply to a task of type taskType for tenant,
// with their limiter keys; nil when the type is not throttled. The key of a
// tenant rule is "rule/<type>/<name>/<tenant>", of a global rule
// "rule/<type>/<name>": types and names contain no "/" and the tenant
// comes last, so keys never meet, whatever the tenant holds (a task's
// tenant is checked by the producer; HTTPRules passes a request's key,
// which may hold "/", as an IPv6 network does).
func (p *Policies) For(taskType, tenant string) []Applied {
	rules := p.tasks[taskType]
	if len(rules) == 0 {
		return nil
	}
	out := make([]Applied, len(rules))
	for i, r := range rules {
		key := ruleKey(taskType, r.Name)
		pol := r.Policy
		if r.Scope == ScopeTenant {
			key += "/" + tenant
			if o, ok := r.Tenants[tenant]; ok {
				pol = o
			}
		}
		margin := r.MarginFor(pol)
		pol.Window += margin
		out[i] = Applied{Rule: r.Name, Check: throttle.Check{Key: key, Policy: pol, Cost: 1}, Shadow: r.Shadow,
			Shared: r.Scope == ScopeGlobal, Margin: margin, Min: r.Min}
	}
	return out
}

// Weight returns tenant's share of the shared rules, relative to the other
// tenants waiting for them (the file's weights:, DefaultWeight for a
// tenant it does not list).
func (p *Policies) Weight(tenant string) float64 {
	if w, ok := p.weights[tenant]; ok {
		return w
	}
	return DefaultWeight
}

// Rules returns the rules of taskType, in file order.
func (p *Policies) Rules(taskType string) []Rule { return p.tasks[taskType] }

// Source names where the policies were read from.
func (p *Policies) Source() string { return p.source }

// Summary describes what the policies enforce in one line, for the start
// log: `sms:send: tenant-per-second 4/1s per tenant (1 override), provider
// 10/1s global; email:send: ...`.
func (p *Policies) Summary() string {
	types := make([]string, 0, len(p.tasks))
	for t := range p.tasks {
		types = append(types, t)
	}
	slices.Sort(types)
	var b strings.Builder
	for i, t := range types {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(t + ":")
		for j, r := range p.tasks[t] {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %s %v", r.Name, r.Policy)
			if r.Scope == ScopeTenant {
				b.WriteString(" per tenant")
				if len(r.Tenants) > 0 {
					fmt.Fprintf(&b, " (%d override%s)", len(r.Tenants), map[bool]string{true: "s"}[len(r.Tenants) > 1])
				}
			} else {
				b.WriteString(" global")
			}
			if r.Shadow {
				b.WriteString(" (shadow)")
			}
		}
	}
	if b.Len() == 0 {
		return "no rules: every task type runs unthrottled"
	}
	return b.String()
}

// ruleKey is the limiter key of rule name of taskType, a tenant rule's
// with "/<tenant>" after it.
func ruleKey(taskType, name string) string { return "rule/" + taskType + "/" + name }
