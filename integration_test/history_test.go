package integration_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestRecordFirstComeFirstServed: workers that serve first come, first
// served (--fairness off) record their admissions too
// (throttle.MultiDecision.At), and the record holds no window over.
func TestRecordFirstComeFirstServed(t *testing.T) {
	deliverThrough(t, redistest.URL(t), redistest.Client(t), nil, "--fairness", "off")
}

// stopRest stops procs, but for the first when it was stopped already.
func stopRest(t *testing.T, procs []*workerProc, firstStopped bool) {
	t.Helper()
	if firstStopped {
		procs = procs[1:]
	}
	stopWorkers(t, procs...)
}

// checkHistory checks every window of the limiter's own record: the
// admissions that the workers of procs logged at debug level, each with
// the Redis time its entries stand at (docs/SCALING.md, "The history
// checker"). It fails t on a window over its limit, or when the workers
// recorded fewer admissions than sends (at least).
func checkHistory(t testing.TB, sends int, procs ...*workerProc) {
	t.Helper()
	var h history.History
	for _, p := range procs {
		if err := h.Read(strings.NewReader(p.logs.String())); err != nil {
			t.Fatalf("the workers' record: %v", err)
		}
	}
	if h.Admissions() < sends {
		t.Errorf("the workers recorded %d admissions, fewer than the %d sends", h.Admissions(), sends)
	}
	overs, fullest := h.Check(5)
	for _, o := range overs {
		t.Errorf("the record holds %d entries of %s in (%d, %d] µs, over its limit of %d: %v", o.Held, o.Key, o.From, o.To, o.Limit, o.Tasks)
	}
	t.Logf("the record: %d admissions; the fullest window of each log: %s", h.Admissions(), fullestText(fullest))
}

// fullestText is the fullest window of each log, key: held/limit, the
// first 12 keys in order and how many more.
func fullestText(fullest map[string]string) string {
	keys := slices.Sorted(maps.Keys(fullest))
	var parts []string
	for _, k := range keys[:min(len(keys), 12)] {
		parts = append(parts, k+": "+fullest[k])
	}
	if len(keys) > 12 {
		parts = append(parts, fmt.Sprintf("and %d more", len(keys)-12))
	}
	return strings.Join(parts, ", ")
}
