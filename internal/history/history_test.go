package history_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/history"
)

// admitted is a worker's record line of task admitted at µs in a log of
// key with limit 2 a second.
func admitted(task string, at int64, key string) string {
	return fmt.Sprintf(`{"level":"DEBUG","msg":"admitted","task":%q,"at_us":%d,"logs":[{"key":%q,"limit":2,"window_us":1000000,"cost":1}]}`,
		task, at, key)
}

// TestCheck: three admissions within a window of a limit of 2 are one over,
// named with its tasks; a window is (t − window, t], so one a whole window
// earlier does not count; a restamp moves the task's latest admission; keys
// are apart; other lines are skipped.
func TestCheck(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		lines []string
		overs int
		full  string // the fullest window of key a
	}{
		{"two in a window", []string{admitted("t1", 0, "a"), admitted("t2", 500_000, "a"), admitted("t3", 1_000_000, "a")}, 0, "2/2"},
		{"three in a window", []string{admitted("t1", 1, "a"), admitted("t2", 500_000, "a"), admitted("t3", 1_000_000, "a")}, 1, "3/2"},
		{"restamped, still in it", []string{admitted("t1", 1, "a"), admitted("t2", 500_000, "a"),
			`{"msg":"restamped a late send","task":"t1","at_us":1000001}`, admitted("t3", 1_000_000, "a")}, 1, "3/2"},
		{"restamped before", []string{admitted("t1", 1, "a"), `{"msg":"restamped a late send","task":"t1","at_us":2000001}`,
			admitted("t2", 500_000, "a"), admitted("t3", 1_000_000, "a")}, 0, "2/2"},
		{"keys apart", []string{admitted("t1", 1, "a"), admitted("t2", 2, "b"), admitted("t3", 3, "a"), `not JSON`,
			`{"msg":"worker started"}`}, 0, "2/2"},
	}
	for _, tc := range cases {
		var h history.History
		if err := h.Read(strings.NewReader(strings.Join(tc.lines, "\n"))); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		overs, fullest := h.Check(10)
		if len(overs) != tc.overs || fullest["a"] != tc.full {
			t.Errorf("%s: overs %+v, fullest %v; want %d over, a at %s", tc.name, overs, fullest, tc.overs, tc.full)
		}
		if tc.overs > 0 && strings.Join(slices.Sorted(slices.Values(overs[0].Tasks)), ",") != "t1,t2,t3" {
			t.Errorf("%s: over %+v, want tasks t1, t2 and t3", tc.name, overs[0])
		}
	}
	var h history.History
	if err := h.Read(strings.NewReader(`{"msg":"restamped a late send","task":"x","at_us":5}`)); err == nil {
		t.Error("a restamp of a task never admitted: no error")
	}
}
