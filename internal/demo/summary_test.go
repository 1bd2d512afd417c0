package demo

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
)

// testRules are the sms:send rules of a policies file like the built-in one:
// acme 2 a second, globex 1 every 2 seconds, others 1 a second, 3 a second
// for all. The margin must not count in the verdict.
func testRules(t *testing.T) []policies.Rule {
	t.Helper()
	p, err := policies.Parse(t.Name(), []byte(`
margin: 100ms
tasks:
  sms:send:
    - name: tenant
      scope: tenant
      limit: 1
      window: 1s
      tenants:
        acme: { limit: 2 }
        globex: { window: 2s }
    - { name: provider, scope: global, limit: 3, window: 1s }
`))
	if err != nil {
		t.Fatal(err)
	}
	return p.Rules(producer.TypeSMS)
}

// at is a receipt of task id for tenant, ms milliseconds into a run.
func at(id, tenant string, ms int) receipt {
	return receipt{ID: id, Tenant: tenant, At: time.Unix(1_000_000, 0).Add(time.Duration(ms) * time.Millisecond)}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	rules := testRules(t)
	want := map[string]string{"a1": "acme", "a2": "acme", "a3": "acme", "g1": "globex", "g2": "globex", "i1": "initech"}
	// Within every limit: acme 2 in any 1s, globex 1 in any 2s, initech 1,
	// and at most 3 in any 1s in all; a window's limit is reached exactly,
	// and entries exactly one window apart are in different windows.
	good := []receipt{
		at("a1", "acme", 0), at("a2", "acme", 0), at("i1", "initech", 0),
		at("g1", "globex", 1000), at("a3", "acme", 1000),
		at("g2", "globex", 3000),
	}
	cases := []struct {
		name     string
		got      []receipt
		left     int
		ok       bool
		problems []string // each must be in the verdict
	}{
		{"every limit kept", good, 0, true, nil},
		{"tenant window exceeded", replace(good, at("a3", "acme", 999)), 0, false,
			[]string{"tenant acme: 3 sent within one 1s window, rule tenant allows 2"}},
		{"tenant override window exceeded", replace(good, at("g2", "globex", 2999)), 0, false,
			[]string{"tenant globex: 2 sent within one 2s window, rule tenant allows 1"}},
		{"global window exceeded", replace(good, at("g1", "globex", 500)), 0, false,
			[]string{"all tenants: 4 sent within one 1s window, rule provider allows 3"}},
		{"a task sent twice", append(good, at("g2", "globex", 9000)), 0, false,
			[]string{"1 task sent more than once (g2 2 times)"}},
		{"a task never sent", good[:5], 0, false, []string{"1 of 6 tasks never sent (g2)"}},
		{"a message not enqueued", append(good, at("x1", "initech", 9000)), 0, false,
			[]string{"1 message the demo did not enqueue, or for another tenant (x1)"}},
		{"a message for another tenant", replace(good, at("i1", "acme", 5000)), 0, false,
			[]string{"1 message the demo did not enqueue, or for another tenant (i1)"}},
		{"tasks left in asynq", good, 2, false, []string{"asynq still holds 2 of the demo's tasks"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := outcome{rules: rules, tenants: []string{"acme", "globex", "initech"}, want: want, got: tc.got, left: tc.left,
				returns: map[string]int{"acme": 4, "initech": 1}}
			s := o.summarize()
			if got := s.OK(); got != tc.ok {
				t.Errorf("OK() = %v, want %v; verdict %q", got, tc.ok, s.verdict())
			}
			v := s.verdict()
			if tc.ok && v != "verdict: PASS: every task sent exactly once; no window exceeded" {
				t.Errorf("verdict = %q", v)
			}
			if !tc.ok && !strings.HasPrefix(v, "verdict: FAIL: ") {
				t.Errorf("verdict = %q, want a failure", v)
			}
			for _, p := range tc.problems {
				if !strings.Contains(v, p) {
					t.Errorf("verdict %q does not say %q", v, p)
				}
			}
			if strings.Contains(v, "\n") {
				t.Errorf("verdict %q is more than one line", v)
			}
		})
	}
}

// replace returns receipts with the one of r's ID replaced by r.
func replace(receipts []receipt, r receipt) []receipt {
	out := make([]receipt, len(receipts))
	for i, x := range receipts {
		if x.ID == r.ID {
			x = r
		}
		out[i] = x
	}
	return out
}

// TestSummaryResults: the per-tenant and global figures of the summary.
func TestSummaryResults(t *testing.T) {
	t.Parallel()
	rules := testRules(t)
	o := outcome{
		rules: rules, tenants: []string{"acme", "globex", "initech"},
		want: map[string]string{"a1": "acme", "a2": "acme", "g1": "globex", "i1": "initech"},
		got: []receipt{
			at("a1", "acme", 0), at("a2", "acme", 400), at("g1", "globex", 500), at("g1", "globex", 2600),
		},
		returns: map[string]int{"acme": 3, "globex": 1},
		took:    3 * time.Second,
	}
	s := o.summarize()
	want := summary{
		Tenants: []tenantResult{
			{"acme", 2, 2, 3, []ruleResult{{"tenant", 2, time.Second, 2}}},
			{"globex", 1, 1, 1, []ruleResult{{"tenant", 1, 2 * time.Second, 1}}},
			{"initech", 1, 0, 0, []ruleResult{{"tenant", 1, time.Second, 0}}},
		},
		Global:     []ruleResult{{"provider", 3, time.Second, 3}},
		Sent:       3,
		Enqueued:   4,
		Returns:    4,
		Took:       3 * time.Second,
		Incomplete: []string{"1 of 4 tasks never sent (i1)"},
		Problems:   []string{"1 task sent more than once (g1 2 times)"},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	table := s.table(rules)
	wantTable := `tenant   sent  throttled returns  tenant        provider
acme     2/2   3                  2 of 2 in 1s
globex   1/1   1                  1 of 1 in 2s
initech  0/1   0                  0 of 1 in 1s
all      3/4   4                                3 of 3 in 1s
`
	if diff := cmp.Diff(wantTable, table); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	// Interrupted: the unsent task is expected, the duplicate is not.
	if got, want := s.interrupted(), "verdict: none, interrupted with 3 of 4 tasks sent; but already: 1 task sent more than once (g1 2 times)"; got != want {
		t.Errorf("interrupted() = %q, want %q", got, want)
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		n    int
		want []int
	}{
		{3, []int{1, 1, 1}},
		{6, []int{3, 2, 1}},
		{7, []int{4, 2, 1}},
		{60, []int{30, 20, 10}},
		{1000, []int{501, 333, 166}},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.want, split(tc.n)); diff != "" {
			t.Errorf("split(%d) (-want +got):\n%s", tc.n, diff)
		}
	}
}

func TestRows(t *testing.T) {
	t.Parallel()
	cases := []struct {
		text  string
		width int
		want  int
	}{
		{"", 80, 0},
		{"a\nb\n", 80, 2},
		{"a\nb\n", 0, 2},
		{strings.Repeat("x", 80) + "\n", 80, 1},
		{strings.Repeat("x", 81) + "\n", 80, 2},
		{strings.Repeat("x", 161) + "\nb\n", 80, 4},
		{strings.Repeat("x", 161) + "\nb\n", 0, 2},
	}
	for _, tc := range cases {
		if got := rows(tc.text, tc.width); got != tc.want {
			t.Errorf("rows(%d characters, %d) = %d, want %d", len(tc.text), tc.width, got, tc.want)
		}
	}
}
