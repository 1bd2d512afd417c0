package policies

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/readlimit"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
)

// ErrInvalid is matched (errors.Is) by every error about a policies file:
// its errors read "<source>: invalid policies: <what is wrong>".
var ErrInvalid = errors.New("invalid policies")

// The shape of the file. Limits are nodes, read by parseLimit, so that a
// fraction is refused rather than cut.
type (
	policiesFile struct {
		Margin         *string              `yaml:"margin"`
		ExtraTaskTypes []string             `yaml:"extra_task_types"`
		Weights        mapping[float64]     `yaml:"weights"`
		Tasks          *mapping[[]ruleFile] `yaml:"tasks"`
	}
	ruleFile struct {
		Name      string                `yaml:"name"`
		Scope     string                `yaml:"scope"`
		Algorithm string                `yaml:"algorithm"`
		Mode      string                `yaml:"mode"`
		Limit     yaml.Node             `yaml:"limit"`
		Window    string                `yaml:"window"`
		Margin    *string               `yaml:"margin"`
		Tenants   mapping[overrideFile] `yaml:"tenants"`

		Concurrency yaml.Node `yaml:"concurrency"`
		Lease       *string   `yaml:"lease"`
		Adaptive    yaml.Node `yaml:"adaptive"`
		Min         yaml.Node `yaml:"min"`
	}
	overrideFile struct {
		Limit       yaml.Node `yaml:"limit"`
		Window      *string   `yaml:"window"`
		Concurrency yaml.Node `yaml:"concurrency"`
	}
)

