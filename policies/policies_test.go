package policies_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
)

const examplePolicies = "../examples/policies.yaml"

// ignoreMargin leaves Rule.Margin out of comparisons: TestPoliciesMargin
// covers it.
var ignoreMargin = cmp.Options{cmpopts.IgnoreFields(policies.Rule{}, "Margin"), cmpopts.IgnoreUnexported(policies.Rule{})}

// TestLoadExample loads the sample file of the README, rule by rule.
func TestLoadExample(t *testing.T) {
	t.Parallel()
	p, err := policies.Load(examplePolicies)
	if err != nil {
		t.Fatalf("Load(%s): %v", examplePolicies, err)
	}
	if got, want := p.Source(), examplePolicies; got != want {
		t.Errorf("Source() = %q, want %q", got, want)
	}
	cases := []struct {
		taskType string
		want     []policies.Rule
	}{
		{"sms:send", []policies.Rule{
			{Name: "tenant-per-second", Scope: policies.ScopeTenant, Policy: throttle.PerSecond(4),
				Tenants: map[string]throttle.Policy{"big": throttle.PerSecond(8)}},
			{Name: "provider", Scope: policies.ScopeGlobal, Policy: throttle.PerSecond(10)},
		}},
		{"email:send", []policies.Rule{
			{Name: "tenant-daily", Scope: policies.ScopeTenant, Policy: throttle.PerDay(1000)},
		}},
		{"push:send", nil},
	}
	for _, tc := range cases {
		t.Run(tc.taskType, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, p.Rules(tc.taskType), ignoreMargin); diff != "" {
				t.Errorf("Rules(%q) (-want +got):\n%s", tc.taskType, diff)
			}
		})
	}
}

// TestParseAccepts reads good files: both scopes, overrides of the
// limit, the window or both, windows as Go durations and as days, the
// bounds of a policy, and files with no rules.
func TestParseAccepts(t *testing.T) {
	t.Parallel()
	for _, tc := range acceptCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := policies.Parse("policies.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			for _, typ := range []string{"sms:send", "email:send", "push:send"} {
				if diff := cmp.Diff(tc.want[typ], p.Rules(typ), ignoreMargin); diff != "" {
					t.Errorf("Rules(%q) (-want +got):\n%s", typ, diff)
				}
			}
			if len(tc.want) == 0 {
				if got, want := p.Summary(), "no rules: every task type runs unthrottled"; got != want {
					t.Errorf("Summary() = %q, want %q", got, want)
				}
			}
		})
	}
}

// TestParseRejects reads bad files. Every error matches ErrInvalid
// and starts with the file's name; those about a rule name the task type,
// the rule (its number, and its name when it has one) and the field.
func TestParseRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range rejectCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := policies.Parse("policies.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("Parse = %v, want an error", p.Summary())
			}
			if p != nil {
				t.Errorf("Parse returned policies (%s) with its error", p.Summary())
			}
			if !errors.Is(err, policies.ErrInvalid) {
				t.Errorf("error %q does not match ErrInvalid", err)
			}
			const prefix = "policies.yaml: invalid policies: "
			msg, ok := strings.CutPrefix(err.Error(), prefix)
			if !ok {
				t.Fatalf("error %q does not start with %q", err, prefix)
			}
			for _, want := range tc.want {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if strings.ContainsAny(msg, "\r\n") {
				t.Errorf("error %q is more than one line", err)
			}
		})
	}
}

// TestLoadErrors: the errors of Load name the file.
func TestLoadErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("tasks:\n  sms:send: [{name: a, scope: tenant, limit: 0, window: 1s}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	cases := []struct {
		name   string
		path   string
		wantIs error
	}{
		{"invalid", bad, policies.ErrInvalid},
		{"missing", missing, fs.ErrNotExist},
		{"a directory", dir, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := policies.Load(tc.path)
			if err == nil {
				t.Fatalf("Load(%s) = %v, want an error", tc.path, p.Summary())
			}
			if !strings.Contains(err.Error(), tc.path) {
				t.Errorf("error %q does not name the file %s", err, tc.path)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %q does not match %v", err, tc.wantIs)
			}
		})
	}
}

