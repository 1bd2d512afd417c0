package policies_test

// The tables of TestParseAccepts and TestParseRejects.

import (
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle"
)

// acceptCase is a good policies file and the rules Parse must read from it.
type acceptCase struct {
	name string
	yaml string
	want map[string][]policies.Rule // by task type; types not listed must have no rules
}

// ruleOf is a rule of one policy without overrides.
func ruleOf(name, scope string, limit int, window time.Duration) policies.Rule {
	return policies.Rule{Name: name, Scope: scope, Policy: throttle.Policy{Limit: limit, Window: window}}
}

// withTenants is r with the overrides tenants.
func withTenants(r policies.Rule, tenants map[string]throttle.Policy) policies.Rule {
	r.Tenants = tenants
	return r
}

// acceptCases lists the good files of TestParseAccepts.
func acceptCases() []acceptCase {
	return slices.Concat(scopeAndWindowAccepts(), overrideAndYAMLAccepts(), capAccepts())
}

// scopeAndWindowAccepts covers both scopes, the order of rules, and
// windows as Go durations and as days.
func scopeAndWindowAccepts() []acceptCase {
	const day = 24 * time.Hour
	return []acceptCase{
		{"tenant scope", `
tasks:
  sms:send:
    - {name: per-second, scope: tenant, limit: 4, window: 1s}
`, map[string][]policies.Rule{"sms:send": {ruleOf("per-second", policies.ScopeTenant, 4, time.Second)}}},
		{"global scope", `
tasks:
  sms:send:
    - {name: provider, scope: global, limit: 10, window: 1s}
`, map[string][]policies.Rule{"sms:send": {ruleOf("provider", policies.ScopeGlobal, 10, time.Second)}}},
		{"rules keep file order", `
tasks:
  sms:send:
    - {name: z, scope: tenant, limit: 1, window: 1s}
    - {name: a, scope: global, limit: 2, window: 1s}
    - {name: m, scope: tenant, limit: 3, window: 1s}
`, map[string][]policies.Rule{"sms:send": {
			ruleOf("z", policies.ScopeTenant, 1, time.Second),
			ruleOf("a", policies.ScopeGlobal, 2, time.Second),
			ruleOf("m", policies.ScopeTenant, 3, time.Second),
		}}},
		{"same rule name in two task types", `
tasks:
  sms:send:   [{name: daily, scope: tenant, limit: 1, window: 1d}]
  email:send: [{name: daily, scope: tenant, limit: 2, window: 1d}]
`, map[string][]policies.Rule{
			"sms:send":   {ruleOf("daily", policies.ScopeTenant, 1, day)},
			"email:send": {ruleOf("daily", policies.ScopeTenant, 2, day)},
		}},
		{"Go durations", `
tasks:
  sms:send:
    - {name: a, scope: tenant, limit: 1, window: 1m30s}
    - {name: b, scope: tenant, limit: 1, window: 24h}
    - {name: c, scope: tenant, limit: 1, window: 250ms}
`, map[string][]policies.Rule{"sms:send": {
			ruleOf("a", policies.ScopeTenant, 1, 90*time.Second),
			ruleOf("b", policies.ScopeTenant, 1, day),
			ruleOf("c", policies.ScopeTenant, 1, 250*time.Millisecond),
		}}},
		{"days", `
tasks:
  sms:send:
    - {name: a, scope: tenant, limit: 1, window: 1d}
    - {name: b, scope: global, limit: 1, window: 7d}
`, map[string][]policies.Rule{"sms:send": {
			ruleOf("a", policies.ScopeTenant, 1, day),
			ruleOf("b", policies.ScopeGlobal, 1, 7*day),
		}}},
	}
}

