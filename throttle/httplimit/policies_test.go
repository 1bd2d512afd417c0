package httplimit_test

// The policies file drives the middleware through policies.HTTPRules.
// Package policies imports httplimit, so httplimit cannot import it; only
// its tests do. policies/httprules_test.go tests HTTPRules' errors.

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle/httplimit"
)

const apiPolicies = `
extra_task_types: [http:api]
tasks:
  http:api:
    - name: tenant
      scope: tenant
      limit: 2
      window: 1m
      tenants:
        big: { limit: 4 }
    - name: api
      scope: global
      limit: 100
      window: 1m
    - name: trial
      scope: tenant
      mode: shadow
      limit: 1
      window: 1h
  sms:send:
    - name: tenant
      scope: tenant
      limit: 1
      window: 1s
`

// TestPolicyFile: with policies.HTTPRules a request keyed by tenant is held
// to the rules of its type in the policies file, overrides included and
// shadow rules left out, in the limiter keys a task would use; a reload
// applies to the next request.
func TestPolicyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(path, []byte(apiPolicies), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := policies.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := policies.HTTPRules(f, "http:api")
	if err != nil {
		t.Fatal(err)
	}
	l, _ := newLimiter(t)
	srv := serve(t, newMiddleware(t, l, httplimit.Header("X-Tenant"), rules, nil))

	cases := []struct {
		tenant     string
		wantStatus int
		wantPolicy string
		wantLimit  limitField // t not compared
	}{
		{"acme", 200, `"tenant";q=2;w=60, "api";q=100;w=60`, limitField{"tenant", 1, 0}},
		{"acme", 200, `"tenant";q=2;w=60, "api";q=100;w=60`, limitField{"tenant", 0, 0}},
		{"acme", 429, `"tenant";q=2;w=60, "api";q=100;w=60`, limitField{"tenant", 0, 0}},
		{"big", 200, `"tenant";q=4;w=60, "api";q=100;w=60`, limitField{"tenant", 3, 0}},
	}
	for i, tc := range cases {
		resp := get(t, srv, "/", "X-Tenant", tc.tenant)
		if resp.status != tc.wantStatus {
			t.Fatalf("request %d (%s): %d %q, want %d", i+1, tc.tenant, resp.status, resp.body, tc.wantStatus)
		}
		t.Logf("request %d (X-Tenant: %s):\n%s", i+1, tc.tenant, resp.dump)
		if got := resp.header.Get(httplimit.HeaderPolicy); got != tc.wantPolicy {
			t.Errorf("request %d (%s): RateLimit-Policy %q, want %q", i+1, tc.tenant, got, tc.wantPolicy)
		}
		f := rateLimit(t, resp.header)
		f.t = 0
		if f != tc.wantLimit {
			t.Errorf("request %d (%s): RateLimit %+v, want %+v", i+1, tc.tenant, f, tc.wantLimit)
		}
	}

	// The windows are the ones a task of type http:api would use.
	applied := f.Current().For("http:api", "acme")
	d, err := l.Peek(context.Background(), applied[0].Check.Key, applied[0].Check.Policy)
	if err != nil {
		t.Fatal(err)
	}
	if d.Count != 2 || applied[0].Check.Key != "rule/http:api/tenant/acme" {
		t.Errorf("%s holds %d, want 2", applied[0].Check.Key, d.Count)
	}

	// A reload applies to the next request.
	if err := os.WriteFile(path, []byte(strings.Replace(apiPolicies, "limit: 2", "limit: 5", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	resp := get(t, srv, "/", "X-Tenant", "acme")
	if resp.status != http.StatusOK || !strings.HasPrefix(resp.header.Get(httplimit.HeaderPolicy), `"tenant";q=5;`) {
		t.Errorf("after the reload: %d, RateLimit-Policy %q; want 200 and q=5", resp.status, resp.header.Get(httplimit.HeaderPolicy))
	}
}