// TestPoliciesFor resolves the rules of the example file for a task: one
// limiter check per rule, keyed per tenant or globally, with the tenant's
// override, widened by the rule's Margin (and saying by how much), at a
// cost of 1.
func TestPoliciesFor(t *testing.T) {
	t.Parallel()
	p, err := policies.Load(examplePolicies)
	if err != nil {
		t.Fatal(err)
	}
	// margin is the margin of pol under the rule named name of taskType.
	margin := func(taskType, name string, pol throttle.Policy) time.Duration {
		for _, r := range p.Rules(taskType) {
			if r.Name == name {
				return r.MarginFor(pol)
			}
		}
		t.Fatalf("no rule %s of %s", name, taskType)
		return 0
	}
	applied := func(taskType, name, key string, pol throttle.Policy) policies.Applied {
		m := margin(taskType, name, pol)
		pol.Window += m
		// A global rule's key has no tenant: it is shared.
		return policies.Applied{Rule: name, Check: throttle.Check{Key: key, Policy: pol, Cost: 1},
			Shared: strings.Count(key, "/") == 2, Margin: m}
	}
	cases := []struct {
		name     string
		taskType string
		tenant   string
		want     []policies.Applied
	}{
		{"tenant and global rules", "sms:send", "acme", []policies.Applied{
			applied("sms:send", "tenant-per-second", "rule/sms:send/tenant-per-second/acme", throttle.PerSecond(4)),
			applied("sms:send", "provider", "rule/sms:send/provider", throttle.PerSecond(10)),
		}},
		{"another tenant has its own key, shares the global one", "sms:send", "globex", []policies.Applied{
			applied("sms:send", "tenant-per-second", "rule/sms:send/tenant-per-second/globex", throttle.PerSecond(4)),
			applied("sms:send", "provider", "rule/sms:send/provider", throttle.PerSecond(10)),
		}},
		{"override", "sms:send", "big", []policies.Applied{
			applied("sms:send", "tenant-per-second", "rule/sms:send/tenant-per-second/big", throttle.PerSecond(8)),
			applied("sms:send", "provider", "rule/sms:send/provider", throttle.PerSecond(10)),
		}},
		{"override is by exact tenant id", "sms:send", "Big", []policies.Applied{
			applied("sms:send", "tenant-per-second", "rule/sms:send/tenant-per-second/Big", throttle.PerSecond(4)),
			applied("sms:send", "provider", "rule/sms:send/provider", throttle.PerSecond(10)),
		}},
		{"other type", "email:send", "acme", []policies.Applied{
			applied("email:send", "tenant-daily", "rule/email:send/tenant-daily/acme", throttle.PerDay(1000)),
		}},
		{"type without rules", "push:send", "acme", nil},
		{"no type", "", "acme", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, p.For(tc.taskType, tc.tenant)); diff != "" {
				t.Errorf("For(%q, %q) (-want +got):\n%s", tc.taskType, tc.tenant, diff)
			}
		})
	}
}