// overrideAndYAMLAccepts covers the bounds of a policy, overrides, types
// of one's own, YAML merges and aliases, and files with no rules.
func overrideAndYAMLAccepts() []acceptCase {
	const day = 24 * time.Hour
	return []acceptCase{
		{"bounds of a policy", `
margin: 0s
tasks:
  sms:send:
    - {name: smallest, scope: tenant, limit: 1, window: 1ms}
    - {name: largest, scope: tenant, limit: 100000, window: 3660d}
`, map[string][]policies.Rule{"sms:send": {
			ruleOf("smallest", policies.ScopeTenant, 1, throttle.MinWindow),
			ruleOf("largest", policies.ScopeTenant, throttle.MaxLimit, throttle.MaxWindow),
		}}},
		{"overrides of the limit, the window, both", `
tasks:
  sms:send:
    - name: per-second
      scope: tenant
      limit: 4
      window: 1s
      tenants:
        big: {limit: 8}
        slow: {window: 1m}
        odd: {limit: 100, window: 2d}
        same: {}
`, map[string][]policies.Rule{"sms:send": {withTenants(ruleOf("per-second", policies.ScopeTenant, 4, time.Second), map[string]throttle.Policy{
			"big":  {Limit: 8, Window: time.Second},
			"slow": {Limit: 4, Window: time.Minute},
			"odd":  {Limit: 100, Window: 2 * day},
			"same": {Limit: 4, Window: time.Second},
		})}}},
		{"a type of one's own, listed", `
extra_task_types: [push:send, report:build]
tasks:
  push:send: [{name: a, scope: tenant, limit: 1, window: 1s}]
`, map[string][]policies.Rule{"push:send": {ruleOf("a", policies.ScopeTenant, 1, time.Second)}}},
		{"whole numbers written as floats", `
tasks:
  sms:send: [{name: a, scope: tenant, limit: 4.0, window: 1s, tenants: {big: {limit: 1e3}}}]
`, map[string][]policies.Rule{"sms:send": {withTenants(ruleOf("a", policies.ScopeTenant, 4, time.Second),
			map[string]throttle.Policy{"big": {Limit: 1000, Window: time.Second}})}}},
		{"task types merged in", `
tasks:
  <<: {sms:send: [{name: a, scope: tenant, limit: 2, window: 1s}]}
  email:send: [{name: b, scope: global, limit: 3, window: 1s}]
`, map[string][]policies.Rule{"sms:send": {ruleOf("a", policies.ScopeTenant, 2, time.Second)}, "email:send": {ruleOf("b", policies.ScopeGlobal, 3, time.Second)}}},
		{"a limit through an alias", `
tasks:
  sms:send: [{name: a, scope: tenant, limit: &four 4, window: 1s}, {name: b, scope: global, limit: *four, window: 1s}]
`, map[string][]policies.Rule{"sms:send": {ruleOf("a", policies.ScopeTenant, 4, time.Second), ruleOf("b", policies.ScopeGlobal, 4, time.Second)}}},
		{"tenants merged in", `
tasks:
  sms:send: [{name: a, scope: tenant, limit: 4, window: 1s, tenants: {<<: [{acme: {limit: 1}}, {acme: {limit: 9}, globex: {limit: 2}}], globex: {limit: 3}}}]
`, map[string][]policies.Rule{"sms:send": {withTenants(ruleOf("a", policies.ScopeTenant, 4, time.Second),
			map[string]throttle.Policy{"acme": {Limit: 1, Window: time.Second}, "globex": {Limit: 3, Window: time.Second}})}}},
		{"nothing throttled", "tasks: {}\n", nil},
		{"a type with an empty list", "tasks:\n  sms:send: []\n", nil},
	}
}

// rejectCase is a bad policies file and what its error must say.
type rejectCase struct {
	name string
	yaml string
	want []string // substrings of the error, after "policies.yaml: invalid policies: "
}

// oneRule is a file with one sms:send rule made of fields.
func oneRule(fields string) string { return "tasks:\n  sms:send:\n    - {" + fields + "}\n" }

// rejectCases lists the bad files of TestParseRejects.
func rejectCases() []rejectCase {
	return slices.Concat(shapeRejects(), nameRejects(), limitAndWindowRejects(), algorithmAndOverrideRejects(), capRejects())
}

