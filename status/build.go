package status

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle"
)

// build turns the reads into the page's data.
func (s *statusPage) build(p *policies.Policies, tenants []SeenTenant, reads []pageRead, got map[pageRead]readResult, took time.Duration) statusData {
	now := time.Now()
	a := s.cfg.Activity
	d := statusData{
		Name: s.cfg.Name, Source: p.Source(), Now: now.Format("2006-01-02 15:04:05 MST"),
		Took: fmtDuration(took), Timeout: fmtDuration(s.cfg.Timeout), Reads: len(reads),
		MaxTenants: a.max, Forget: fmtDuration(a.forget), DenialSpan: fmtDuration(DenialSpan),
		Listed: s.cfg.RetryTasks,
	}
	if s.cfg.Refresh > 0 {
		d.Refresh = max(1, int(s.cfg.Refresh.Round(time.Second)/time.Second))
	}
	if s.cfg.Refused != nil {
		if err := s.cfg.Refused(); err != nil {
			d.Refused = err.Error()
		}
	}
	// The throttled backlog, first: the windows' rows show their share.
	waits := backlog{}
	for _, q := range s.cfg.Queues {
		d.Queues = append(d.Queues, d.queue(q, got[pageRead{queue: q}], waits, now))
	}
	seenGlobal := map[string]bool{}
	for _, t := range tenants {
		d.Tenants = append(d.Tenants, d.tenant(t, got, rowMaker{a, waits, now}, seenGlobal))
	}
	slices.SortStableFunc(d.Globals, func(x, y windowView) int { return strings.Compare(x.TaskType, y.TaskType) })
	if len(s.cfg.Lines) > 0 {
		d.Fair, d.ShareSpan, d.MaxFlows, d.Shards = true, fmtDuration(throttle.ShareSpan), statusFlows, len(s.cfg.Lines)
		d.fairLines(got)
	}
	d.Providers = providerViews(a.Providers(), now)
	return d
}

// fairLines sets what the page shows of the fair lines: every shard's
// flows in one list (a tenant of a type waits in one shard), or the error
// of a shard not read.
func (d *statusData) fairLines(got map[pageRead]readResult) {
	var flows []throttle.WaitingFlow
	for i := range d.Shards {
		r := got[pageRead{lines: true, shard: i}]
		if r.err != nil {
			err := r.err
			if d.Shards > 1 {
				err = fmt.Errorf("shard %d of %d: %w", i+1, d.Shards, err)
			}
			if msg := d.failed(err); d.FairErr == "" {
				d.FairErr = msg
			}
			continue
		}
		flows = append(flows, r.flows...)
		d.FlowsCut = d.FlowsCut || len(r.flows) >= statusFlows
	}
	if d.FairErr == "" {
		d.Lines = linesViews(flows)
	}
}

// failed counts a read that failed and returns what the page says of it;
// the first one is also the page's RedisErr.
func (d *statusData) failed(err error) string {
	msg := err.Error()
	if errors.Is(err, errNotRead) || errors.Is(err, context.DeadlineExceeded) {
		msg = "Redis did not answer within " + d.Timeout
	}
	d.Failed++
	if d.RedisErr == "" {
		d.RedisErr = msg
	}
	return msg
}

// queue returns the view of queue q's retry set, read as r, and adds its
// throttled tasks to waits.
func (d *statusData) queue(q string, r readResult, waits backlog, now time.Time) queueView {
	qv := queueView{Queue: q}
	if r.err != nil {
		qv.Err = d.failed(r.err)
		return qv
	}
	qv.Throttled, qv.Failed, qv.Unread = r.retry.Throttled, r.retry.Failed, r.retry.Unread
	if qv.Throttled > len(r.retry.Tasks) || qv.Unread > 0 {
		d.Partial = true
	}
	by := map[string]int{}
	for _, t := range r.retry.Tasks {
		by[t.By]++
		waits.add(backlogKey{t.Type, t.Tenant, t.Rule}, t.NextProcessAt)
		waits.add(backlogKey{t.Type, "", t.Rule}, t.NextProcessAt)
		waits.add(backlogKey{"", t.Tenant, ""}, t.NextProcessAt)
	}
	for k, n := range by {
		qv.ByRule = append(qv.ByRule, byCount{By: k, Count: n})
	}
	slices.SortFunc(qv.ByRule, func(x, y byCount) int { return cmp.Or(y.Count-x.Count, strings.Compare(x.By, y.By)) })
	if len(r.retry.Tasks) > 0 {
		qv.NextBack = backIn(r.retry.Tasks[0].NextProcessAt, now)
	}
	return qv
}