// TestPoliciesMargin: a margin widens the window of every check of a rule;
// the file's top-level margin applies to every rule, a rule's own margin
// replaces it; a margin is a Go duration, 0 or more, shorter than the window.
func TestPoliciesMargin(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		yaml       string
		wantWindow map[string]time.Duration // by tenant, of For("sms:send", tenant)[0]
		wantErr    string                   // after "policies.yaml: invalid policies: "
	}{
		{"default margin", `
tasks:
  sms:send: [{name: a, scope: tenant, limit: 1, window: 1s, tenants: {fast: {window: 100ms}}}]
`, map[string]time.Duration{"acme": time.Second + policies.DefaultMargin, "fast": 105 * time.Millisecond}, ""},
		{"the default margin follows each override's window", `
tasks:
  sms:send: [{name: a, scope: tenant, limit: 1, window: 1h, tenants: {fast: {window: 100ms}, faster: {window: 40ms}}}]
`, map[string]time.Duration{"acme": time.Hour + policies.DefaultMargin, "fast": 105 * time.Millisecond, "faster": 42 * time.Millisecond}, ""},
		{"default margin of a short window", `
tasks:
  sms:send: [{name: a, scope: tenant, limit: 1, window: 100ms}]
`, map[string]time.Duration{"acme": 105 * time.Millisecond}, ""},
		{"no margin", `
margin: 0s
tasks:
  sms:send: [{name: a, scope: tenant, limit: 1, window: 1s, tenants: {big: {window: 1m}}}]
`, map[string]time.Duration{"acme": time.Second, "big": time.Minute}, ""},
		{"top-level margin", `
margin: 50ms
tasks:
  sms:send: [{name: a, scope: tenant, limit: 1, window: 1s, tenants: {big: {window: 1m}}}]
`, map[string]time.Duration{"acme": time.Second + 50*time.Millisecond, "big": time.Minute + 50*time.Millisecond}, ""},
		{"rule margin replaces the top-level one", `
margin: 50ms
tasks:
  sms:send: [{name: a, scope: tenant, limit: 1, window: 1s, margin: 5ms}]
`, map[string]time.Duration{"acme": time.Second + 5*time.Millisecond}, ""},
		{"rule margin of zero", `
tasks:
  sms:send: [{name: a, scope: tenant, limit: 1, window: 1s, margin: 0s}]
`, map[string]time.Duration{"acme": time.Second}, ""},
		{"bad top-level margin", "margin: soon\ntasks: {}\n", nil, `margin: "soon" is not a duration`},
		{"negative top-level margin", "margin: -1ms\ntasks: {}\n", nil, "margin: -1ms is negative"},
		{"bad rule margin", "tasks:\n  sms:send: [{name: a, scope: tenant, limit: 1, window: 1s, margin: x}]\n",
			nil, `sms:send: rule 1 (a): margin: "x" is not a duration`},
		{"margin as long as the window", "tasks:\n  sms:send: [{name: a, scope: tenant, limit: 1, window: 1s, margin: 1s}]\n",
			nil, "sms:send: rule 1 (a): margin: 1s must be shorter than the window 1s"},
		{"margin as long as an override's window", "tasks:\n  sms:send: [{name: a, scope: tenant, limit: 1, window: 1s, margin: 10ms, tenants: {fast: {window: 10ms}}}]\n",
			nil, "sms:send: rule 1 (a): tenants: fast: margin: 10ms must be shorter than the window 10ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := policies.Parse("policies.yaml", []byte(tc.yaml))
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Parse = %s, want an error", p.Summary())
				}
				if !errors.Is(err, policies.ErrInvalid) {
					t.Errorf("error %q does not match ErrInvalid", err)
				}
				if want := "policies.yaml: invalid policies: " + tc.wantErr; !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			for tenant, want := range tc.wantWindow {
				applied := p.For("sms:send", tenant)
				if len(applied) != 1 {
					t.Fatalf("For(sms:send, %s) = %v, want one check", tenant, applied)
				}
				if got := applied[0].Check.Policy.Window; got != want {
					t.Errorf("For(sms:send, %s) window = %v, want %v", tenant, got, want)
				}
			}
		})
	}
}

