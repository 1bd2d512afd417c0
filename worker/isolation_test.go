package worker_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
)

// isolationPolicies give every tenant windows of its own in two task types.
const isolationPolicies = `
tasks:
  sms:send:
    - {name: per-tenant, scope: tenant, limit: 3, window: 1h}
  email:send:
    - {name: per-tenant, scope: tenant, limit: 3, window: 1h}
`

// TestTenantIsolation: whatever its tenant id, tenant A's traffic can
// neither consume nor reset tenant B's quota, because the keys that
// Policies.For and the limiter build for A never are B's. The hostile ids
// look like B's, or try to end B's key, open or close its hash tag, or
// pass for its escaped or hashed form. producer.ValidateTenant refuses
// most of them (and the worker archives a task with an invalid tenant, see
// TestMiddlewareBadTenant); the keys stay apart even for those, so the
// isolation does not rest on the validation alone.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	ctx := t.Context()
	lim := throttle.NewLimiter(rdb, throttle.WithPrefix(redistest.Prefix(t)))
	p, err := policies.Parse("isolation.yaml", []byte(isolationPolicies))
	if err != nil {
		t.Fatal(err)
	}

	// The victims: a valid id, and one too long to be valid whose key is
	// hashed.
	long := strings.Repeat("b", 300)
	victims := []string{"b", long}
	victimKeys, windows := seedIsolationVictims(t, rdb, lim, p, victims)

	for _, tc := range hostileTenants(long) {
		if err := producer.ValidateTenant(tc.tenant); (err == nil) != tc.valid {
			t.Errorf("ValidateTenant(%q) = %v, want valid %v", tc.tenant, err, tc.valid)
		}
		for _, c := range isolationChecks(p, tc.tenant) {
			checkIsolatedTenant(t, lim, victimKeys, tc.tenant, c)
		}
	}

	// The victims' windows hold what they held, entry for entry.
	for k, want := range windows {
		if diff := cmp.Diff(want, rdb.ZRange(ctx, k, 0, -1).Val()); diff != "" {
			t.Errorf("victim %.10q: window %s changed while other tenants exhausted and reset theirs (-before +after):\n%s", victimKeys[k], k, diff)
		}
	}
	for _, v := range victims {
		for _, c := range isolationChecks(p, v) {
			if d, err := lim.Peek(ctx, c.Key, c.Policy); err != nil || d.Count != 1 || !d.Allowed {
				t.Errorf("victim %.10q: %s holds %d (allowed %v, %v), want the 1 it took", v, c.Key, d.Count, d.Allowed, err)
			}
		}
	}
}

// isolationAlgorithms are the algorithms whose Redis keys
// TestTenantIsolation holds apart.
var isolationAlgorithms = []throttle.Algorithm{throttle.SlidingLog, throttle.SlidingWindow, throttle.GCRA, throttle.FixedWindow}

// isolationChecks returns the checks of p for tenant's SMS and email tasks.
func isolationChecks(p *policies.Policies, tenant string) []throttle.Check {
	var out []throttle.Check
	for _, typ := range []string{producer.TypeSMS, producer.TypeEmail} {
		for _, a := range p.For(typ, tenant) {
			out = append(out, a.Check)
		}
	}
	return out
}

// seedIsolationVictims makes each victim take one unit of each of its
// checks, and returns the victims' Redis keys for every algorithm (key ->
// victim) and the entries of their windows (window key -> entries).
func seedIsolationVictims(t *testing.T, rdb *redis.Client, lim *throttle.Limiter, p *policies.Policies, victims []string) (victimKeys map[string]string, windows map[string][]string) {
	t.Helper()
	ctx := t.Context()
	victimKeys = map[string]string{}
	windows = map[string][]string{}
	for _, v := range victims {
		for _, c := range isolationChecks(p, v) {
			d, err := lim.AllowMulti(ctx, []throttle.Check{c})
			if err != nil || !d.Allowed {
				t.Fatalf("victim %.10q: first allow of %s: %+v, %v", v, c.Key, d, err)
			}
			for _, a := range isolationAlgorithms {
				k, err := lim.RedisKeyFor(c.Key, a)
				if err != nil {
					t.Fatal(err)
				}
				victimKeys[k] = v
			}
			k, _ := lim.RedisKey(c.Key)
			windows[k] = rdb.ZRange(ctx, k, 0, -1).Val()
		}
	}
	return victimKeys, windows
}

// hostileTenant is a tenant id that must not reach a victim's keys.
type hostileTenant struct {
	tenant string
	valid  bool // what producer.ValidateTenant should say
}

// hostileTenants returns the ids TestTenantIsolation tries against the
// victims "b" and long.
func hostileTenants(long string) []hostileTenant {
	hashed := func(key string) string {
		sum := sha256.Sum256([]byte(key))
		return "#" + hex.EncodeToString(sum[:])
	}
	return []hostileTenant{
		{"B", true}, {"b.", true}, {"b-", true}, {"b_", true}, {"bb", true}, {"0b", true}, {"a", true},
		{"", false}, {"b/", false}, {"/b", false}, {"b/x", false}, {"x/b", false}, {"../b", false},
		{"a{b}", false}, {"{b}", false}, {"b}", false}, {"}b", false}, {"{limits}", false},
		{"b:", false}, {":b", false}, {"b:x", false},
		{"%62", false}, {"b%", false}, {"b%2F", false}, {"a%7Bb%7D", false}, {"%7Bb%7D", false},
		{" b", false}, {"b ", false}, {"b\n", false}, {"b\x00", false}, {"b\u200b", false},
		{"rule/sms:send/per-tenant/b", false}, {"per-tenant/b", false},
		{hashed("rule/" + producer.TypeSMS + "/per-tenant/" + long), false},
		{long + "x", false}, {long[:299], false},
	}
}

// checkIsolatedTenant checks that tenant's check c has none of the victims'
// Redis keys, and that tenant exhausts and resets its own window.
func checkIsolatedTenant(t *testing.T, lim *throttle.Limiter, victimKeys map[string]string, tenant string, c throttle.Check) {
	t.Helper()
	ctx := t.Context()
	for _, a := range isolationAlgorithms {
		k, err := lim.RedisKeyFor(c.Key, a)
		if err != nil {
			t.Fatalf("tenant %q: key %q: %v", tenant, c.Key, err)
		}
		if v, ok := victimKeys[k]; ok {
			t.Errorf("tenant %q has the Redis key %s of tenant %.10q", tenant, k, v)
		}
	}
	// A exhausts its own window: 3 admitted, the 4th denied.
	for i := range 4 {
		d, err := lim.AllowMulti(ctx, []throttle.Check{c})
		if err != nil {
			t.Fatalf("tenant %q: allow %s: %v", tenant, c.Key, err)
		}
		if got, want := d.Allowed, i < 3; got != want {
			t.Errorf("tenant %q: allow %d of %s: allowed %v, want %v (its own window of 3)", tenant, i+1, c.Key, got, want)
		}
	}
	if err := lim.Reset(ctx, c.Key); err != nil {
		t.Fatalf("tenant %q: reset %s: %v", tenant, c.Key, err)
	}
	if d, err := lim.Peek(ctx, c.Key, c.Policy); err != nil || d.Count != 0 {
		t.Errorf("tenant %q: %s holds %d after its reset (%v), want 0", tenant, c.Key, d.Count, err)
	}
}
