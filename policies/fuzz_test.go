package policies

// This file is in package policies, not policies_test: the fuzz target walks
// every task type of the policies, which only the package can list.

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
)

// FuzzParsePolicies checks that Parse never panics; that an error
// matches ErrInvalid and is one line that starts with the source; and that
// accepted policies hold only what a worker can enforce: valid task types,
// names, scopes and tenants, policies within throttle's bounds whose windows
// stay within them once widened by the margin, and limiter checks from For
// that validate and whose keys never meet.
func FuzzParsePolicies(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const source = "fuzz.yaml"
		p, err := Parse(source, data)
		if err != nil {
			msg := err.Error()
			if p != nil || !errors.Is(err, ErrInvalid) {
				t.Errorf("Parse = %v, %q; want nil and an error matching ErrInvalid", p, msg)
			}
			if prefix := source + ": invalid policies: "; !strings.HasPrefix(msg, prefix) || len(msg) == len(prefix) {
				t.Errorf("error %q does not start with %q and say what is wrong", msg, prefix)
			}
			if strings.ContainsAny(msg, "\r\n") {
				t.Errorf("error %q is more than one line", msg)
			}
			return
		}
		if p.Source() != source {
			t.Errorf("Source() = %q, want %q", p.Source(), source)
		}
		if s := p.Summary(); strings.ContainsAny(s, "\r\n") {
			t.Errorf("Summary() %q is more than one line", s)
		}
		owner := map[string]string{} // limiter key -> the rule and tenant it counts for
		for _, taskType := range slices.Sorted(maps.Keys(p.tasks)) {
			checkTaskType(t, p, taskType, owner)
		}
		if got := p.For("fuzz:unknown-type", "acme"); got != nil {
			t.Errorf("For of a type without rules = %+v, want nil", got)
		}
	})
}

// parseSeeds are the seed corpus of FuzzParsePolicies: good files, files
// at the bounds, and files that each break one rule.
var parseSeeds = []string{
	"",
	"tasks: {}\n",
	"margin: 100ms\ntasks:\n  sms:send:\n    - name: tenant-per-second\n      scope: tenant\n      limit: 4\n      window: 1s\n      tenants:\n        big: { limit: 8 }\n    - name: provider\n      scope: global\n      limit: 10\n      window: 1s\n  email:send:\n    - {name: tenant-daily, scope: tenant, limit: 1000, window: 24h}\n",
	"tasks:\n  sms:send:\n    - {name: a, scope: tenant, algorithm: gcra, limit: 10000000, window: 3660d, margin: 0s, tenants: {b: {window: 1ms}}}\n",
	"tasks:\n  sms:send:\n    - {name: a, scope: global, algorithm: fixed-window, limit: 1, window: 7d}\n    - {name: b, scope: tenant, algorithm: sliding-window, limit: 1, window: 1h30m, tenants: {acme.eu-1: {limit: 2, window: 2h}}}\n",
	"tasks:\n  sms:send:\n    - {name: a, scope: tenant, limit: 1, window: 73025633904072d}\n",
	"tasks:\n  sms:send:\n    - {name: \"a\\nb\", scope: tenant, limit: 1, window: 1s}\n",
	"tasks:\n  sms:send:\n    - {name: a, scope: tenant, limit: \"1\\n2\", window: 1s}\n",
	"tasks:\n  sms:send:\n    - {name: a, scope: tenant, limit: 1, window: 1s, \"x\\ny\": 1}\n",
	"tasks:\n  sms:send:\n    - {name: a, scope: tenant, limit: 1, window: 1s, tenants: {\"a/b\": {limit: 2}, \"{a}\": {limit: 2}}}\n",
	"tasks:\n  \"sms/send\": []\n  sms:send: &r [{name: a, scope: tenant, limit: 1, window: 1s}]\n  email:send: *r\n",
	"margin: -1s\ntasks: {}\n",
	"tasks: [\n",
	"tasks:\n  sms:sned:\n    - {name: a, scope: tenant, limit: 4, window: 1s}\n",
	"extra_task_types: [report:build]\ntasks:\n  report:build: [{name: a, scope: global, limit: 4.0, window: 1s, tenants: {b: {limit: 0.5}}}]\n",
	"tasks:\n  sms:send:\n    - {name: a, scope: tenant, limit: 4.9, window: 1s, limt: 3}\n  \"x\\ny\":\n    - {limt: 1}\n",
}

