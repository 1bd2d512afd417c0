package status

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/throttle"
)

// TestLinesViews: flows are grouped by task type, most urgent first; a
// tenant waiting at two priorities has its grants counted once in the
// share; the tasks in line are added up by priority.
func TestLinesViews(t *testing.T) {
	t.Parallel()
	flow := func(class string, p int, tenant string, inLine int, w float64, grants int) throttle.WaitingFlow {
		return throttle.WaitingFlow{Flow: throttle.Flow{Class: class, Priority: p, Tenant: tenant}, InLine: inLine, Weight: w, Grants: grants}
	}
	got := linesViews([]throttle.WaitingFlow{
		flow("sms:send", 3, "acme", 30, 1, 60),
		flow("sms:send", 1, "acme", 2, 1, 60),
		flow("sms:send", 3, "globex", 10, 0.5, 20),
		flow("email:send", 5, "initech", 7, 3, 0),
	})
	want := []linesView{{
		TaskType:   "email:send",
		ByPriority: []byCount{{By: "5", Count: 7}},
		Flows:      []flowView{{Tenant: "initech", Weight: "3", Priority: 5, InLine: 7}},
	}, {
		TaskType:   "sms:send",
		ByPriority: []byCount{{By: "1", Count: 2}, {By: "3", Count: 40}},
		Flows: []flowView{
			{Tenant: "acme", Weight: "1", Priority: 1, InLine: 2, Grants: 60, SharePct: 75},
			{Tenant: "acme", Weight: "1", Priority: 3, InLine: 30, Grants: 60, SharePct: 75},
			{Tenant: "globex", Weight: "0.5", Priority: 3, InLine: 10, Grants: 20, SharePct: 25},
		},
	}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(linesView{}, flowView{}, byCount{})); diff != "" {
		t.Errorf("linesViews (-want +got):\n%s", diff)
	}
}