// shapeRejects are files whose shape is wrong.
func shapeRejects() []rejectCase {
	return []rejectCase{
		// The shape of the file.
		{"not YAML", "tasks: [", []string{"yaml: "}},
		{"empty file", "", []string{"no tasks: ", "tasks: {}"}},
		{"comments only", "# nothing yet\n", []string{"no tasks: "}},
		{"tasks left empty", "tasks:\n", []string{"no tasks: "}},
		{"tabs for indentation", "tasks:\n\tsms:send: []\n", []string{"yaml: "}},
		{"a list at the top", "- tasks\n", []string{"cannot unmarshal"}},
		{"tasks is not a map", "tasks: 5\n", []string{"line 1", "cannot unmarshal"}},
		{"rules are not a list", "tasks:\n  sms:send: {name: a}\n", []string{"line 2", "cannot unmarshal"}},
		{"unknown top-level field", "task:\n  sms:send: []\n",
			[]string{`line 1: unknown field "task" (did you mean tasks?); the file's fields are margin, extra_task_types, weights, tasks`}},
		{"unknown rule field", "tasks:\n  sms:send:\n    - name: a\n      scope: tenant\n      limt: 4\n      window: 1s\n",
			[]string{`line 5: sms:send: rule 1 (a): unknown field "limt" (did you mean limit?); a rule's fields are name, scope, limit, window, margin, algorithm, concurrency, lease, adaptive, min, mode, tenants`}},
		{"unknown rule field, not a slip", oneRule("name: a, scope: tenant, limit: 1, window: 1s, burst: 3"),
			[]string{`line 3: sms:send: rule 1 (a): unknown field "burst"; a rule's fields are `}},
		{"unknown field of a rule without a name", oneRule("scope: tenant, limit: 1, window: 1s, Scope: global"),
			[]string{`line 3: sms:send: rule 1: unknown field "Scope" (did you mean scope?)`}},
		{"unknown field of the second rule", "tasks:\n  email:send:\n    - {name: a, scope: tenant, limit: 1, window: 1s}\n    - {name: b, scope: tenant, limit: 1, windw: 1s}\n",
			[]string{`line 4: email:send: rule 2 (b): unknown field "windw" (did you mean window?)`}},
		{"unknown override field", oneRule("name: a, scope: tenant, limit: 1, window: 1s, tenants: {big: {limt: 2}}"),
			[]string{`line 3: sms:send: rule 1 (a): tenants: big: unknown field "limt" (did you mean limit?); an override's fields are limit, window, concurrency`}},
		{"limit not a number", oneRule("name: a, scope: tenant, limit: four, window: 1s"),
			[]string{`sms:send: rule 1 (a): limit: "four" is not a whole number such as 10`}},
		{"hexadecimal limit", oneRule("name: a, scope: tenant, limit: 0x10, window: 1s"),
			[]string{`sms:send: rule 1 (a): limit: 0x10 on line 3 is not a decimal whole number: write 16`}},
		{"octal limit", oneRule("name: a, scope: tenant, limit: 0o20, window: 1s"),
			[]string{`sms:send: rule 1 (a): limit: 0o20 on line 3 is not a decimal whole number: write 16`}},
		{"limit with a leading zero", oneRule("name: a, scope: tenant, limit: 010, window: 1s"),
			[]string{`limit: 010 on line 3 is not a decimal whole number: write 8`}},
		{"hexadecimal override", oneRule("name: a, scope: tenant, limit: 1, window: 1s, tenants: {big: {limit: 0x10}}"),
			[]string{`sms:send: rule 1 (a): tenants: big: limit: 0x10 on line 3 is not a decimal whole number: write 16`}},
		{"a second document", "tasks: {}\n---\ntasks:\n  sms:send: []\n",
			[]string{`line 2: a second YAML document (after ---): a policies file holds one`}},
		{"an empty second document", "tasks: {}\n---\n", []string{`line 2: a second YAML document`}},
		{"limit a list", oneRule("name: a, scope: tenant, limit: [4], window: 1s"),
			[]string{`sms:send: rule 1 (a): limit: not a number`}},
		{"a value with a line break", oneRule(`name: a, scope: tenant, limit: "1\n2", window: 1s`),
			[]string{`sms:send: rule 1 (a): limit: "1 2" is not a whole number`}},
		{"a key with a line break", oneRule(`name: a, scope: tenant, limit: 1, window: 1s, "x\ny": 1`),
			[]string{`line 3: sms:send: rule 1 (a): unknown field "x\ny"`}},
		{"a document with a line break", "0\n\n00", []string{"cannot unmarshal !!str `0 00`"}},
		{"task type twice", "tasks:\n  sms:send: []\n  sms:send: []\n", []string{`"sms:send" already defined`}},
		{"tenant twice", oneRule("name: a, scope: tenant, limit: 1, window: 1s, tenants: {acme: {limit: 2}, acme: {limit: 3}}"),
			[]string{`mapping key "acme" already defined at line 3`}},
		{"weight twice", "weights: {acme: 2, acme: 3}\ntasks: {}\n", []string{`mapping key "acme" already defined at line 1`}},
		{"an override's field misspelled in a merge", oneRule("name: a, scope: tenant, limit: 1, window: 1s, tenants: {acme: {<<: {limt: 2}}}"),
			[]string{"line 3: field limt not found"}},
		{"a rule's field misspelled in a merged type", "tasks:\n  <<: {sms:send: [{name: a, scope: tenant, limt: 1, window: 1s}]}\n",
			[]string{"line 2: field limt not found"}},
		{"a large mapping where none belongs", oneRule("name: a, scope: tenant, limit: 1, window: {" + manyKeys(17) + "}"),
			[]string{"line 3: a mapping of 17 keys: only tasks:, weights: and tenants: hold more than 16"}},
	}
}

