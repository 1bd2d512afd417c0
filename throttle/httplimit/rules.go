package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/sluicehq/sluice/throttle"
)

// Rule is one limit as it applies to one request.
type Rule struct {
	// Name names the rule in the RateLimit and RateLimit-Policy headers
	// and in 429 responses. It must be a Structured Fields string: 1 or
	// more printable ASCII characters (space to tilde).
	Name string

	// Check is the limiter check: the limiter key (complete: the RuleFunc
	// decides how a request's key maps to limiter keys), the policy, and
	// the cost of the request, 1 or more.
	Check throttle.Check
}

// RuleFunc returns the rules that apply to request r, whose key (from the
// KeyFunc) is key; none means the request is not limited. The request is
// served only if every rule allows it. A RuleFunc is called once per
// request, and must be safe for concurrent use.
type RuleFunc func(r *http.Request, key string) []Rule

// Limit is one limit of Limits.
type Limit struct {
	// Name names the limit's windows and is its name in the headers: 1 to
	// 64 letters, digits, '.', '_' or '-', unique among the limits. Two
	// middlewares that share a name (and a limiter prefix) share windows,
	// and must share the Policy too: a key has one window.
	Name string

	// Policy is the limit each key is held to.
	Policy throttle.Policy
}

var limitNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Limits returns a RuleFunc that holds every key to each of limits, at a
// cost of 1 a request. The limiter key of limit "per-key" for the key
// "acme" is "http/per-key/acme": names contain no '/', so no two (name,
// key) pairs share a limiter key. It fails for no limits, a bad or
// repeated name, or an invalid policy.
func Limits(limits ...Limit) (RuleFunc, error) {
	if len(limits) == 0 {
		return nil, errors.New("httplimit: Limits needs at least one limit")
	}
	seen := make(map[string]bool, len(limits))
	for i, l := range limits {
		if !limitNameRE.MatchString(l.Name) {
			return nil, fmt.Errorf("httplimit: limit %d: name %s must be 1 to 64 letters, digits, '.', '_' or '-'", i+1, throttle.Quote(l.Name))
		}
		if seen[l.Name] {
			return nil, fmt.Errorf("httplimit: limit %d: name %q is used twice", i+1, l.Name)
		}
		seen[l.Name] = true
		if err := l.Policy.Validate(); err != nil {
			return nil, fmt.Errorf("httplimit: limit %d (%s): %w", i+1, l.Name, err)
		}
	}
	limits = append([]Limit(nil), limits...)
	return func(_ *http.Request, key string) []Rule {
		rules := make([]Rule, len(limits))
		for i, l := range limits {
			rules[i] = Rule{Name: l.Name, Check: throttle.Check{Key: "http/" + l.Name + "/" + key, Policy: l.Policy, Cost: 1}}
		}
		return rules
	}, nil
}
