package policies

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/throttle"
)

// The fields that each level of a policies file takes, in the order the
// documentation gives them.
var (
	fileFields     = []string{"margin", "extra_task_types", "weights", "tasks"}
	ruleFields     = []string{"name", "scope", "limit", "window", "margin", "algorithm", "concurrency", "lease", "adaptive", "min", "mode", "tenants"}
	overrideFields = []string{"limit", "window", "concurrency"}
)

// fileLayout is what checkFields learns of the file: its task types in
// file order, and the line of each. Types merged in with << are not in it.
type fileLayout struct {
	taskTypes []string
	line      map[string]int
}

// checkFields walks a policies file, decoded as YAML nodes, and returns an
// error for the first key that its level does not take. The error gives
// the line, the task type and the rule it is in, the valid fields, and the
// nearest of them when the key looks like a slip ("limt"). yaml's own check
// (KnownFields) names only the line and the key. Values of the wrong kind
// are left to the decoding that follows, which reports them.
func checkFields(doc *yaml.Node) (fileLayout, error) {
	layout := fileLayout{line: map[string]int{}}
	root := resolve(doc)
	if root == nil || root.Kind != yaml.MappingNode {
		return layout, nil
	}
	if err := unknownKey(root, fileFields, "", "the file's fields are"); err != nil {
		return layout, err
	}
	tasks := resolve(mapValue(root, "tasks"))
	if tasks == nil || tasks.Kind != yaml.MappingNode {
		return layout, nil
	}
	for i := 0; i+1 < len(tasks.Content); i += 2 {
		taskType := tasks.Content[i].Value
		if isMergeKey(tasks.Content[i]) {
			continue // the types it merges in come after, in name order
		}
		layout.taskTypes = append(layout.taskTypes, taskType)
		layout.line[taskType] = tasks.Content[i].Line
		rules := resolve(tasks.Content[i+1])
		if rules == nil || rules.Kind != yaml.SequenceNode || !taskTypeRE.MatchString(taskType) {
			// A type of the wrong form is refused after, by name.
			continue
		}
		for n, r := range rules.Content {
			r = resolve(r)
			if r.Kind != yaml.MappingNode {
				continue
			}
			name := ""
			if n := resolve(mapValue(r, "name")); n != nil && n.Kind == yaml.ScalarNode {
				name = n.Value
			}
			where := ruleLabel(taskType, n, name)
			if err := unknownKey(r, ruleFields, where+": ", "a rule's fields are"); err != nil {
				return layout, err
			}
			tenants := resolve(mapValue(r, "tenants"))
			if tenants == nil || tenants.Kind != yaml.MappingNode {
				continue
			}
			for j := 0; j+1 < len(tenants.Content); j += 2 {
				o := resolve(tenants.Content[j+1])
				if o == nil || o.Kind != yaml.MappingNode {
					continue
				}
				at := fmt.Sprintf("%stenants: %s: ", where+": ", oneLine(tenants.Content[j].Value))
				if err := unknownKey(o, overrideFields, at, "an override's fields are"); err != nil {
					return layout, err
				}
			}
		}
	}
	return layout, nil
}

// ruleLabel names rule i (from 0) of taskType in errors, "sms:send: rule
// 1 (provider)", without a name that would break the error's line.
func ruleLabel(taskType string, i int, name string) string {
	where := fmt.Sprintf("%s: rule %d", taskType, i+1)
	if name != "" && !strings.ContainsFunc(name, unicode.IsControl) {
		where += " (" + name + ")"
	}
	return where
}

// unknownKey returns an error for the first key of mapping m not among
// fields; where and what begin and end its message.
func unknownKey(m *yaml.Node, fields []string, where, what string) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if k.Kind != yaml.ScalarNode || isMergeKey(k) {
			continue // yaml checks the merged keys
		}
		if slices.Contains(fields, k.Value) {
			continue
		}
		hint := ""
		if s := closest(k.Value, fields); s != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", s)
		}
		return fmt.Errorf("line %d: %sunknown field %q%s; %s %s", k.Line, where, k.Value, hint, what, strings.Join(fields, ", "))
	}
	return nil
}

// isMergeKey reports whether k is YAML's merge key, <<.
func isMergeKey(k *yaml.Node) bool { return k.Tag == "!!merge" || k.Value == "<<" }

// resolve follows a document node to its content, and an alias to what it
// names; nil for nil.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil {
		switch {
		case n.Kind == yaml.DocumentNode && len(n.Content) == 1:
			n = n.Content[0]
		case n.Kind == yaml.AliasNode:
			n = n.Alias
		default:
			return n
		}
	}
	return nil
}

// mapValue returns the value of key in mapping m, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// parseLimit reads a limit: a whole number, written as one (10) or as a
// float without a fraction (10.0, 1e3). A limit with a fraction is refused,
// not cut: 4.9 read as 4 would quietly admit less than meant, and 0.5 read
// as 0 would be refused with a message about 0. window, when known, makes
// the message for a limit below 1 say how to write it. n is nil when the
// file gives no limit, or its Kind is 0; a null limit (limit: with
// nothing after it) is missing too.
func parseLimit(n *yaml.Node, window time.Duration) (int, error) {
	if n == nil || n.Kind == 0 || n.ShortTag() == "!!null" {
		return 0, errors.New("missing: give how many tasks a window admits, a whole number such as 10")
	}
	n = resolve(n)
	if n.Kind != yaml.ScalarNode {
		return 0, errors.New("not a number: give a whole number such as 10")
	}
	switch n.ShortTag() {
	case "!!int":
		var v int64
		if err := n.Decode(&v); err != nil || v > math.MaxInt32 || v < math.MinInt32 {
			return 0, fmt.Errorf("%s is out of range", n.Value)
		}
		if !decimalRE.MatchString(n.Value) {
			// YAML reads 0x10 and 0o20 as 16, and 020 too: surprising in a limit.
			return 0, fmt.Errorf("%s on line %d is not a decimal whole number: write %d", n.Value, n.Line, v)
		}
		return int(v), nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("%q is not a whole number such as 10", oneLine(n.Value))
		}
		switch {
		case math.Abs(f) > math.MaxInt32:
			return 0, fmt.Errorf("%s is out of range", n.Value)
		case f == math.Trunc(f):
			return int(f), nil
		case f > 0 && f < 1:
			msg := fmt.Sprintf("%s is less than one task a window: a window admits whole tasks", n.Value)
			if every := time.Duration(float64(window) / f).Round(time.Millisecond); window > 0 && every > 0 && every <= throttle.MaxWindow {
				msg += fmt.Sprintf("; for one task every %v, write limit: 1 and window: %v", every, every)
			}
			return 0, errors.New(msg)
		case f > 1:
			return 0, fmt.Errorf("%s is not a whole number: a window admits whole tasks; write %d or %d", n.Value, int(f), int(f)+1)
		}
		return 0, fmt.Errorf("%s is not a whole number of at least 1", n.Value)
	}
	return 0, fmt.Errorf("%q is not a whole number such as 10", oneLine(n.Value))
}
