package policies_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/throttle/httplimit"
)

// httpPolicies has an entry of its own for the API, with an override and a
// rule in shadow mode.
const httpPolicies = `
margin: 0s
extra_task_types: [http:api]
tasks:
  http:api:
    - {name: tenant, scope: tenant, limit: 2, window: 1m, tenants: {big: {limit: 4}}}
    - {name: trial, scope: tenant, mode: shadow, limit: 1, window: 1h}
    - {name: api, scope: global, limit: 100, window: 1m}
`

// TestHTTPRules: a request of tenant is held to the rules a task of the
// type would be, with the same keys and overrides, shadow rules left out.
// throttle/httplimit's TestPolicyFile runs them through the middleware.
func TestHTTPRules(t *testing.T) {
	t.Parallel()
	p, err := policies.Parse("inline", []byte(httpPolicies))
	if err != nil {
		t.Fatal(err)
	}
	rf, err := policies.HTTPRules(policies.Static(p), "http:api")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		tenant string
		want   []httplimit.Rule
	}{
		{"acme", []httplimit.Rule{
			{Name: "tenant", Check: throttle.Check{Key: "rule/http:api/tenant/acme", Policy: throttle.PerMinute(2), Cost: 1}},
			{Name: "api", Check: throttle.Check{Key: "rule/http:api/api", Policy: throttle.PerMinute(100), Cost: 1}},
		}},
		{"big", []httplimit.Rule{
			{Name: "tenant", Check: throttle.Check{Key: "rule/http:api/tenant/big", Policy: throttle.PerMinute(4), Cost: 1}},
			{Name: "api", Check: throttle.Check{Key: "rule/http:api/api", Policy: throttle.PerMinute(100), Cost: 1}},
		}},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.want, rf(nil, tc.tenant)); diff != "" {
			t.Errorf("rules of %s (-want +got):\n%s", tc.tenant, diff)
		}
	}
}

// TestHTTPRulesErrors: HTTPRules fails for policies not loaded and a type
// the file does not name, rather than throttle nothing.
func TestHTTPRulesErrors(t *testing.T) {
	t.Parallel()
	p, err := policies.Parse("inline", []byte(httpPolicies))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		f        *policies.File
		taskType string
		wantErr  string
	}{
		{"nil file", nil, "http:api", "policies: HTTPRules needs loaded policies"},
		{"no policies", &policies.File{}, "http:api", "policies: HTTPRules needs loaded policies"},
		{"unknown type", policies.Static(p), "http:apl", `policies: HTTPRules: inline has no rules for "http:apl"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rf, err := policies.HTTPRules(tc.f, tc.taskType)
			if err == nil || err.Error() != tc.wantErr || rf != nil {
				t.Errorf("HTTPRules: %v; want %q", err, tc.wantErr)
			}
		})
	}
}