// TestPoliciesForKeysNeverMeet: rules of different types, names and scopes,
// and different tenants, never share a limiter key.
func TestPoliciesForKeysNeverMeet(t *testing.T) {
	t.Parallel()
	p, err := policies.Parse("policies.yaml", []byte(`
tasks:
  sms:send:
    - {name: a, scope: tenant, limit: 1, window: 1s}
    - {name: b, scope: global, limit: 1, window: 1s}
  sms:send:a:
    - {name: a, scope: tenant, limit: 1, window: 1s}
  email:send:
    - {name: a, scope: tenant, limit: 1, window: 1s}
    - {name: b, scope: tenant, limit: 1, window: 1s}
extra_task_types: [sms:send:a]
`))
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{} // limiter key -> the rule (and tenant) it counts for
	for _, typ := range []string{"sms:send", "sms:send:a", "email:send"} {
		rules := p.Rules(typ)
		for _, tenant := range []string{"acme", "a", "b", "acme.b"} {
			applied := p.For(typ, tenant)
			if got, want := len(applied), len(rules); got != want {
				t.Fatalf("For(%q, %q) has %d rules, want %d", typ, tenant, got, want)
			}
			for i, a := range applied {
				who := typ + " rule " + a.Rule
				if rules[i].Scope == policies.ScopeTenant {
					who += " tenant " + tenant
				}
				if prev, ok := owner[a.Check.Key]; ok && prev != who {
					t.Errorf("key %q of %s is also the key of %s", a.Check.Key, who, prev)
				}
				owner[a.Check.Key] = who
			}
		}
	}
	if got, want := len(owner), 4+1+4+4+4; got != want {
		t.Errorf("%d distinct keys, want %d: %v", got, want, owner)
	}
}

// TestPoliciesForHostileTenants: the tenant of a task comes from its
// header, where anything can be written. ValidateTenant refuses every tenant
// below but the plain ones (the middleware archives such a task before it
// calls For), and even so no two tenants, and no tenant and a global rule,
// share a limiter key, nor a Redis key once the limiter derives it; each
// Redis key stays under the prefix, in the group's hash tag.
func TestPoliciesForHostileTenants(t *testing.T) {
	t.Parallel()
	p, err := policies.Parse("policies.yaml", []byte(`
tasks:
  sms:send:
    - {name: a, scope: tenant, limit: 1, window: 1s}
    - {name: b, scope: global, limit: 1, window: 1s}
    - {name: a.b, scope: tenant, limit: 1, window: 1s}
`))
	if err != nil {
		t.Fatal(err)
	}
	mb := strings.Repeat("t", 1<<20)
	valid := map[string]bool{"acme": true, "b": true, "a.b": true}
	tenants := []string{
		"acme", "b", "a.b",
		"", "/", "//", "a/b", "b/", "/b", "a.b/x", "x/a.b",
		"{acme}", "acme}", "{", "acme:eu", ":", "acme\n", "\n", "\r\n", "a\x00b", "\x00", "\xff\xfe", "é",
		"%7B", "#", "rule/sms:send/b", mb, mb + "x", strings.Repeat("/", 1<<20),
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: keys are derived, not used
	t.Cleanup(func() { _ = rdb.Close() })
	const prefix = "sluice:"
	l := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	owner := map[string]string{}  // limiter key -> the rule and tenant it counts for
	rowner := map[string]string{} // Redis key -> the same
	for _, tenant := range tenants {
		if err := producer.ValidateTenant(tenant); (err == nil) != valid[tenant] {
			t.Errorf("ValidateTenant(%.40q) = %v", tenant, err)
		} else if err != nil && (!errors.Is(err, producer.ErrInvalid) || strings.ContainsAny(err.Error(), "\r\n") || len(err.Error()) > 200) {
			t.Errorf("ValidateTenant(%.40q): error %.300q, want one short line matching ErrInvalid", tenant, err)
		}
		for _, a := range p.For(producer.TypeSMS, tenant) {
			who := "rule " + a.Rule
			if a.Rule != "b" {
				who += fmt.Sprintf(" tenant %.40q (%d bytes)", tenant, len(tenant))
			}
			if prev, ok := owner[a.Check.Key]; ok && prev != who {
				t.Errorf("limiter key %.80q of %s is also the key of %s", a.Check.Key, who, prev)
			}
			owner[a.Check.Key] = who
			rkey, err := l.RedisKey(a.Check.Key)
			if err != nil {
				t.Fatalf("RedisKey(%.80q): %v", a.Check.Key, err)
			}
			if !strings.HasPrefix(rkey, prefix+"{limits}:") || strings.Count(rkey, "{") != 1 || strings.Count(rkey, "}") != 1 || len(rkey) > 700 {
				t.Errorf("Redis key %.80q (%d bytes) of %s leaves the prefix, the hash tag or its length", rkey, len(rkey), who)
			}
			if prev, ok := rowner[rkey]; ok && prev != who {
				t.Errorf("Redis key %.80q of %s is also the key of %s", rkey, who, prev)
			}
			rowner[rkey] = who
		}
	}
	if got, want := len(owner), 2*len(tenants)+1; got != want {
		t.Errorf("%d distinct limiter keys, want %d", got, want)
	}
	if got, want := len(rowner), len(owner); got != want {
		t.Errorf("%d distinct Redis keys for %d limiter keys", got, want)
	}
}

// TestPoliciesSummary is the one-line description of the start log.
func TestPoliciesSummary(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		yaml string
		want string
	}{
		{"no rules", "tasks: {}\n", "no rules: every task type runs unthrottled"},
		{"types sorted, rules in file order", `
tasks:
  sms:send:
    - {name: tenant-per-second, scope: tenant, limit: 4, window: 1s}
    - {name: provider, scope: global, limit: 10, window: 1s}
  email:send:
    - {name: tenant-daily, scope: tenant, limit: 1000, window: 1d}
`, "email:send: tenant-daily 1000/24h0m0s per tenant; sms:send: tenant-per-second 4/1s per tenant, provider 10/1s global"},
		{"overrides are counted", `
tasks:
  sms:send:
    - {name: a, scope: tenant, limit: 4, window: 1s, tenants: {big: {limit: 8}, huge: {limit: 16}}}
`, "sms:send: a 4/1s per tenant (2 overrides)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := policies.Parse("policies.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := p.Summary(), tc.want; got != want {
				t.Errorf("Summary() = %q, want %q", got, want)
			}
		})
	}
}