// checkTaskType checks the accepted rules of taskType and the limiter
// checks For gives for each of their tenants; owner maps each limiter key
// seen so far to the rule and tenant it counts for.
func checkTaskType(t *testing.T, p *Policies, taskType string, owner map[string]string) {
	t.Helper()
	rules := p.Rules(taskType)
	if !taskTypeRE.MatchString(taskType) || strings.Contains(taskType, "/") {
		t.Errorf("task type %q accepted", taskType)
	}
	// The tenants to resolve the rules for: a plain one, and every
	// tenant with an override.
	tenants := map[string]bool{"acme": true}
	names := map[string]bool{}
	for _, r := range rules {
		checkRule(t, taskType, r)
		if names[r.Name] {
			t.Errorf("%s: rule name %q twice", taskType, r.Name)
		}
		names[r.Name] = true
		for tenant := range r.Tenants {
			tenants[tenant] = true
		}
	}
	for tenant := range tenants {
		applied := p.For(taskType, tenant)
		if len(applied) != len(rules) {
			t.Fatalf("For(%q, %q) has %d checks, want %d", taskType, tenant, len(applied), len(rules))
		}
		for i, a := range applied {
			r := rules[i]
			who := taskType + " rule " + r.Name
			if r.Scope == ScopeTenant {
				who += " tenant " + tenant
			}
			if a.Rule != r.Name || a.Check.Cost != 1 {
				t.Errorf("For(%q, %q)[%d] = %+v, want rule %q at a cost of 1", taskType, tenant, i, a, r.Name)
			}
			if err := a.Check.Policy.Validate(); err != nil {
				t.Errorf("For(%q, %q): check of %s: %v", taskType, tenant, who, err)
			}
			if prev, ok := owner[a.Check.Key]; ok && prev != who {
				t.Errorf("key %q of %s is also the key of %s", a.Check.Key, who, prev)
			}
			owner[a.Check.Key] = who
		}
	}
}

// checkRule checks one accepted rule of taskType: its name and scope, its
// policy and each override's, and the margin each is widened by.
func checkRule(t *testing.T, taskType string, r Rule) {
	t.Helper()
	if !ruleNameRE.MatchString(r.Name) || strings.Contains(r.Name, "/") {
		t.Errorf("%s: rule name %q accepted", taskType, r.Name)
	}
	if r.Scope != ScopeTenant && r.Scope != ScopeGlobal {
		t.Errorf("%s: rule %s: scope %q accepted", taskType, r.Name, r.Scope)
	}
	if r.Scope != ScopeTenant && len(r.Tenants) > 0 {
		t.Errorf("%s: rule %s: overrides in scope %q", taskType, r.Name, r.Scope)
	}
	pols := map[string]throttle.Policy{"": r.Policy}
	for tenant, pol := range r.Tenants {
		if err := producer.ValidateTenant(tenant); err != nil {
			t.Errorf("%s: rule %s: override of tenant %q accepted: %v", taskType, r.Name, tenant, err)
		}
		if pol.Algorithm != r.Policy.Algorithm {
			t.Errorf("%s: rule %s: tenant %s has algorithm %q, the rule %q", taskType, r.Name, tenant, pol.Algorithm, r.Policy.Algorithm)
		}
		pols[tenant] = pol
	}
	for tenant, pol := range pols {
		if err := pol.Validate(); err != nil {
			t.Errorf("%s: rule %s (tenant %q): %v", taskType, r.Name, tenant, err)
		}
		m := r.MarginFor(pol)
		if m < 0 || m >= pol.Window || pol.Window+m > throttle.MaxWindow {
			t.Errorf("%s: rule %s (tenant %q): margin %v of window %v accepted", taskType, r.Name, tenant, m, pol.Window)
		}
	}
}