// nameRejects are bad task types, rule names and scopes.
func nameRejects() []rejectCase {
	return []rejectCase{
		// Task types.
		{"task type with a space", "tasks:\n  sms send:\n    - {name: a, scope: tenant, limit: 1, window: 1s}\n",
			[]string{`task type "sms send": use letters, digits and : . _ -`}},
		{"task type with a slash", "tasks:\n  sms/send: []\n", []string{`task type "sms/send"`}},
		{"misspelled task type", "tasks:\n  sms:send: []\n  sms:sned:\n    - {name: a, scope: tenant, limit: 4, window: 1s}\n",
			[]string{`line 3: task type "sms:sned" (did you mean sms:send?): no worker handles it, so its rules would never apply; ` +
				`the known types are email:send, sms:send: list a type of your own under extra_task_types`}},
		{"a type of one's own, not listed", "tasks:\n  report:build: []\n",
			[]string{`line 2: task type "report:build": no worker handles it`}},
		{"a type of one's own, listed as another", "extra_task_types: [report:built]\ntasks:\n  report:build: []\n",
			[]string{`line 3: task type "report:build" (did you mean report:built?)`, "the known types are email:send, report:built, sms:send"}},
		{"a misspelled task type merged in", "tasks:\n  <<: {sms:sned: []}\n  sms:send: []\n",
			[]string{`task type "sms:sned" (did you mean sms:send?): no worker handles it`}},
		{"a task type in capitals", "tasks:\n  SMS:send: []\n", []string{`task type "SMS:send" (did you mean sms:send?)`}},
		{"extra task types not a list", "extra_task_types: report:build\ntasks: {}\n", []string{"line 1", "cannot unmarshal"}},
		{"extra task type with a space", "extra_task_types: [report build]\ntasks: {}\n",
			[]string{`extra_task_types: "report build": use letters, digits and : . _ -`}},

		// Names.
		{"missing name", oneRule("scope: tenant, limit: 1, window: 1s"),
			[]string{`sms:send: rule 1: name: "" must be 1 to 64 letters, digits, . _ or -`}},
		{"name with a slash", oneRule("name: a/b, scope: tenant, limit: 1, window: 1s"),
			[]string{`sms:send: rule 1 (a/b): name: "a/b" must be`}},
		{"name with a line break", oneRule(`name: "a\nb", scope: tenant, limit: 1, window: 1s`),
			[]string{`sms:send: rule 1: name: "a\nb" must be`}},
		{"name too long", oneRule("name: " + strings.Repeat("n", 65) + ", scope: tenant, limit: 1, window: 1s"),
			[]string{"sms:send: rule 1 (" + strings.Repeat("n", 65) + "): name: "}},
		{"duplicate rule names", "tasks:\n  sms:send:\n    - {name: a, scope: tenant, limit: 1, window: 1s}\n    - {name: a, scope: global, limit: 9, window: 1s}\n",
			[]string{`sms:send: rule 2 (a): name: "a" is used twice`}},

		// Scopes.
		{"missing scope", oneRule("name: a, limit: 1, window: 1s"),
			[]string{`sms:send: rule 1 (a): scope: "" must be "tenant" or "global"`}},
		{"unknown scope", oneRule("name: a, scope: tenants, limit: 1, window: 1s"),
			[]string{`sms:send: rule 1 (a): scope: "tenants" must be "tenant" or "global"`}},
		{"scope in capitals", oneRule("name: a, scope: Global, limit: 1, window: 1s"),
			[]string{`sms:send: rule 1 (a): scope: "Global"`}},
	}
}