// TestPoliciesSummaryOneOverride: the doc comment of Summary promises
// "(1 override)" for a rule with a single override.
func TestPoliciesSummaryOneOverride(t *testing.T) {
	t.Parallel()
	p, err := policies.Load(examplePolicies)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Summary(), "email:send: tenant-daily 1000/24h0m0s per tenant; sms:send: tenant-per-second 4/1s per tenant (1 override), provider 10/1s global"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
}

// writeFile writes data to path, through a rename so that a concurrent
// reader sees the old file or the new one, never a partial one.
func writeFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// policiesWithLimit is a policies file whose one sms:send rule has limit n.
func policiesWithLimit(n int) string {
	return "tasks:\n  sms:send:\n    - {name: per-second, scope: tenant, limit: " + strconv.Itoa(n) + ", window: 1s}\n"
}

// limitOf returns the limit the current policies give acme's sms:send tasks.
func limitOf(t *testing.T, f *policies.File) int {
	t.Helper()
	applied := f.Current().For("sms:send", "acme")
	if len(applied) != 1 {
		t.Fatalf("For(sms:send, acme) = %v, want one rule", applied)
	}
	return applied[0].Check.Policy.Limit
}

// TestFileReload: a good file replaces the policies, a bad or missing
// one leaves them in force and says why.
func TestFileReload(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	writeFile(t, path, policiesWithLimit(4))
	f, err := policies.Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if got, want := limitOf(t, f), 4; got != want {
		t.Fatalf("limit = %d, want %d", got, want)
	}
	if got, want := f.Current().Source(), path; got != want {
		t.Errorf("Source() = %q, want %q", got, want)
	}

	steps := []struct {
		name      string
		data      string // "" removes the file
		wantErr   string // "" for success
		wantLimit int
	}{
		{"good file", policiesWithLimit(7), "", 7},
		{"invalid file", policiesWithLimit(0), "limit 0 is below 1", 7},
		{"not YAML", "tasks: [", "yaml:", 7},
		{"a misspelled task type", strings.Replace(policiesWithLimit(8), "sms:send", "sms:sned", 1), `task type "sms:sned" (did you mean sms:send?)`, 7},
		{"a fractional limit", strings.Replace(policiesWithLimit(8), "limit: 8", "limit: 8.5", 1), "8.5 is not a whole number", 7},
		{"missing file", "", "no such file", 7},
		{"good again", policiesWithLimit(9), "", 9},
	}
	for _, step := range steps {
		if step.data == "" {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		} else {
			writeFile(t, path, step.data)
		}
		before := f.Current()
		err := f.Reload()
		switch {
		case step.wantErr == "" && err != nil:
			t.Errorf("%s: Reload: %v", step.name, err)
		case step.wantErr != "" && err == nil:
			t.Errorf("%s: Reload succeeded, want an error", step.name)
		case step.wantErr != "":
			if !strings.Contains(err.Error(), step.wantErr) || !strings.Contains(err.Error(), path) {
				t.Errorf("%s: Reload error %q, want one naming %s and containing %q", step.name, err, path, step.wantErr)
			}
			if f.Current() != before {
				t.Errorf("%s: a failed Reload replaced the policies", step.name)
			}
		}
		if got, want := limitOf(t, f), step.wantLimit; got != want {
			t.Errorf("%s: limit = %d, want %d", step.name, got, want)
		}
	}
}

