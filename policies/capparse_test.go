package policies_test

import (
	"time"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle"
)

// capOf is a concurrency rule's policy: n in flight, each slot leased.
func capOf(n int, lease time.Duration) throttle.Policy {
	return throttle.Policy{Limit: n, Window: lease, Algorithm: throttle.Concurrency}
}

// capAccepts are good concurrency rules.
func capAccepts() []acceptCase {
	return []acceptCase{
		{"concurrency with the default lease", oneRule("name: relay, scope: global, concurrency: 4"),
			map[string][]policies.Rule{"sms:send": {{Name: "relay", Scope: policies.ScopeGlobal, Policy: capOf(4, policies.DefaultLease)}}}},
		{"concurrency with a lease, and a rate beside it", `
tasks:
  sms:send:
    - {name: per-tenant, scope: tenant, concurrency: 2, lease: 30s, tenants: {acme: {concurrency: 5}, globex: {}}}
    - {name: provider, scope: global, limit: 10, window: 1s}
`, map[string][]policies.Rule{"sms:send": {
			withTenants(policies.Rule{Name: "per-tenant", Scope: policies.ScopeTenant, Policy: capOf(2, 30*time.Second)},
				map[string]throttle.Policy{"acme": capOf(5, 30*time.Second), "globex": capOf(2, 30*time.Second)}),
			ruleOf("provider", policies.ScopeGlobal, 10, time.Second),
		}}},
		{"adaptive rate, min by default", oneRule("name: p, scope: global, limit: 200, window: 1s, adaptive: true"),
			map[string][]policies.Rule{"sms:send": {{Name: "p", Scope: policies.ScopeGlobal, Policy: throttle.Policy{Limit: 200, Window: time.Second},
				Adaptive: true, Min: 20}}}},
		{"adaptive cap with a min", oneRule("name: p, scope: global, concurrency: 8, adaptive: true, min: 2"),
			map[string][]policies.Rule{"sms:send": {{Name: "p", Scope: policies.ScopeGlobal, Policy: capOf(8, policies.DefaultLease),
				Adaptive: true, Min: 2}}}},
		{"adaptive false", oneRule("name: p, scope: global, limit: 5, window: 1s, adaptive: false"),
			map[string][]policies.Rule{"sms:send": {ruleOf("p", policies.ScopeGlobal, 5, time.Second)}}},
		{"concurrency in shadow mode", oneRule("name: relay, scope: global, concurrency: 10000, lease: 1m, mode: shadow"),
			map[string][]policies.Rule{"sms:send": {{Name: "relay", Scope: policies.ScopeGlobal, Policy: capOf(10000, time.Minute), Shadow: true}}}},
	}
}

// capRejects are bad concurrency rules, and rate rules given a cap's fields.
func capRejects() []rejectCase {
	return []rejectCase{
		{"concurrency and limit", oneRule("name: r, scope: global, concurrency: 4, limit: 10, window: 1s"),
			[]string{"sms:send: rule 1 (r): limit: a concurrency rule caps the sends in flight"}},
		{"concurrency and window", oneRule("name: r, scope: global, concurrency: 4, window: 1s"), []string{"rule 1 (r): window: a concurrency rule"}},
		{"concurrency and margin", oneRule("name: r, scope: global, concurrency: 4, margin: 10ms"), []string{"rule 1 (r): margin: a concurrency rule"}},
		{"concurrency and algorithm", oneRule("name: r, scope: global, concurrency: 4, algorithm: gcra"), []string{"rule 1 (r): algorithm: a concurrency rule"}},
		{"concurrency 0", oneRule("name: r, scope: global, concurrency: 0"), []string{"rule 1 (r): concurrency: 0 is not 1 to 10000"}},
		{"concurrency too large", oneRule("name: r, scope: global, concurrency: 10001"), []string{"concurrency: 10001 is not 1 to 10000"}},
		{"concurrency null", oneRule("name: r, scope: global, concurrency: "), []string{"concurrency: missing"}},
		{"concurrency not a number", oneRule("name: r, scope: global, concurrency: four"), []string{"concurrency: \"four\" is not a whole number"}},
		{"lease too short", oneRule("name: r, scope: global, concurrency: 4, lease: 500ms"), []string{"lease: 500ms is not 1s to 1m0s"}},
		{"lease too long", oneRule("name: r, scope: global, concurrency: 4, lease: 2m"), []string{"lease: 2m0s is not 1s to 1m0s"}},
		{"lease on a rate", oneRule("name: r, scope: global, limit: 4, window: 1s, lease: 5s"), []string{"rule 1 (r): lease: only a concurrency rule has a lease"}},
		{"override of a cap's limit", oneRule("name: r, scope: tenant, concurrency: 4, tenants: {acme: {limit: 3}}"),
			[]string{"tenants: acme: the rule is a concurrency rule; override its concurrency"}},
		{"override of a rate's concurrency", oneRule("name: r, scope: tenant, limit: 4, window: 1s, tenants: {acme: {concurrency: 3}}"),
			[]string{"tenants: acme: concurrency: the rule is a rate"}},
		{"override of a global cap", oneRule("name: r, scope: global, concurrency: 4, tenants: {acme: {concurrency: 3}}"),
			[]string{"tenants: overrides need scope \"tenant\""}},
		{"min without adaptive", oneRule("name: r, scope: global, limit: 5, window: 1s, min: 2"), []string{"rule 1 (r): min: only an adaptive rule"}},
		{"min above the ceiling", oneRule("name: r, scope: global, limit: 5, window: 1s, adaptive: true, min: 6"), []string{"min: 6 is above the ceiling 5"}},
		{"adaptive shadow", oneRule("name: r, scope: global, limit: 5, window: 1s, adaptive: true, mode: shadow"),
			[]string{"rule 1 (r): adaptive: a rule in shadow mode does not adapt"}},
		{"adaptive gcra", oneRule("name: r, scope: global, limit: 5, window: 1s, algorithm: gcra, adaptive: true"),
			[]string{"adaptive: a rule of algorithm gcra does not adapt"}},
		{"min 0", oneRule("name: r, scope: global, concurrency: 5, adaptive: true, min: 0"), []string{"min: 0 is below 1"}},
		{"adaptive not a bool", oneRule("name: r, scope: global, limit: 5, window: 1s, adaptive: maybe"), []string{"rule 1 (r): adaptive: \"maybe\" is not true or false"}},
		{"an override below min", oneRule("name: r, scope: tenant, limit: 50, window: 1s, adaptive: true, min: 10, tenants: {acme: {limit: 5}}"),
			[]string{"tenants: acme: its ceiling 5 is below the rule's min 10"}},
		{"a bad override's concurrency", oneRule("name: r, scope: tenant, concurrency: 4, tenants: {acme: {concurrency: -1}}"),
			[]string{"tenants: acme: concurrency: -1 is not 1 to 10000"}},
	}
}
