package worker

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
)

// Scopes of a rule.
const (
	ScopeTenant = "tenant" // a window per tenant
	ScopeGlobal = "global" // one window shared by all tenants
)

// ErrPolicies is matched (errors.Is) by every error about a policies file.
var ErrPolicies = errors.New("invalid policies")

// Rule is one limit of a task type, read from the policies file.
type Rule struct {
	// Name names the rule in logs, metrics and keys; unique within its task
	// type.
	Name string

	// Scope is ScopeTenant or ScopeGlobal.
	Scope string

	// Policy is the limit, for every tenant without an override. Its
	// Algorithm is the rule's (the file's algorithm:, "" when it sets none:
	// the sliding log).
	Policy throttle.Policy

	// Tenants holds per-tenant policies that replace Policy (ScopeTenant).
	// They have the rule's Algorithm: an override sets a limit or a window,
	// never an algorithm.
	Tenants map[string]throttle.Policy

	// Margin is added to the window of every check of the rule, so that the
	// provider, which counts arrivals rather than admissions, never sees
	// more than the limit in one window when sends take unequal times to
	// reach it. It should cover the spread of that time. When the file sets
	// none, it is DefaultMargin, cut to each policy's window (see MarginFor).
	Margin time.Duration

	// Shadow is set by mode: shadow in the file: the rule is checked and
	// its decisions counted (sluice_shadow_decisions_total), but it never
	// holds a task back, so that a new quota can be tried on live traffic
	// first. A shadow rule records the sends it would have allowed, so its
	// window fills as it would if it were enforced.
	Shadow bool

	// marginSet says whether the file set Margin (for the file or the
	// rule), rather than it being the default.
	marginSet bool
}

// MarginFor returns the margin added to the window of policy p, one of the
// rule's: Margin when the file set one, else DefaultMargin or a twentieth
// of p's window when that is shorter.
func (r Rule) MarginFor(p throttle.Policy) time.Duration {
	if r.marginSet {
		return r.Margin
	}
	return defaultMargin(p.Window)
}

// defaultMargin is the margin of a window w when the file sets none.
func defaultMargin(w time.Duration) time.Duration {
	return max(0, min(DefaultMargin, w/20, throttle.MaxWindow-w))
}

// DefaultMargin is the margin of windows when the file sets none, or a
// twentieth of the window when that is shorter (see Rule.MarginFor); the
// file's top-level margin, or the rule's own, replaces it. 50 ms costs a 1 s window 5% of its
// throughput. 20 ms was not enough between containers on one 2-core
// machine (the compose check saw 11 arrivals in a 1 s window of 10); across
// a network to a provider the spread is larger still.
const DefaultMargin = 50 * time.Millisecond

// Policies are the rules of each task type. A Policies value is never
// changed after it is built, so it is safe for concurrent use; a reload
// builds a new one.
type Policies struct {
	source string
	tasks  map[string][]Rule
}

// Applied is one rule as it applies to a task: its name, the limiter
// check, and whether the rule is in shadow mode (Rule.Shadow).
type Applied struct {
	Rule   string
	Check  throttle.Check
	Shadow bool
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
		key := "rule/" + taskType + "/" + r.Name
		pol := r.Policy
		if r.Scope == ScopeTenant {
			key += "/" + tenant
			if o, ok := r.Tenants[tenant]; ok {
				pol = o
			}
		}
		pol.Window += r.MarginFor(pol)
		out[i] = Applied{Rule: r.Name, Check: throttle.Check{Key: key, Policy: pol, Cost: 1}, Shadow: r.Shadow}
	}
	return out
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

// The shape of the file. Limits are nodes, read by parseLimit, so that a
// fraction is refused rather than cut.
type (
	policiesFile struct {
		Margin         *string                `yaml:"margin"`
		ExtraTaskTypes []string               `yaml:"extra_task_types"`
		Tasks          *map[string][]ruleFile `yaml:"tasks"`
	}
	ruleFile struct {
		Name      string                  `yaml:"name"`
		Scope     string                  `yaml:"scope"`
		Algorithm string                  `yaml:"algorithm"`
		Mode      string                  `yaml:"mode"`
		Limit     yaml.Node               `yaml:"limit"`
		Window    string                  `yaml:"window"`
		Margin    *string                 `yaml:"margin"`
		Tenants   map[string]overrideFile `yaml:"tenants"`
	}
	overrideFile struct {
		Limit  yaml.Node `yaml:"limit"`
		Window *string   `yaml:"window"`
	}
)