// TestFileRequire: a File refuses, at Require, policies in force that
// fail a check, and afterwards every reload that fails it, keeping the
// policies in force and naming the file.
func TestFileRequire(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	writeFile(t, path, policiesWithLimit(4))
	f, err := policies.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	atMost := func(n int) func(*policies.Policies) error {
		return func(p *policies.Policies) error {
			if l := p.For("sms:send", "acme")[0].Check.Policy.Limit; l > n {
				return fmt.Errorf("limit %d is over %d", l, n)
			}
			return nil
		}
	}
	if err := f.Require(atMost(3)); err == nil || !strings.Contains(err.Error(), "limit 4 is over 3") {
		t.Errorf("Require of a check the policies fail: %v, want its error", err)
	}
	if err := f.Require(atMost(5)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, policiesWithLimit(6))
	before := f.Current()
	if err := f.Reload(); err == nil || !strings.Contains(err.Error(), "limit 6 is over 5") || !strings.Contains(err.Error(), path) {
		t.Errorf("Reload of policies that fail the check: %v, want its error naming %s", err, path)
	}
	if f.Current() != before {
		t.Error("a Reload that failed the check replaced the policies")
	}
	writeFile(t, path, policiesWithLimit(5))
	if err := f.Reload(); err != nil || limitOf(t, f) != 5 {
		t.Errorf("Reload of policies that pass: %v, limit %d; want 5", err, limitOf(t, f))
	}
}

