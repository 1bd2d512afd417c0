package policies

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/throttle/httplimit"
)

// HTTPRules returns the rules of taskType in the policies file f as
// rules for package httplimit's HTTP middleware: a request whose key (its
// tenant) is tenant is held to the rules that a task of type taskType for
// tenant would be, with the same limiter keys and tenant overrides. Each
// request reads the policies in force, so a reload (SIGHUP) applies at
// once.
//
// Give the API an entry of its own in the file (http:api, say), so that
// its requests have windows of their own; naming a type that tasks use
// makes requests and tasks share the same windows. Rules in shadow mode
// (mode: shadow) are left out: the middleware has no shadow mode. It fails
// for policies not loaded, or a type the file has no rules for. A reload
// that later removes the type's rules, or makes them all shadow rules,
// leaves requests unlimited, as it would the type's tasks.
func HTTPRules(f *File, taskType string) (httplimit.RuleFunc, error) {
	if f == nil || f.Current() == nil {
		return nil, errors.New("policies: HTTPRules needs loaded policies")
	}
	if len(f.Current().Rules(taskType)) == 0 {
		return nil, fmt.Errorf("policies: HTTPRules: %s has no rules for %q", f.Current().Source(), taskType)
	}
	return func(_ *http.Request, tenant string) []httplimit.Rule {
		applied := f.Current().For(taskType, tenant)
		rules := make([]httplimit.Rule, 0, len(applied))
		for _, a := range applied {
			if !a.Shadow {
				rules = append(rules, httplimit.Rule{Name: a.Rule, Check: a.Check})
			}
		}
		return rules
	}, nil
}