var (
	taskTypeRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9:._-]{0,127}$`)
	ruleNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	decimalRE  = regexp.MustCompile(`^[-+]?(0|[1-9][0-9]*)$`)                               // a limit as people write it: no 0x, 0o, 010 or 1_000
	yamlTypeRE = regexp.MustCompile(` (in type|into) [][*A-Za-z0-9_]*\.[][*A-Za-z0-9_.]+$`) // Go type names
)

// Limits of a policies file, which keep its reading within a second and a
// few MiB of memory.
const (
	// MaxFileSize is the largest policies file, in bytes (1 MiB). Load
	// refuses a larger regular file by its size, before reading it.
	MaxFileSize = 1 << 20

	// MaxOverrides is the most tenant overrides (tenants:) of a file, all
	// rules together.
	MaxOverrides = 10_000
)

// Load reads and validates the policies file at path, as Parse.
func Load(path string, opts ...Option) (*Policies, error) {
	data, err := readlimit.File(path, MaxFileSize)
	if tl, ok := errors.AsType[*readlimit.TooLargeError](err); ok {
		return nil, fmt.Errorf("%s: %w: the file %v", path, ErrInvalid, tl)
	}
	if err != nil {
		return nil, fmt.Errorf("policies: %w", err)
	}
	return Parse(path, data, opts...)
}

// Parse parses and validates a policies file; source names it in errors.
// Errors wrap ErrInvalid and name the file, the line or the task type and
// rule, and the field. A task type that is neither one the reader handles
// (producer.TaskTypes(), or those of WithTaskTypes) nor listed under the
// file's extra_task_types is refused: its rules would never apply.
//
// Data larger than MaxFileSize is refused, and so is a file with more than
// MaxOverrides tenant overrides. Parsing takes time linear in the size.
func Parse(source string, data []byte, opts ...Option) (*Policies, error) {
	o := readOptions(opts)
	fail := func(format string, args ...any) (*Policies, error) {
		return nil, fmt.Errorf("%s: %w: %s", source, ErrInvalid, fmt.Sprintf(format, args...))
	}
	if len(data) > MaxFileSize {
		return fail("the file %v", &readlimit.TooLargeError{Size: int64(len(data)), Limit: MaxFileSize})
	}
	// First as nodes, to name a misspelled field with its rule and the
	// valid ones, and to keep the file's order of task types; then into
	// the file's shape, which checks the kinds of values.
	doc, err := readDocument(data)
	if err != nil {
		return fail("%v", err)
	}
	if err := checkMappingSizes(&doc); err != nil {
		return fail("%v", err)
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
	if err := checkExtraTaskTypes(f.ExtraTaskTypes); err != nil {
		return fail("%v", err)
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
	if n := countOverrides(*f.Tasks); n > MaxOverrides {
		return fail("%d tenant overrides, more than the limit of %d", n, MaxOverrides)
	}
	weights, err := parseWeights(f.Weights)
	if err != nil {
		return fail("weights: %v", err)
	}
	p := &Policies{source: source, tasks: map[string][]Rule{}, weights: weights}
	if err := p.addTasks(f, layout, o.taskTypes, margin); err != nil {
		return fail("%v", err)
	}
	return p, nil
}

// addTasks checks the task types of f and reads their rules into p;
// types are those the reader handles, margin the file's or nil.
func (p *Policies) addTasks(f policiesFile, layout fileLayout, types []string, margin *time.Duration) error {
	known := map[string]bool{} // a set, as a file may list many extra types
	for _, t := range slices.Concat(types, f.ExtraTaskTypes) {
		known[t] = true
	}
	for _, taskType := range taskOrder(layout, *f.Tasks) {
		rules := (*f.Tasks)[taskType]
		if !taskTypeRE.MatchString(taskType) {
			return fmt.Errorf("task type %q: use letters, digits and : . _ -", taskType)
		}
		if !known[taskType] {
			err := unknownTaskType(taskType, types, f.ExtraTaskTypes)
			if line, ok := layout.line[taskType]; ok {
				return fmt.Errorf("line %d: %w", line, err)
			}
			return err // merged in: yaml gives no line
		}
		seen := map[string]bool{}
		for i, rf := range rules {
			where := ruleLabel(taskType, i, rf.Name) // parseRule's error quotes a name with a line break
			r, err := parseRule(rf, margin)
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			if seen[r.Name] {
				return fmt.Errorf("%s: name: %q is used twice", where, r.Name)
			}
			seen[r.Name] = true
			p.tasks[taskType] = append(p.tasks[taskType], r)
		}
	}
	return nil
}

// readDocument returns the one YAML document of data as nodes. A second
// document would be ignored: it is refused, rather than dropped without a
// word.
func readDocument(data []byte) (yaml.Node, error) {
	var doc, next yaml.Node
	docs := yaml.NewDecoder(bytes.NewReader(data))
	if err := docs.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return doc, errors.New(oneLine(err.Error()))
	}
	if err := docs.Decode(&next); err == nil {
		return doc, fmt.Errorf("line %d: a second YAML document (after ---): a policies file holds one", next.Line)
	} else if !errors.Is(err, io.EOF) {
		return doc, errors.New(oneLine(err.Error()))
	}
	return doc, nil
}

// countOverrides returns the number of tenant overrides of all the rules
// of tasks.
func countOverrides(tasks map[string][]ruleFile) int {
	n := 0
	for _, rules := range tasks {
		for _, rf := range rules {
			n += len(rf.Tenants)
		}
	}
	return n
}

// checkExtraTaskTypes checks the names of the file's extra_task_types.
func checkExtraTaskTypes(types []string) error {
	for _, t := range types {
		if !taskTypeRE.MatchString(t) {
			return fmt.Errorf("extra_task_types: %q: use letters, digits and : . _ -", t)
		}
	}
	return nil
}

// taskOrder returns the task types of tasks in file order, then those
// merged in (<<), which the layout does not list, in name order.
func taskOrder(layout fileLayout, tasks map[string][]ruleFile) []string {
	order := slices.DeleteFunc(slices.Clone(layout.taskTypes), func(t string) bool { _, ok := tasks[t]; return !ok })
	var merged []string
	for t := range tasks {
		if _, inFile := layout.line[t]; !inFile {
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
	if rf.Concurrency.Kind != 0 {
		r, err := parseCap(r, rf)
		if err != nil {
			return r, err
		}
		return parseAdaptive(r, rf)
	}
	if rf.Lease != nil {
		return r, errors.New("lease: only a concurrency rule has a lease")
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
	if r, err = parseOverrides(r, rf); err != nil {
		return r, err
	}
	return parseAdaptive(r, rf)
}

// parseOverrides reads the tenant overrides of r, a rate rule: each sets
// a limit, a window or both.
func parseOverrides(r Rule, rf ruleFile) (Rule, error) {
	var err error
	if len(rf.Tenants) > 0 && rf.Scope != ScopeTenant {
		return r, fmt.Errorf("tenants: overrides need scope %q", ScopeTenant)
	}
	for tenant, o := range rf.Tenants {
		if err := producer.ValidateTenant(tenant); err != nil {
			return r, fmt.Errorf("tenants: %v", err)
		}
		if o.Concurrency.Kind != 0 {
			return r, fmt.Errorf("tenants: %s: concurrency: the rule is a rate (limit and window); override its limit or window", tenant)
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