// limitAndWindowRejects are bad limits, windows and modes.
func limitAndWindowRejects() []rejectCase {
	return []rejectCase{
		// Limits.
		{"missing limit", oneRule("name: a, scope: tenant, window: 1s"),
			[]string{"sms:send: rule 1 (a): limit: missing: give how many tasks a window admits, a whole number such as 10"}},
		{"empty limit", oneRule("name: a, scope: tenant, limit: , window: 1s"),
			[]string{"sms:send: rule 1 (a): limit: missing: "}},
		{"fractional limit", oneRule("name: a, scope: tenant, limit: 4.9, window: 1s"),
			[]string{"sms:send: rule 1 (a): limit: 4.9 is not a whole number: a window admits whole tasks; write 4 or 5"}},
		{"limit below one", oneRule("name: a, scope: tenant, limit: 0.5, window: 1s"),
			[]string{"sms:send: rule 1 (a): limit: 0.5 is less than one task a window: a window admits whole tasks; " +
				"for one task every 2s, write limit: 1 and window: 2s"}},
		{"negative fractional limit", oneRule("name: a, scope: tenant, limit: -0.5, window: 1s"),
			[]string{"sms:send: rule 1 (a): limit: -0.5 is not a whole number of at least 1"}},
		{"limit beyond an int", oneRule("name: a, scope: tenant, limit: 99999999999999999999, window: 1s"),
			[]string{"sms:send: rule 1 (a): limit: 99999999999999999999 is out of range"}},
		{"limit beyond an int, as a float", oneRule("name: a, scope: tenant, limit: 1e10, window: 1s"),
			[]string{"sms:send: rule 1 (a): limit: 1e10 is out of range"}},
		{"negative limit beyond an int", oneRule("name: a, scope: tenant, limit: -3000000000, window: 1s"),
			[]string{"sms:send: rule 1 (a): limit: -3000000000 is out of range"}},
		{"limit so far below one its window would be too long", oneRule("name: a, scope: tenant, limit: 0.0001, window: 30d"),
			[]string{"sms:send: rule 1 (a): limit: 0.0001 is less than one task a window: a window admits whole tasks"}},
		{"limit not a finite number", oneRule("name: a, scope: tenant, limit: .inf, window: 1s"),
			[]string{`sms:send: rule 1 (a): limit: ".inf" is not a whole number`}},
		{"override with a fractional limit", oneRule("name: a, scope: tenant, limit: 1, window: 1s, tenants: {big: {limit: 8.5}}"),
			[]string{"sms:send: rule 1 (a): tenants: big: limit: 8.5 is not a whole number: a window admits whole tasks; write 8 or 9"}},
		{"override with a limit below one", oneRule("name: a, scope: tenant, limit: 1, window: 1s, tenants: {slow: {limit: 0.25, window: 1m}}"),
			[]string{"sms:send: rule 1 (a): tenants: slow: limit: 0.25 is less than one task a window: a window admits whole tasks; " +
				"for one task every 4m0s, write limit: 1 and window: 4m0s"}},
		{"zero limit", oneRule("name: a, scope: tenant, limit: 0, window: 1s"),
			[]string{"sms:send: rule 1 (a): limit 0, window 1s: ", "limit 0 is below 1"}},
		{"negative limit", oneRule("name: a, scope: tenant, limit: -3, window: 1s"),
			[]string{"sms:send: rule 1 (a): limit -3, window 1s: ", "limit -3 is below 1"}},
		{"limit too large", oneRule("name: a, scope: tenant, limit: 100001, window: 1s"),
			[]string{"sms:send: rule 1 (a): limit 100001, window 1s: ", "above the maximum of 100000"}},

		// Windows.
		{"missing window", oneRule("name: a, scope: tenant, limit: 1"), []string{"sms:send: rule 1 (a): window: missing"}},
		{"window not a duration", oneRule("name: a, scope: tenant, limit: 1, window: fast"),
			[]string{`sms:send: rule 1 (a): window: "fast" is not a duration such as 1s, 1m or 24h`}},
		{"window without a unit", oneRule("name: a, scope: tenant, limit: 1, window: 60"),
			[]string{`sms:send: rule 1 (a): window: "60" is not a duration`}},
		{"zero days", oneRule("name: a, scope: tenant, limit: 1, window: 0d"),
			[]string{`sms:send: rule 1 (a): window: "0d" is not a whole number of days`}},
		{"negative days", oneRule("name: a, scope: tenant, limit: 1, window: -2d"),
			[]string{`window: "-2d" is not a whole number of days`}},
		{"fractional days", oneRule("name: a, scope: tenant, limit: 1, window: 1.5d"),
			[]string{`window: "1.5d" is not a whole number of days`}},
		{"zero window", oneRule("name: a, scope: tenant, limit: 1, window: 0s"),
			[]string{"sms:send: rule 1 (a): limit 1, window 0s: ", "shorter than 1ms"}},
		{"negative window", oneRule("name: a, scope: tenant, limit: 1, window: -1s"),
			[]string{"sms:send: rule 1 (a): limit 1, window -1s: ", "shorter than 1ms"}},
		{"window too short", oneRule("name: a, scope: tenant, limit: 1, window: 500us"),
			[]string{"window 500us: ", "shorter than 1ms"}},
		{"window too long", oneRule("name: a, scope: tenant, limit: 1, window: 3661d"),
			[]string{"window 3661d: ", "longer than"}},
		{"days beyond a Duration", oneRule("name: a, scope: tenant, limit: 1, window: 73025633904072d"),
			[]string{`sms:send: rule 1 (a): window: "73025633904072d" is longer than 87840h0m0s`}},
		{"days beyond a Duration in an override", oneRule("name: a, scope: tenant, limit: 1, window: 1s, tenants: {big: {window: 106752d}}"),
			[]string{`tenants: big: window: "106752d" is longer than`}},

		// Modes.
		{"unknown mode", oneRule("name: a, scope: tenant, mode: dry-run, limit: 1, window: 1s"),
			[]string{`sms:send: rule 1 (a): mode: "dry-run" must be "enforce" (the default) or "shadow"`}},
		{"mode in an override", oneRule("name: a, scope: tenant, limit: 1, window: 1s, tenants: {big: {mode: shadow}}"),
			[]string{"line 3", `tenants: big: unknown field "mode"; an override's fields are limit, window, concurrency`}},
	}
}

