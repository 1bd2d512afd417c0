package demo

import (
	"fmt"
	"github.com/sluicehq/sluice/internal/arrivals"
	"github.com/sluicehq/sluice/policies"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// receipt is one message the demo provider received.
type receipt struct {
	ID     string    // the asynq task ID
	Tenant string    // the task's tenant header
	At     time.Time // when the provider received it
}

// outcome is what a run did, as the demo provider and asynq saw it: the
// input of the summary and its verdict.
type outcome struct {
	rules   []policies.Rule   // the sms:send rules, in file order
	tenants []string          // the demo's tenants, in display order
	want    map[string]string // task ID -> tenant, every task enqueued
	got     []receipt         // every message received, in order
	returns map[string]int    // tenant -> throttled returns
	left    int               // tasks asynq still held after the worker stopped
	took    time.Duration     // from the worker's start to its stop
}

// ruleResult is how close one rule came to its limit, measured at the
// provider.
type ruleResult struct {
	Rule   string
	Limit  int
	Window time.Duration
	Most   int // the most messages received within any one window
}

func (r ruleResult) String() string {
	return fmt.Sprintf("%d of %d in %v", r.Most, r.Limit, r.Window)
}

// tenantResult is one tenant's line of the summary.
type tenantResult struct {
	Tenant   string
	Enqueued int
	Sent     int // distinct tasks received
	Returns  int
	Rules    []ruleResult // the tenant-scope rules, in file order
}

// summary is the end of a run: one line per tenant, the global rules, and
// what went wrong (nothing when the verdict passes).
type summary struct {
	Tenants  []tenantResult
	Global   []ruleResult // the global-scope rules, in file order
	Sent     int
	Enqueued int
	Returns  int
	Took     time.Duration

	// Incomplete says what was not done: tasks never sent, tasks left in
	// asynq. Expected of an interrupted run.
	Incomplete []string

	// Problems says what went wrong: tasks sent twice, messages not
	// enqueued, windows exceeded.
	Problems []string
}

// policyFor returns the policy of rule r for tenant.
func policyFor(r policies.Rule, tenant string) (limit int, window time.Duration) {
	p := r.Policy
	if o, ok := r.Tenants[tenant]; ok {
		p = o
	}
	return p.Limit, p.Window
}

// summarize computes the summary and its verdict. A window is checked
// against the rule's limit as written, without the margin the worker adds:
// the provider must never see more than the limit in one window.
func (o outcome) summarize() summary {
	s := summary{Took: o.took, Enqueued: len(o.want)}
	times := map[string][]time.Time{} // per tenant
	var all []time.Time
	counts := map[string]int{} // per task ID
	var unexpected []string
	for _, r := range o.got {
		counts[r.ID]++
		if tenant, ok := o.want[r.ID]; !ok || tenant != r.Tenant {
			unexpected = append(unexpected, r.ID)
		}
		times[r.Tenant] = append(times[r.Tenant], r.At)
		all = append(all, r.At)
	}
	sent := map[string]int{} // distinct tasks per tenant
	var missing, twice []string
	for id, tenant := range o.want {
		switch n := counts[id]; {
		case n == 0:
			missing = append(missing, id)
		case n > 1:
			twice = append(twice, fmt.Sprintf("%s %d times", id, n))
			fallthrough
		default:
			sent[tenant]++
		}
	}
	enqueued := map[string]int{}
	for _, tenant := range o.want {
		enqueued[tenant]++
	}

	var exceeded []string
	for _, tenant := range o.tenants {
		tr := tenantResult{Tenant: tenant, Enqueued: enqueued[tenant], Sent: sent[tenant], Returns: o.returns[tenant]}
		for _, r := range o.rules {
			if r.Scope != policies.ScopeTenant {
				continue
			}
			limit, window := policyFor(r, tenant)
			rr := ruleResult{Rule: r.Name, Limit: limit, Window: window, Most: arrivals.MaxInWindow(times[tenant], window)}
			if rr.Most > rr.Limit {
				exceeded = append(exceeded, fmt.Sprintf("tenant %s: %d sent within one %v window, rule %s allows %d",
					tenant, rr.Most, window, r.Name, limit))
			}
			tr.Rules = append(tr.Rules, rr)
		}
		s.Tenants = append(s.Tenants, tr)
		s.Sent += tr.Sent
		s.Returns += tr.Returns
	}
	for _, r := range o.rules {
		if r.Scope != policies.ScopeGlobal {
			continue
		}
		rr := ruleResult{Rule: r.Name, Limit: r.Policy.Limit, Window: r.Policy.Window, Most: arrivals.MaxInWindow(all, r.Policy.Window)}
		if rr.Most > rr.Limit {
			exceeded = append(exceeded, fmt.Sprintf("all tenants: %d sent within one %v window, rule %s allows %d",
				rr.Most, rr.Window, r.Name, rr.Limit))
		}
		s.Global = append(s.Global, rr)
	}

	if len(missing) > 0 {
		s.Incomplete = append(s.Incomplete, fmt.Sprintf("%d of %d tasks never sent (%s)", len(missing), len(o.want), listSome(missing)))
	}
	if len(twice) > 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("%s sent more than once (%s)", count(len(twice), "task"), listSome(twice)))
	}
	if len(unexpected) > 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("%s the demo did not enqueue, or for another tenant (%s)", count(len(unexpected), "message"), listSome(unexpected)))
	}
	s.Problems = append(s.Problems, exceeded...)
	if o.left > 0 {
		s.Incomplete = append(s.Incomplete, fmt.Sprintf("asynq still holds %d of the demo's tasks (queued, in the retry set or archived)", o.left))
	}
	return s
}