var (
	taskTypeRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9:._-]{0,127}$`)
	ruleNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	yamlTypeRE = regexp.MustCompile(` (in type|into) [][*A-Za-z0-9_]*\.[][*A-Za-z0-9_.]+$`) // Go type names
)

// LoadPolicies reads and validates the policies file at path, as
// ParsePolicies.
func LoadPolicies(path string, opts ...PolicyOption) (*Policies, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policies: %w", err)
	}
	return ParsePolicies(path, data, opts...)
}

// ParsePolicies parses and validates a policies file; source names it in
// errors. Errors wrap ErrPolicies and name the file, the line or the task
// type and rule, and the field. A task type that is neither one the reader
// handles (TaskTypes(), or those of WithTaskTypes) nor listed under the
// file's extra_task_types is refused: its rules would never apply.
func ParsePolicies(source string, data []byte, opts ...PolicyOption) (*Policies, error) {
	o := readOptions(opts)
	fail := func(format string, args ...any) (*Policies, error) {
		return nil, fmt.Errorf("%s: %w: %s", source, ErrPolicies, fmt.Sprintf(format, args...))
	}
	// First as nodes, to name a misspelled field with its rule and the
	// valid ones, and to keep the file's order of task types; then into
	// the file's shape, which checks the kinds of values.
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fail("%s", oneLine(err.Error()))
	}
	layout, err := checkFields(&doc)
	if err != nil {
		return fail("%v", err)
	}
	var f policiesFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		// yaml lists each problem on a line of its own, naming Go types,
		// and quotes the file's values and keys as they are, line breaks
		// included: keep the error on one line, as the commands print it.
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msgs := make([]string, len(te.Errors))
			for i, m := range te.Errors {
				msgs[i] = oneLine(yamlTypeRE.ReplaceAllString(m, ""))
			}
			return fail("%s", strings.Join(msgs, "; "))
		}
		return fail("%s", oneLine(err.Error()))
	}
	for _, t := range f.ExtraTaskTypes {
		if !taskTypeRE.MatchString(t) {
			return fail("extra_task_types: %q: use letters, digits and : . _ -", t)
		}
	}
	var margin *time.Duration // the file's, when it sets one
	if f.Margin != nil {
		m, err := parseMargin(*f.Margin)
		if err != nil {
			return fail("margin: %v", err)
		}
		margin = &m
	}
	if f.Tasks == nil {
		// An empty file is more likely half-written than meant: saying
		// "throttle nothing" takes an explicit empty map.
		return fail("no tasks: list the rules of each task type under tasks:, or write tasks: {} to throttle nothing")
	}
	p := &Policies{source: source, tasks: map[string][]Rule{}}
	for _, taskType := range taskOrder(layout, *f.Tasks) {
		rules := (*f.Tasks)[taskType]
		if !taskTypeRE.MatchString(taskType) {
			return fail("task type %q: use letters, digits and : . _ -", taskType)
		}
		if !slices.Contains(o.taskTypes, taskType) && !slices.Contains(f.ExtraTaskTypes, taskType) {
			err := unknownTaskType(taskType, o.taskTypes, f.ExtraTaskTypes)
			if line, ok := layout.line[taskType]; ok {
				return fail("line %d: %v", line, err)
			}
			return fail("%v", err) // merged in: yaml gives no line
		}
		seen := map[string]bool{}
		for i, rf := range rules {
			where := ruleLabel(taskType, i, rf.Name) // parseRule's error quotes a name with a line break
			r, err := parseRule(rf, margin)
			if err != nil {
				return fail("%s: %v", where, err)
			}
			if seen[r.Name] {
				return fail("%s: name: %q is used twice", where, r.Name)
			}
			seen[r.Name] = true
			p.tasks[taskType] = append(p.tasks[taskType], r)
		}
	}
	return p, nil
}

// taskOrder returns the task types of tasks in file order, then those
// merged in (<<), which the layout does not list, in name order.
func taskOrder(layout fileLayout, tasks map[string][]ruleFile) []string {
	order := slices.DeleteFunc(slices.Clone(layout.taskTypes), func(t string) bool { _, ok := tasks[t]; return !ok })
	var merged []string
	for t := range tasks {
		if !slices.Contains(order, t) {
			merged = append(merged, t)
		}
	}
	slices.Sort(merged)
	return append(order, merged...)
}

// oneLine returns s with each run of white space, line breaks included,
// made one space, so that an error prints on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// parseRule reads one rule; margin is the file's, or nil.
func parseRule(rf ruleFile, margin *time.Duration) (Rule, error) {
	r := Rule{Name: rf.Name, Scope: rf.Scope}
	if !ruleNameRE.MatchString(rf.Name) {
		return r, fmt.Errorf("name: %q must be 1 to 64 letters, digits, . _ or -", rf.Name)
	}
	if rf.Scope != ScopeTenant && rf.Scope != ScopeGlobal {
		return r, fmt.Errorf("scope: %q must be %q or %q", rf.Scope, ScopeTenant, ScopeGlobal)
	}
	switch rf.Mode {
	case "", "enforce":
	case "shadow":
		r.Shadow = true
	default:
		return r, fmt.Errorf("mode: %q must be \"enforce\" (the default) or \"shadow\"", rf.Mode)
	}
	alg, err := parseAlgorithm(rf.Algorithm)
	if err != nil {
		return r, fmt.Errorf("algorithm: %v", err)
	}
	window, err := parseWindow(rf.Window)
	if err != nil {
		return r, fmt.Errorf("window: %v", err)
	}
	limit, err := parseLimit(&rf.Limit, window)
	if err != nil {
		return r, fmt.Errorf("limit: %v", err)
	}
	r.Policy = throttle.Policy{Limit: limit, Window: window, Algorithm: alg}
	if err := r.Policy.Validate(); err != nil {
		return r, fmt.Errorf("limit %d, window %s: %v", limit, rf.Window, err)
	}
	if rf.Margin != nil {
		if r.Margin, err = parseMargin(*rf.Margin); err != nil {
			return r, fmt.Errorf("margin: %v", err)
		}
		r.marginSet = true
	} else if margin != nil {
		r.Margin, r.marginSet = *margin, true
	} else {
		r.Margin = defaultMargin(window)
	}
	if err := checkMargin(r.Policy, r.MarginFor(r.Policy)); err != nil {
		return r, err
	}
	if len(rf.Tenants) > 0 && rf.Scope != ScopeTenant {
		return r, fmt.Errorf("tenants: overrides need scope %q", ScopeTenant)
	}
	for tenant, o := range rf.Tenants {
		if err := producer.ValidateTenant(tenant); err != nil {
			return r, fmt.Errorf("tenants: %v", err)
		}
		pol := r.Policy
		if o.Window != nil {
			if pol.Window, err = parseWindow(*o.Window); err != nil {
				return r, fmt.Errorf("tenants: %s: window: %v", tenant, err)
			}
		}
		if o.Limit.Kind != 0 { // else the rule's limit
			if pol.Limit, err = parseLimit(&o.Limit, pol.Window); err != nil {
				return r, fmt.Errorf("tenants: %s: limit: %v", tenant, err)
			}
		}
		if err := pol.Validate(); err != nil {
			return r, fmt.Errorf("tenants: %s: %v", tenant, err)
		}
		if err := checkMargin(pol, r.MarginFor(pol)); err != nil {
			return r, fmt.Errorf("tenants: %s: %v", tenant, err)
		}
		if r.Tenants == nil {
			r.Tenants = map[string]throttle.Policy{}
		}
		r.Tenants[tenant] = pol
	}
	return r, nil
}

// parseAlgorithm reads a rule's algorithm: one of throttle.Algorithms, or
// "" for the default, the sliding log.
func parseAlgorithm(s string) (throttle.Algorithm, error) {
	a := throttle.Algorithm(s)
	if s == "" || slices.Contains(throttle.Algorithms(), a) {
		return a, nil
	}
	names := make([]string, 0, 4)
	for _, k := range throttle.Algorithms() {
		names = append(names, strconv.Quote(string(k)))
	}
	return "", fmt.Errorf("%q must be %s or %s", s, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// parseMargin reads a margin: a Go duration, 0 or more.
func parseMargin(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 20ms", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s is negative", s)
	}
	return d, nil
}

// checkMargin rejects a margin as long as the window it widens, and a
// widened window beyond throttle.MaxWindow.
func checkMargin(p throttle.Policy, margin time.Duration) error {
	if margin >= p.Window {
		return fmt.Errorf("margin: %v must be shorter than the window %v", margin, p.Window)
	}
	if p.Window > throttle.MaxWindow-margin {
		return fmt.Errorf("margin: %v makes the window %v longer than %v", margin, p.Window, throttle.MaxWindow)
	}
	return nil
}

// parseWindow reads a Go duration ("1s", "1m30s", "24h") or whole days
// ("7d").
func parseWindow(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("missing")
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%q is not a whole number of days", s)
		}
		if int64(n) > math.MaxInt64/int64(24*time.Hour) {
			// n days would overflow a Duration, and wrap around to any
			// window, a short one included.
			return 0, fmt.Errorf("%q is longer than %v", s, throttle.MaxWindow)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 1s, 1m or 24h", s)
	}
	return d, nil
}

// PolicyFile is a policies file that can be reloaded while workers run:
// each task reads the policies current when it starts. Safe for concurrent
// use.
type PolicyFile struct {
	path string
	opts []PolicyOption
	cur  atomic.Pointer[Policies]
}

// OpenPolicyFile loads the policies file at path, as LoadPolicies; each
// Reload reads it with the same options.
func OpenPolicyFile(path string, opts ...PolicyOption) (*PolicyFile, error) {
	if path == "" {
		return nil, fmt.Errorf("policies: %w: no file named", ErrPolicies)
	}
	f := &PolicyFile{path: path, opts: opts}
	if err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// StaticPolicies returns a PolicyFile that always holds p.
func StaticPolicies(p *Policies) *PolicyFile {
	f := &PolicyFile{}
	f.cur.Store(p)
	return f
}

// Reload reads the file again. On error the policies in force stay.
// New limits apply at once to tenants that already have windows: the
// limiter stores no policy.
func (f *PolicyFile) Reload() error {
	if f.path == "" {
		return nil
	}
	p, err := LoadPolicies(f.path, f.opts...)
	if err != nil {
		return err
	}
	f.cur.Store(p)
	return nil
}

// Current returns the policies in force.
func (f *PolicyFile) Current() *Policies { return f.cur.Load() }