// tenant returns the view of tenant t from its reads in got. The windows
// of global rules go to d.Globals instead, each once: seenGlobal holds the
// keys of those already there.
func (d *statusData) tenant(t SeenTenant, got map[pageRead]readResult, rows rowMaker, seenGlobal map[string]bool) tenantView {
	tv := tenantView{Tenant: t.Tenant, LastSeen: ago(t.LastSeen, rows.now)}
	tv.Waiting, tv.NextBack = rows.waits.get(backlogKey{"", t.Tenant, ""}, rows.now)
	read := false
	for _, tt := range t.TaskTypes {
		r, ok := got[pageRead{tenant: t.Tenant, taskType: tt}]
		if !ok {
			continue // no rules any more: the policies were reloaded
		}
		if r.err != nil {
			tv.Errs = append(tv.Errs, tt+": "+d.failed(r.err))
			continue
		}
		read = true
		for _, u := range r.usage {
			if u.Scope != policies.ScopeGlobal {
				tv.Rows = append(tv.Rows, rows.row(u, t.Tenant))
			} else if !seenGlobal[u.Key] {
				seenGlobal[u.Key] = true
				d.Globals = append(d.Globals, rows.row(u, ""))
			}
		}
	}
	tv.Global = read && len(tv.Rows) == 0 && len(tv.Errs) == 0
	return tv
}

// rowMaker makes the rows of windows: the denials come from a, the
// backlog from waits.
type rowMaker struct {
	a     *Activity
	waits backlog
	now   time.Time
}

// row returns the view of window u, for tenant ("" for a global rule).
func (m rowMaker) row(u policies.RuleUsage, tenant string) windowView {
	v := windowView{
		TaskType: u.TaskType, Rule: u.Rule, Scope: u.Scope, Tenant: u.Tenant, Shadow: u.Shadow,
		Limit: u.Limit, Window: fmtDuration(u.Window), Used: u.Used, InLine: u.InLine,
		NextFree: "now", Denials: fmtRate(m.a.DenialRate(u.TaskType, u.Rule, tenant)),
		Cap: u.Algorithm == throttle.Concurrency,
	}
	if u.InForce > 0 {
		v.Limit, v.Ceiling = u.InForce, u.Limit
		u.Limit = u.InForce // the use below is of the limit in force
	}
	if u.NextFree > 0 {
		v.NextFree = "in " + fmtDuration(u.NextFree)
	}
	if u.Limit > 0 {
		v.UsedPct = min(100, u.Used*100/u.Limit)
		v.InLinePct = min(100-v.UsedPct, u.InLine*100/u.Limit)
	}
	switch {
	case u.Remaining == 0:
		v.Level = "full"
	case 4*(u.Used+u.InLine) >= 3*u.Limit:
		v.Level = "busy"
	default:
		v.Level = "ok"
	}
	v.Waiting, v.NextBack = m.waits.get(backlogKey{u.TaskType, tenant, u.Rule}, m.now)
	return v
}

// providerViews returns the views of what the Activity saw of each
// provider.
func providerViews(seen []ProviderActivity, now time.Time) []providerView {
	var out []providerView
	for _, pa := range seen {
		pv := providerView{Provider: pa.Provider, Answers: pa.Answers, TooMany: pa.TooMany,
			AnswersTotal: pa.AnswersTotal, TooTotal: pa.TooManyTotal, LastTooMany: "never"}
		if !pa.LastTooMany.IsZero() {
			pv.LastTooMany = ago(pa.LastTooMany, now)
		}
		out = append(out, pv)
	}
	return out
}