// algorithmAndOverrideRejects are bad algorithms and overrides, and rules
// at fault named by their place among their type's rules.
func algorithmAndOverrideRejects() []rejectCase {
	return []rejectCase{
		// Algorithms.
		{"unknown algorithm", oneRule("name: a, scope: tenant, algorithm: leaky-bucket, limit: 1, window: 1s"),
			[]string{`sms:send: rule 1 (a): algorithm: "leaky-bucket" must be "sliding-log", "sliding-window", "gcra" or "fixed-window"`}},
		{"algorithm in capitals", oneRule("name: a, scope: tenant, algorithm: GCRA, limit: 1, window: 1s"),
			[]string{`sms:send: rule 1 (a): algorithm: "GCRA" must be`}},
		{"algorithm not a string", oneRule("name: a, scope: tenant, algorithm: [gcra], limit: 1, window: 1s"),
			[]string{"line 3", "cannot unmarshal"}},
		{"algorithm in an override", oneRule("name: a, scope: tenant, algorithm: gcra, limit: 1, window: 1s, tenants: {big: {algorithm: fixed-window}}"),
			[]string{"line 3", `tenants: big: unknown field "algorithm"`}},
		{"limit above the maximum of a counter", oneRule("name: a, scope: tenant, algorithm: gcra, limit: 10000001, window: 1s"),
			[]string{"sms:send: rule 1 (a): limit 10000001, window 1s: ", "above the maximum of 10000000 for gcra"}},
		{"override above the maximum of the log", oneRule("name: a, scope: tenant, limit: 1, window: 1s, tenants: {big: {limit: 200000}}"),
			[]string{"sms:send: rule 1 (a): tenants: big: ", "above the maximum of 100000"}},
		{"override above the maximum of a counter", oneRule("name: a, scope: tenant, algorithm: sliding-window, limit: 1, window: 1s, tenants: {big: {limit: 20000000}}"),
			[]string{"sms:send: rule 1 (a): tenants: big: ", "above the maximum of 10000000 for sliding-window"}},

		// Overrides.
		{"overrides on a global rule", oneRule("name: provider, scope: global, limit: 10, window: 1s, tenants: {big: {limit: 20}}"),
			[]string{`sms:send: rule 1 (provider): tenants: overrides need scope "tenant"`}},
		{"override for a bad tenant id", oneRule("name: a, scope: tenant, limit: 1, window: 1s, tenants: {'a b': {limit: 2}}"),
			[]string{`sms:send: rule 1 (a): tenants: `, `tenant "a b"`}},
		{"override with a zero limit", oneRule("name: a, scope: tenant, limit: 1, window: 1s, tenants: {big: {limit: 0}}"),
			[]string{"sms:send: rule 1 (a): tenants: big: ", "limit 0 is below 1"}},
		{"override with a limit too large", oneRule("name: a, scope: tenant, limit: 1, window: 1s, tenants: {big: {limit: 100001}}"),
			[]string{"sms:send: rule 1 (a): tenants: big: ", "above the maximum"}},
		{"override with a bad window", oneRule("name: a, scope: tenant, limit: 1, window: 1s, tenants: {big: {window: soon}}"),
			[]string{`sms:send: rule 1 (a): tenants: big: window: "soon" is not a duration`}},
		{"override with an empty window", oneRule("name: a, scope: tenant, limit: 1, window: 1s, tenants: {big: {window: ''}}"),
			[]string{"sms:send: rule 1 (a): tenants: big: window: missing"}},

		// The rule at fault is named by its place among its type's rules.
		{"third rule", "tasks:\n  sms:send:\n    - {name: a, scope: tenant, limit: 1, window: 1s}\n    - {name: b, scope: tenant, limit: 1, window: 1s}\n    - {name: c, scope: tenant, limit: 1, window: 1x}\n",
			[]string{`sms:send: rule 3 (c): window: "1x"`}},
		{"email rule", "tasks:\n  sms:send: [{name: a, scope: tenant, limit: 1, window: 1s}]\n  email:send: [{name: b, scope: nobody, limit: 1, window: 1s}]\n",
			[]string{`email:send: rule 1 (b): scope: "nobody"`}},
	}
}