// count says "1 task", "2 tasks".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// listSome lists the first three of items, sorted, and how many more.
func listSome(items []string) string {
	items = slices.Sorted(slices.Values(items))
	if len(items) <= 3 {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:3], ", ") + fmt.Sprintf(" and %d more", len(items)-3)
}

// OK reports whether the verdict passes.
func (s summary) OK() bool { return len(s.Incomplete) == 0 && len(s.Problems) == 0 }

// verdict is the plain last line of a finished run.
func (s summary) verdict() string {
	if s.OK() {
		return "verdict: PASS: every task sent exactly once; no window exceeded"
	}
	return "verdict: FAIL: " + strings.Join(append(slices.Clip(s.Incomplete), s.Problems...), "; ")
}

// interrupted is the last line of a run stopped before its end: no verdict,
// but what went wrong until then.
func (s summary) interrupted() string {
	line := fmt.Sprintf("verdict: none, interrupted with %d of %d tasks sent", s.Sent, s.Enqueued)
	if len(s.Problems) > 0 {
		line += "; but already: " + strings.Join(s.Problems, "; ")
	}
	return line
}

// table renders the summary: a line per tenant and one for all of them, a
// column per rule with the most the provider received within one of its
// windows, of its limit.
func (s summary) table(rules []policies.Rule) string {
	header := []string{"tenant", "sent", "throttled returns"}
	for _, r := range rules {
		header = append(header, r.Name)
	}
	rows := [][]string{header}
	for _, t := range s.Tenants {
		row := []string{t.Tenant, fmt.Sprintf("%d/%d", t.Sent, t.Enqueued), fmt.Sprint(t.Returns)}
		rows = append(rows, append(row, ruleCells(rules, t.Rules, policies.ScopeTenant)...))
	}
	row := []string{"all", fmt.Sprintf("%d/%d", s.Sent, s.Enqueued), fmt.Sprint(s.Returns)}
	rows = append(rows, append(row, ruleCells(rules, s.Global, policies.ScopeGlobal)...))
	return renderTable(rows)
}

// ruleCells returns a cell per rule: the result for the rules of scope (in
// order), blank for the others.
func ruleCells(rules []policies.Rule, results []ruleResult, scope string) []string {
	cells := make([]string, len(rules))
	i := 0
	for j, r := range rules {
		if r.Scope == scope && i < len(results) {
			cells[j] = results[i].String()
			i++
		}
	}
	return cells
}

// renderTable aligns rows of cells in columns two spaces apart.
func renderTable(rows [][]string) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, cells := range rows {
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	_ = w.Flush()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n") + "\n"
}
