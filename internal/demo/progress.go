package demo

import (
	"fmt"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
)

// legend says what the live progress shows; it is printed once, above it.
const legend = `sent: received by the demo provider, of the tasks enqueued.
queued, in worker, retry set: where asynq has the tasks not yet sent, now;
  in worker is running, or waiting in a worker for its place in line.
returns: times a task was throttled back to asynq's retry set so far.
rule columns: sent within the last window of the rule, of its limit.`

// states counts one tenant's unsent tasks by where asynq has them.
type states struct {
	Queued   int // pending in the queue
	InWorker int // active: running, or held in a worker for its place
	Retry    int // in the retry set
}

// taskStates reads where asynq has the tasks of queue, per tenant: at most
// size of each state.
func taskStates(insp *asynq.Inspector, queue string, size int) (map[string]states, error) {
	out := map[string]states{}
	lists := []struct {
		list func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error)
		add  func(*states)
	}{
		{insp.ListPendingTasks, func(s *states) { s.Queued++ }},
		{insp.ListActiveTasks, func(s *states) { s.InWorker++ }},
		{insp.ListRetryTasks, func(s *states) { s.Retry++ }},
	}
	for _, l := range lists {
		tasks, err := l.list(queue, asynq.PageSize(size))
		if err != nil {
			return nil, err
		}
		for _, t := range tasks {
			tenant := t.Headers[producer.HeaderTenant]
			s := out[tenant]
			l.add(&s)
			out[tenant] = s
		}
	}
	return out, nil
}

// progress is one moment of a run, for the live display.
type progress struct {
	outcome                   // what has happened so far
	now     time.Time         // the moment
	states  map[string]states // per tenant; nil when unknown
}

// sent counts the distinct tasks of tenant received so far ("" for
// every tenant).
func (p progress) sent(tenant string) int {
	seen := map[string]bool{}
	for _, r := range p.got {
		if tenant == "" || r.Tenant == tenant {
			seen[r.ID] = true
		}
	}
	return len(seen)
}

// recent counts the messages of tenant ("" for every tenant) received
// within the window before now.
func (p progress) recent(tenant string, window time.Duration) int {
	n := 0
	for _, r := range p.got {
		if (tenant == "" || r.Tenant == tenant) && p.now.Sub(r.At) < window {
			n++
		}
	}
	return n
}

// rate is the cell of rule r for tenant ("" for a global rule): sent in its
// last window, of its limit.
func (p progress) rate(r policies.Rule, tenant string) string {
	limit, window := policyFor(r, tenant)
	return fmt.Sprintf("%d/%d in %v", p.recent(tenant, window), limit, window)
}

// enqueued counts the tasks of tenant ("" for every tenant).
func (p progress) enqueued(tenant string) int {
	n := 0
	for _, t := range p.want {
		if tenant == "" || t == tenant {
			n++
		}
	}
	return n
}

// returned counts the throttled returns of tenant ("" for every tenant).
func (p progress) returned(tenant string) int {
	if tenant != "" {
		return p.returns[tenant]
	}
	n := 0
	for _, r := range p.returns {
		n += r
	}
	return n
}

// state returns the cells of tenant's states ("" for all tenants), "?"
// when unknown.
func (p progress) state(tenant string) []string {
	if p.states == nil {
		return []string{"?", "?", "?"}
	}
	var s states
	for t, ts := range p.states {
		if tenant == "" || t == tenant {
			s.Queued += ts.Queued
			s.InWorker += ts.InWorker
			s.Retry += ts.Retry
		}
	}
	return []string{fmt.Sprint(s.Queued), fmt.Sprint(s.InWorker), fmt.Sprint(s.Retry)}
}

// table renders the moment for a terminal: a line per tenant and one for
// all of them.
func (p progress) table(start time.Time) string {
	header := []string{"tenant", "sent", "queued", "in worker", "retry set", "returns"}
	for _, r := range p.rules {
		header = append(header, r.Name)
	}
	rows := [][]string{header}
	row := func(tenant, name, scope string) []string {
		cells := append([]string{name, fmt.Sprintf("%d/%d", p.sent(tenant), p.enqueued(tenant))}, p.state(tenant)...)
		cells = append(cells, fmt.Sprint(p.returned(tenant)))
		for _, r := range p.rules {
			cell := ""
			if r.Scope == scope {
				cell = p.rate(r, tenant)
			}
			cells = append(cells, cell)
		}
		return cells
	}
	for _, t := range p.tenants {
		rows = append(rows, row(t, t, policies.ScopeTenant))
	}
	rows = append(rows, row("", "all", policies.ScopeGlobal))
	return fmt.Sprintf("%5.1fs  sent %d of %d, %s\n", p.now.Sub(start).Seconds(), p.sent(""), p.enqueued(""), count(p.returned(""), "throttled return")) +
		renderTable(rows)
}

// line renders the moment as one plain line, for output that is not a
// terminal.
func (p progress) line(start time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%5.1fs  sent %d/%d (", p.now.Sub(start).Seconds(), p.sent(""), p.enqueued(""))
	for i, t := range p.tenants {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d/%d", t, p.sent(t), p.enqueued(t))
		var rates []string
		for _, r := range p.rules {
			if r.Scope == policies.ScopeTenant {
				rates = append(rates, p.rate(r, t))
			}
		}
		if len(rates) > 0 {
			fmt.Fprintf(&b, " at %s", strings.Join(rates, ", "))
		}
	}
	s := p.state("")
	fmt.Fprintf(&b, "); queued %s, in worker %s, retry set %s; %s",
		s[0], s[1], s[2], count(p.returned(""), "throttled return"))
	for _, r := range p.rules {
		if r.Scope == policies.ScopeGlobal {
			fmt.Fprintf(&b, "; %s at %s", r.Name, p.rate(r, ""))
		}
	}
	return b.String()
}