// TestFileReloadConcurrent reloads while readers resolve rules: run
// with -race. Every reader sees one whole file or the other.
func TestFileReloadConcurrent(t *testing.T) {
	t.Parallel()
	// Two files of two rules each, whose rules have equal limits within a
	// file: a reader that saw rules of two files would see different limits.
	file := func(n int) string {
		return "tasks:\n  sms:send:\n" +
			"    - {name: per-second, scope: tenant, limit: " + strconv.Itoa(n) + ", window: 1s}\n" +
			"    - {name: provider, scope: global, limit: " + strconv.Itoa(n) + ", window: 1s}\n"
	}
	path := filepath.Join(t.TempDir(), "policies.yaml")
	writeFile(t, path, file(1))
	f, err := policies.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	errs := make(chan string, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				applied := f.Current().For("sms:send", "acme")
				if len(applied) != 2 || applied[0].Check.Policy.Limit != applied[1].Check.Policy.Limit {
					errs <- "a reader saw a mix of two files"
					return
				}
			}
		})
	}
	for i := range 200 {
		n := 1 + i%2
		writeFile(t, path, file(n))
		if err := f.Reload(); err != nil {
			t.Errorf("Reload %d: %v", i, err)
		}
		if i%10 == 0 {
			writeFile(t, path, "tasks: [")
			if err := f.Reload(); err == nil {
				t.Errorf("Reload %d of a bad file succeeded", i)
			}
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestParseLimitHint: the hint for a limit below one is left out
// when the window it would give is longer than the limiter takes.
func TestParseLimitHint(t *testing.T) {
	t.Parallel()
	_, err := policies.Parse("policies.yaml", []byte("tasks:\n  sms:send:\n    - {name: a, scope: tenant, limit: 0.0001, window: 3000d}\n"))
	if err == nil || !strings.HasSuffix(err.Error(), "limit: 0.0001 is less than one task a window: a window admits whole tasks") {
		t.Errorf("error %v, want one that ends without a hint of a window beyond the longest", err)
	}
}

// TestWithTaskTypes: a program that handles task types of its own names
// them; the file may then name those, and those of its extra_task_types,
// and no others, on the first read and on every reload.
func TestWithTaskTypes(t *testing.T) {
	t.Parallel()
	own := policies.WithTaskTypes("report:build", "push:send")
	cases := []struct {
		name    string
		yaml    string
		opts    []policies.Option
		wantErr string // "" for success
	}{
		{"own types", "tasks:\n  report:build: [{name: a, scope: global, limit: 1, window: 1s}]\n", []policies.Option{own}, ""},
		{"own types replace Sluice's", "tasks:\n  sms:send: []\n", []policies.Option{own},
			`task type "sms:send": no worker handles it, so its rules would never apply; the known types are push:send, report:build: `},
		{"the file adds to them", "extra_task_types: [sms:send]\ntasks:\n  sms:send: []\n", []policies.Option{own}, ""},
		{"the last option wins", "tasks:\n  push:send: []\n", []policies.Option{own, policies.WithTaskTypes("report:build")},
			`task type "push:send": no worker handles it`},
		{"none handled", "tasks:\n  sms:send: []\n", []policies.Option{policies.WithTaskTypes()}, `task type "sms:send"`},
		{"default", "tasks:\n  report:build: []\n", nil, "the known types are email:send, sms:send: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "policies.yaml")
			writeFile(t, path, tc.yaml)
			for _, read := range []struct {
				how string
				err func() error
			}{
				{"Parse", func() error { _, err := policies.Parse(path, []byte(tc.yaml), tc.opts...); return err }},
				{"Load", func() error { _, err := policies.Load(path, tc.opts...); return err }},
				{"Open", func() error { _, err := policies.Open(path, tc.opts...); return err }},
			} {
				err := read.err()
				switch {
				case tc.wantErr == "" && err != nil:
					t.Errorf("%s: %v", read.how, err)
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
					t.Errorf("%s: error %v, want one containing %q", read.how, err, tc.wantErr)
				}
			}
		})
	}

	// A reload reads the file with the options it was opened with.
	path := filepath.Join(t.TempDir(), "policies.yaml")
	writeFile(t, path, "tasks:\n  report:build: []\n")
	f, err := policies.Open(path, own)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "tasks:\n  report:biuld: []\n")
	if err := f.Reload(); err == nil || !strings.Contains(err.Error(), `task type "report:biuld" (did you mean report:build?)`) {
		t.Errorf("Reload of a misspelled own type: %v, want it refused", err)
	}
}

// TestOpenErrors: a file that does not load is an error, not an
// empty File.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "tasks:\n  sms:send: [{name: a, scope: everyone, limit: 1, window: 1s}]\n")
	cases := []struct {
		name string
		path string
	}{
		{"invalid", bad},
		{"missing", filepath.Join(dir, "missing.yaml")},
		{"no path", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, err := policies.Open(tc.path)
			if err == nil {
				t.Fatalf("Open(%q) = %+v (current policies %v), want an error", tc.path, f, f.Current())
			}
			if f != nil {
				t.Errorf("Open(%q) returned a File with its error", tc.path)
			}
		})
	}
}

// TestStatic always holds its policies; Reload does nothing.
func TestStatic(t *testing.T) {
	t.Parallel()
	p, err := policies.Parse("inline", []byte(policiesWithLimit(3)))
	if err != nil {
		t.Fatal(err)
	}
	f := policies.Static(p)
	if f.Current() != p {
		t.Fatalf("Current() = %p, want %p", f.Current(), p)
	}
	if err := f.Reload(); err != nil {
		t.Errorf("Reload: %v", err)
	}
	if f.Current() != p {
		t.Errorf("after Reload, Current() = %p, want %p", f.Current(), p)
	}
}

