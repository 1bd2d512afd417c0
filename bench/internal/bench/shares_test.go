package bench

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMaxMinShares(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		weights      []float64
		total, limit float64
		want         []float64
	}{
		{"weighted", []float64{3, 1, 1, 1}, 60, 60, []float64{30, 10, 10, 10}},
		{"equal", []float64{1, 1, 1, 1}, 100, 20, []float64{20, 20, 20, 20}},
		{"one capped, the rest shared", []float64{3, 1, 1, 1}, 60, 20, []float64{20, 40.0 / 3, 40.0 / 3, 40.0 / 3}},
		{"none", nil, 60, 60, []float64{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, maxMinShares(tc.weights, tc.total, tc.limit)); diff != "" {
				t.Errorf("maxMinShares (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSharesOf: made-up deliveries of two tenants weighted 3 and 1: over
// windows 1 to 11 they sent 300 and 200, of which their shares are 375
// and 125: the second is 60% over.
func TestSharesOf(t *testing.T) {
	t.Parallel()
	sc := drainScenario{mode: "test", tasks: 1000, tenants: 2, tenantLimit: 40, providerLimit: 40, window: time.Second, weights: []float64{3, 1}}
	p := &drainPlan{sc: sc, tenantNames: []string{"a", "b"}}
	start := time.Unix(1_700_000_000, 0)
	every := func(perSecond int) []time.Time {
		var out []time.Time
		for i := range 13 * perSecond {
			out = append(out, start.Add(time.Duration(i)*time.Second/time.Duration(perSecond)))
		}
		return out
	}
	got := sharesOf(p, [][]time.Time{every(30), every(20)}, start)
	want := &ShareResult{FromSeconds: 1, ToSeconds: 11, MaxDeviation: 0.6,
		Tenants: []TenantShare{{Tenant: "a", Weight: 3, Sends: 300, Share: 375}, {Tenant: "b", Weight: 1, Sends: 200, Share: 125}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sharesOf (-want +got):\n%s", diff)
	}
	if sharesOf(&drainPlan{sc: drainShort}, nil, start) != nil {
		t.Errorf("sharesOf a scenario without weights is not nil")
	}
}