// TestParseAlgorithm reads the algorithm of rules: the sliding log
// when the rule names none, the one it names otherwise, for the rule's
// tenant overrides too and in the checks For returns; the counters take
// limits above the log's maximum.
func TestParseAlgorithm(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		yaml string
		want throttle.Algorithm
	}{
		{"none", "tasks:\n  sms:send: [{name: a, scope: tenant, limit: 4, window: 1s, tenants: {big: {limit: 8}}}]\n", ""},
		{"sliding log named", "tasks:\n  sms:send: [{name: a, scope: tenant, algorithm: sliding-log, limit: 4, window: 1s, tenants: {big: {limit: 8}}}]\n", throttle.SlidingLog},
		{"sliding window", "tasks:\n  sms:send: [{name: a, scope: tenant, algorithm: sliding-window, limit: 4, window: 1s, tenants: {big: {limit: 8}}}]\n", throttle.SlidingWindow},
		{"gcra", "tasks:\n  sms:send: [{name: a, scope: tenant, algorithm: gcra, limit: 4, window: 1s, tenants: {big: {limit: 8}}}]\n", throttle.GCRA},
		{"fixed window", "tasks:\n  sms:send: [{name: a, scope: tenant, algorithm: fixed-window, limit: 4, window: 1s, tenants: {big: {limit: 8}}}]\n", throttle.FixedWindow},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := policies.Parse("policies.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			r := p.Rules("sms:send")[0]
			if got := r.Policy.Algorithm; got != tc.want {
				t.Errorf("Policy.Algorithm = %q, want %q", got, tc.want)
			}
			if got := r.Tenants["big"].Algorithm; got != tc.want {
				t.Errorf("the override's Algorithm = %q, want the rule's %q", got, tc.want)
			}
			for tenant, limit := range map[string]int{"acme": 4, "big": 8} {
				c := p.For("sms:send", tenant)[0].Check
				if c.Policy.Algorithm != tc.want || c.Policy.Limit != limit {
					t.Errorf("For(sms:send, %s) policy = %v, want limit %d with algorithm %q", tenant, c.Policy, limit, tc.want)
				}
			}
		})
	}

	p, err := policies.Parse("policies.yaml", []byte(`
tasks:
  email:send:
    - {name: daily, scope: tenant, algorithm: gcra, limit: 100000, window: 1d, tenants: {big: {limit: 10000000}}}
    - {name: provider, scope: global, algorithm: fixed-window, limit: 5000000, window: 1h}
`))
	if err != nil {
		t.Fatalf("counters above the log's maximum: %v", err)
	}
	if got, want := p.Summary(), "email:send: daily 100000/24h0m0s gcra per tenant (1 override), provider 5000000/1h0m0s fixed-window global"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
}

// TestWeights: the file's weights give each tenant its share of the
// shared rules; a tenant it does not list has DefaultWeight; a weight out
// of range or a bad tenant id is refused, naming it.
func TestWeights(t *testing.T) {
	t.Parallel()
	p, err := policies.Parse("policies.yaml", []byte("weights:\n  acme: 3\n  small: 0.5\ntasks: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for tenant, want := range map[string]float64{"acme": 3, "small": 0.5, "globex": policies.DefaultWeight} {
		if got := p.Weight(tenant); got != want {
			t.Errorf("Weight(%q) = %v, want %v", tenant, got, want)
		}
	}
	for _, tc := range []struct{ file, want string }{
		{"weights:\n  acme: 0\ntasks: {}\n", "weights: acme: 0 is not a number from 0.001 to 1000"},
		{"weights:\n  acme: 5000\ntasks: {}\n", "weights: acme: 5000 is not a number from 0.001 to 1000"},
		{"weights:\n  \"a b\": 2\ntasks: {}\n", `weights: tenant "a b"`},
		{"weights:\n  acme: lots\ntasks: {}\n", "lots"},
	} {
		_, err := policies.Parse("policies.yaml", []byte(tc.file))
		if !errors.Is(err, policies.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.file, err, tc.want)
		}
	}
}
