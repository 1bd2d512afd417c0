package worker

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/policies"
)

// DenialSpan is the span of Activity.DenialRate: the denials a second on
// the status page are those of the last 10 s, divided by 10.
const DenialSpan = 10 * time.Second

// ProviderSpan is the span of ProviderActivity's recent counts: the
// provider's answers, and its 429s, in the last minute.
const ProviderSpan = time.Minute

// Defaults of ActivityConfig.
const (
	defaultActivityTenants = 50
	defaultActivityForget  = 5 * time.Minute
)

// ActivityConfig configures NewActivity. Zero fields take the defaults
// given; a nil *ActivityConfig takes them all.
type ActivityConfig struct {
	// Tenants is the most tenants an Activity keeps; when one more is seen,
	// the tenant seen least recently is dropped. Default 50.
	Tenants int

	// Forget is how long a tenant is kept after the last limiter call for
	// one of its tasks; default 5 min.
	Forget time.Duration

	// Now is the clock; default time.Now. Tests set it.
	Now func() time.Time
}

// Activity is what one worker has seen lately: the tenants whose tasks it
// asked the limiter about, the denials of each rule, and its providers'
// answers. It is the worker's own view, not the fleet's: the status page
// (StatusPage) takes its list of tenants and its denials a second from it,
// and the use of each window from Redis.
//
// A Server feeds it when given one (Config.Activity). In your own asynq
// server, call ObserveDecision from ThrottleConfig.OnDecision and
// ObserveProvider after each send.
//
// Its memory is bounded: at most ActivityConfig.Tenants tenants, each
// dropped ActivityConfig.Forget after it was last seen, with a counter of
// the last DenialSpan for each of their rules. Safe for concurrent use.
type Activity struct {
	max    int
	forget time.Duration
	now    func() time.Time

	mu        sync.Mutex
	tenants   map[string]*tenantSeen
	rules     map[ruleRef]counts // denials of each rule, every tenant together
	providers map[string]*providerSeen
}

// ruleRef names a rule: its task type and its name.
type ruleRef struct{ taskType, rule string }

// tenantSeen is what an Activity keeps of one tenant.
type tenantSeen struct {
	last    time.Time
	types   map[string]bool    // the task types of its tasks seen
	denials map[ruleRef]counts // its denials, by the rule that set the wait
}

// providerSeen is what an Activity keeps of one provider.
type providerSeen struct {
	answers, tooMany           counts // over ProviderSpan
	answersTotal, tooManyTotal int
	lastTooMany                time.Time
}

// NewActivity returns an empty Activity; a nil cfg takes every default.
func NewActivity(cfg *ActivityConfig) *Activity {
	if cfg == nil {
		cfg = &ActivityConfig{}
	}
	a := &Activity{
		max:       cfg.Tenants,
		forget:    cfg.Forget,
		now:       cfg.Now,
		tenants:   map[string]*tenantSeen{},
		rules:     map[ruleRef]counts{},
		providers: map[string]*providerSeen{},
	}
	if a.max <= 0 {
		a.max = defaultActivityTenants
	}
	if a.forget <= 0 {
		a.forget = defaultActivityForget
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a
}

// ObserveDecision records one limiter call of the Throttle middleware: its
// tenant was seen, and when the call denied, the rule that set the wait
// counts a denial. A task back before its place in line (Early) and a call
// that failed are not denials. It is what Server gives
// ThrottleConfig.OnDecision.
func (a *Activity) ObserveDecision(e DecisionEvent) {
	if e.Tenant == "" {
		return
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	ts := a.tenants[e.Tenant]
	if ts == nil {
		a.drop(now)
		if len(a.tenants) >= a.max {
			oldest := ""
			for name, t := range a.tenants {
				if oldest == "" || t.last.Before(a.tenants[oldest].last) {
					oldest = name
				}
			}
			delete(a.tenants, oldest)
		}
		ts = &tenantSeen{types: map[string]bool{}, denials: map[ruleRef]counts{}}
		a.tenants[e.Tenant] = ts
	}
	ts.last = now
	ts.types[e.TaskType] = true
	rule, ok := deniedRule(e)
	if !ok {
		return
	}
	ref := ruleRef{e.TaskType, rule}
	for _, m := range []map[ruleRef]counts{ts.denials, a.rules} {
		c := m[ref]
		if c == nil {
			c = newCounts(DenialSpan)
			m[ref] = c
		}
		c.add(now)
	}
}

// deniedRule returns the rule that denied e, as Metrics counts it: the one
// that set the wait. It returns false when e is no denial: allowed, early,
// or failed.
func deniedRule(e DecisionEvent) (string, bool) {
	d := e.Decision
	if e.Err != nil || d.Allowed || d.Early || len(e.Rules) == 0 {
		return "", false
	}
	if d.Denied >= 0 && d.Denied < len(e.Rules) {
		return e.Rules[d.Denied], true
	}
	return e.Rules[0], true
}

// ObserveProvider records the answer of provider ("sms", "email") to one
// message: err is what its Send returned (see ResponseClass).
func (a *Activity) ObserveProvider(provider string, err error) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.providers[provider]
	if p == nil {
		p = &providerSeen{answers: newCounts(ProviderSpan), tooMany: newCounts(ProviderSpan)}
		a.providers[provider] = p
	}
	p.answers.add(now)
	p.answersTotal++
	if ResponseClass(err) == "429" {
		p.tooMany.add(now)
		p.tooManyTotal++
		p.lastTooMany = now
	}
}

// drop forgets the tenants not seen within forget, and the rules with no
// denial within DenialSpan. a.mu is held.
func (a *Activity) drop(now time.Time) {
	for name, t := range a.tenants {
		if now.Sub(t.last) > a.forget {
			delete(a.tenants, name)
		}
	}
	for ref, c := range a.rules {
		if c.sum(now) == 0 {
			delete(a.rules, ref)
		}
	}
}

// SeenTenant is one tenant that an Activity holds.
type SeenTenant struct {
	// Tenant is the tenant's id.
	Tenant string

	// LastSeen is when the worker last asked the limiter about one of its
	// tasks.
	LastSeen time.Time

	// TaskTypes are the task types of its tasks seen, in name order.
	TaskTypes []string
}

// Tenants returns the tenants seen within ActivityConfig.Forget, at most
// ActivityConfig.Tenants of them, in name order.
func (a *Activity) Tenants() []SeenTenant {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.drop(now)
	out := make([]SeenTenant, 0, len(a.tenants))
	for name, t := range a.tenants {
		types := make([]string, 0, len(t.types))
		for tt := range t.types {
			types = append(types, tt)
		}
		slices.Sort(types)
		out = append(out, SeenTenant{Tenant: name, LastSeen: t.last, TaskTypes: types})
	}
	slices.SortFunc(out, func(x, y SeenTenant) int { return strings.Compare(x.Tenant, y.Tenant) })
	return out
}

// DenialRate returns the denials a second that the rule named rule of
// taskType gave tenant's tasks over the last DenialSpan, in this worker;
// tenant "" means every tenant's. With 4 denials in the last 10 s it is
// 0.4.
func (a *Activity) DenialRate(taskType, rule, tenant string) float64 {
	now := a.now()
	ref := ruleRef{taskType, rule}
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.rules[ref]
	if tenant != "" {
		c = nil
		if t := a.tenants[tenant]; t != nil {
			c = t.denials[ref]
		}
	}
	if c == nil {
		return 0
	}
	return float64(c.sum(now)) / DenialSpan.Seconds()
}

// ProviderActivity is what an Activity saw of one provider's answers.
type ProviderActivity struct {
	// Provider is "sms" or "email".
	Provider string

	// Answers and TooMany are the provider's answers, and those of them
	// that were 429 (or an SMTP server's equivalent, see ResponseClass),
	// in the last ProviderSpan.
	Answers, TooMany int

	// AnswersTotal and TooManyTotal count them since the Activity began.
	AnswersTotal, TooManyTotal int

	// LastTooMany is when the last 429 came; zero for never.
	LastTooMany time.Time
}

// Providers returns what the Activity saw of each provider that answered,
// in name order.
func (a *Activity) Providers() []ProviderActivity {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]ProviderActivity, 0, len(a.providers))
	for name, p := range a.providers {
		out = append(out, ProviderActivity{
			Provider: name, Answers: p.answers.sum(now), TooMany: p.tooMany.sum(now),
			AnswersTotal: p.answersTotal, TooManyTotal: p.tooManyTotal, LastTooMany: p.lastTooMany,
		})
	}
	slices.SortFunc(out, func(x, y ProviderActivity) int { return strings.Compare(x.Provider, y.Provider) })
	return out
}

// counts counts events in one-second buckets, over as many seconds as it
// has buckets.
type counts []bucket

type bucket struct {
	sec int64 // the Unix second the bucket counts; a bucket of another second is stale
	n   int
}

func newCounts(span time.Duration) counts { return make(counts, int(span/time.Second)) }

func (c counts) add(now time.Time) {
	s := now.Unix()
	b := &c[int(s%int64(len(c)))]
	if b.sec != s {
		*b = bucket{sec: s}
	}
	b.n++
}

// sum returns the events of the last len(c) seconds, the current one
// included.
func (c counts) sum(now time.Time) int {
	s := now.Unix()
	n := 0
	for _, b := range c {
		if b.sec <= s && b.sec > s-int64(len(c)) {
			n += b.n
		}
	}
	return n
}

// Defaults of StatusConfig.
const (
	defaultStatusTimeout    = time.Second
	defaultStatusRefresh    = 2 * time.Second
	defaultStatusRetryTasks = 10000
)

// statusReads is how many Redis reads the status page makes at once, all
// requests together: a page asks for one read per tenant and task type
// and one per queue.
const statusReads = 4

// StatusConfig configures StatusPage. Zero fields take the defaults given.
type StatusConfig struct {
	// Policies are the rules the workers enforce; required. Pass the
	// worker's own (Config.Policies): the page reads each window with
	// policies.Usage, which prunes with the window it is given.
	Policies *policies.File

	// Activity is what the worker has seen; required. The page shows its
	// tenants, and its denials a second. Pass the one the Server feeds
	// (Config.Activity).
	Activity *Activity

	// Queues are the asynq queues whose retry sets the page reads for the
	// throttled backlog: the worker's (Config.Queues). Default {"default"}.
	Queues []string

	// Prefix starts the limiter's Redis keys: the worker's Config.Prefix.
	// Default throttle.DefaultPrefix.
	Prefix string

	// Timeout bounds the Redis reads of one page; default 1 s. Past it the
	// page shows what it has read and says what it has not: a page renders
	// within about Timeout whether Redis answers or not.
	Timeout time.Duration

	// Refresh is how often the browser reloads the page (a meta refresh);
	// default 2 s, negative for never.
	Refresh time.Duration

	// RetryTasks is the most tasks of each queue's retry set that a load
	// of the page reads (RetrySetHead), to count the backlog by rule and by
	// tenant: its time grows with them, not with the set. Beyond them the
	// page shows how many more wait, uncounted. Default 10,000.
	RetryTasks int

	// Name names the worker in the page's title; default the host name and
	// the process ID, "host (pid 4242)".
	Name string
}

// StatusPage returns the handler of a worker's status page, an HTML page
// that refreshes itself, for OpsConfig.Status. For each tenant that the
// Activity holds, and each rule of each task type seen for it, it shows
// how much of the tenant's window is used now against its limit (a bar),
// the places in line given, when the next slot frees, the denials a second
// in this worker, and the tasks waiting in the retry set; the global rules
// once, the same way; the throttled backlog in the retry set of each queue
// (by rule, and when the next task returns); the providers' 429s.
//
// The windows and the retry sets are read from rdb, the workers' Redis,
// every worker's use included; the tenants and denials are this worker's.
// The Redis reads of one page are bounded by StatusConfig.Timeout, and at
// most 4 run at once: when Redis is down or slow the page still renders,
// and says what it could not read.
//
// A nil rdb, or a StatusConfig without Policies or Activity, is an error.
// The handler is safe for concurrent use.
func StatusPage(rdb redis.UniversalClient, cfg StatusConfig) (http.Handler, error) {
	switch {
	case rdb == nil:
		return nil, errors.New("worker: StatusPage: nil Redis client")
	case cfg.Policies == nil:
		return nil, errors.New("worker: StatusPage: nil Policies")
	case cfg.Activity == nil:
		return nil, errors.New("worker: StatusPage: nil Activity")
	}
	if len(cfg.Queues) == 0 {
		cfg.Queues = []string{"default"}
	}
	cfg.Queues = slices.Compact(slices.Sorted(slices.Values(cfg.Queues)))
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultStatusTimeout
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = defaultStatusRefresh
	}
	if cfg.RetryTasks <= 0 {
		cfg.RetryTasks = defaultStatusRetryTasks
	}
	if cfg.Name == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "worker"
		}
		cfg.Name = fmt.Sprintf("%s (pid %d)", host, os.Getpid())
	}
	return &statusPage{
		rdb:   rdb,
		ins:   asynq.NewInspectorFromRedisClient(rdb),
		cfg:   cfg,
		reads: make(chan struct{}, statusReads),
	}, nil
}

// statusPage is the handler of StatusPage.
type statusPage struct {
	rdb   redis.UniversalClient
	ins   *asynq.Inspector
	cfg   StatusConfig
	reads chan struct{} // a semaphore: the Redis reads under way, every request's
}

//go:embed status.html
var statusHTML string

var statusTemplate = template.Must(template.New("status").Parse(statusHTML))

func (s *statusPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	data := s.collect(ctx)
	var buf bytes.Buffer
	if err := statusTemplate.Execute(&buf, data); err != nil {
		http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// pageRead is one Redis read of a page: the windows of a tenant's task
// type (policies.Usage), or a queue's retry set (RetrySet) when queue is
// set.
type pageRead struct {
	tenant, taskType string
	queue            string
}

// readResult is what a pageRead got.
type readResult struct {
	pageRead
	usage []policies.RuleUsage
	retry RetryQueue
	err   error
}

// errNotRead stands for a read that did not finish within the page's
// Timeout.
var errNotRead = errors.New("no answer in time")

// collect makes the reads of one page and gathers what the page shows.
// It returns when every read is done or ctx is: a read still under way
// then finishes in its goroutine (a Redis call started after the deadline
// is bounded by the client's timeouts, see SyncHook), and holds its place
// in s.reads until it does, so that a Redis that hangs never has more than
// statusReads reads waiting on it.
func (s *statusPage) collect(ctx context.Context) statusData {
	start := time.Now()
	p := s.cfg.Policies.Current()
	tenants := s.cfg.Activity.Tenants()
	var reads []pageRead
	for _, t := range tenants {
		for _, tt := range t.TaskTypes {
			if len(p.Rules(tt)) > 0 {
				reads = append(reads, pageRead{tenant: t.Tenant, taskType: tt})
			}
		}
	}
	for _, q := range s.cfg.Queues {
		reads = append(reads, pageRead{queue: q})
	}
	results := make(chan readResult, len(reads)) // never blocks a late read
	for _, rd := range reads {
		go func() { results <- s.run(ctx, p, rd) }()
	}
	got := make(map[pageRead]readResult, len(reads))
wait:
	for range reads {
		select {
		case r := <-results:
			got[r.pageRead] = r
		case <-ctx.Done():
			break wait
		}
	}
	// The reads that finished as the time ran out are shown all the same.
	for len(got) < len(reads) {
		select {
		case r := <-results:
			got[r.pageRead] = r
			continue
		default:
		}
		break
	}
	for _, rd := range reads {
		if _, ok := got[rd]; !ok {
			got[rd] = readResult{pageRead: rd, err: errNotRead}
		}
	}
	return s.build(p, tenants, reads, got, time.Since(start))
}

// run makes one read, once a place in s.reads is free.
func (s *statusPage) run(ctx context.Context, p *policies.Policies, rd pageRead) readResult {
	select {
	case s.reads <- struct{}{}:
	case <-ctx.Done():
		return readResult{pageRead: rd, err: errNotRead}
	}
	defer func() { <-s.reads }()
	if ctx.Err() != nil {
		return readResult{pageRead: rd, err: errNotRead}
	}
	if rd.queue != "" {
		rq, err := RetrySetHead(ctx, s.ins, rd.queue, s.cfg.RetryTasks, s.cfg.RetryTasks)
		if errors.Is(err, asynq.ErrQueueNotFound) {
			err = nil // a queue that never held a task holds none
		}
		return readResult{pageRead: rd, retry: rq, err: err}
	}
	u, err := policies.Usage(ctx, s.rdb, s.cfg.Prefix, p, rd.taskType, rd.tenant)
	return readResult{pageRead: rd, usage: u, err: err}
}

// statusData is what the template shows.
type statusData struct {
	Name, Source string
	Now          string
	Refresh      int // seconds; 0 for none
	Took         string
	Timeout      string
	RedisErr     string // the first read that failed, "" when none did
	Failed       int    // how many did
	Reads        int

	MaxTenants int
	Forget     string
	DenialSpan string

	Tenants   []tenantView
	Globals   []windowView
	Queues    []queueView
	Partial   bool // the counts cover only the first RetryTasks of a queue
	Listed    int  // StatusConfig.RetryTasks
	Providers []providerView
}

type tenantView struct {
	Tenant   string
	LastSeen string
	Waiting  int
	NextBack string
	Rows     []windowView
	Errs     []string // reads of its windows that failed
	Global   bool     // its windows read are all of global rules
}

type windowView struct {
	TaskType, Rule, Scope, Tenant string
	Limit                         int
	Window                        string
	Used, InLine                  int
	UsedPct, InLinePct            int
	Shadow                        bool   // mode: shadow: checked and counted, never holding a task back
	Level                         string // ok, busy (3/4 or more), full (no room)
	NextFree                      string
	Denials                       string
	Waiting                       int
	NextBack                      string
}

type queueView struct {
	Queue             string
	Throttled, Failed int
	Unread            int // tasks of the retry set not read (RetrySetHead)
	ByRule            []byCount
	NextBack          string
	Err               string
}

type byCount struct {
	By    string
	Count int
}

type providerView struct {
	Provider               string
	Answers, TooMany       int
	AnswersTotal, TooTotal int
	LastTooMany            string
}

// backlog counts the throttled tasks waiting in the retry sets, and the
// soonest back, by what they are grouped under.
type backlog map[backlogKey]*waiting

// backlogKey groups tasks: by task type, tenant ("" for all) and rule (""
// for any).
type backlogKey struct{ taskType, tenant, rule string }

type waiting struct {
	n    int
	next time.Time
}

func (b backlog) add(k backlogKey, at time.Time) {
	w := b[k]
	if w == nil {
		w = &waiting{next: at}
		b[k] = w
	}
	w.n++
	if at.Before(w.next) {
		w.next = at
	}
}

// get returns the count under k and when the soonest returns.
func (b backlog) get(k backlogKey, now time.Time) (int, string) {
	w := b[k]
	if w == nil {
		return 0, ""
	}
	return w.n, backIn(w.next, now)
}

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
	failed := func(err error) string {
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

	// The throttled backlog, first: the windows' rows show their share.
	waits := backlog{}
	for _, q := range s.cfg.Queues {
		r := got[pageRead{queue: q}]
		qv := queueView{Queue: q}
		if r.err != nil {
			qv.Err = failed(r.err)
			d.Queues = append(d.Queues, qv)
			continue
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
		d.Queues = append(d.Queues, qv)
	}

	row := func(u policies.RuleUsage, tenant string) windowView {
		v := windowView{
			TaskType: u.TaskType, Rule: u.Rule, Scope: u.Scope, Tenant: u.Tenant, Shadow: u.Shadow,
			Limit: u.Limit, Window: fmtDuration(u.Window), Used: u.Used, InLine: u.InLine,
			NextFree: "now", Denials: fmtRate(a.DenialRate(u.TaskType, u.Rule, tenant)),
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
		v.Waiting, v.NextBack = waits.get(backlogKey{u.TaskType, tenant, u.Rule}, now)
		return v
	}
	seenGlobal := map[string]bool{}
	for _, t := range tenants {
		tv := tenantView{Tenant: t.Tenant, LastSeen: fmtDuration(now.Sub(t.LastSeen).Truncate(time.Second)) + " ago"}
		tv.Waiting, tv.NextBack = waits.get(backlogKey{"", t.Tenant, ""}, now)
		read := false
		for _, tt := range t.TaskTypes {
			r, ok := got[pageRead{tenant: t.Tenant, taskType: tt}]
			if !ok {
				continue // no rules any more: the policies were reloaded
			}
			if r.err != nil {
				tv.Errs = append(tv.Errs, tt+": "+failed(r.err))
				continue
			}
			read = true
			for _, u := range r.usage {
				if u.Scope == policies.ScopeGlobal {
					if !seenGlobal[u.Key] {
						seenGlobal[u.Key] = true
						d.Globals = append(d.Globals, row(u, ""))
					}
					continue
				}
				tv.Rows = append(tv.Rows, row(u, t.Tenant))
			}
		}
		tv.Global = read && len(tv.Rows) == 0 && len(tv.Errs) == 0
		d.Tenants = append(d.Tenants, tv)
	}
	slices.SortStableFunc(d.Globals, func(x, y windowView) int { return strings.Compare(x.TaskType, y.TaskType) })

	for _, pa := range a.Providers() {
		pv := providerView{Provider: pa.Provider, Answers: pa.Answers, TooMany: pa.TooMany,
			AnswersTotal: pa.AnswersTotal, TooTotal: pa.TooManyTotal, LastTooMany: "never"}
		if !pa.LastTooMany.IsZero() {
			pv.LastTooMany = fmtDuration(now.Sub(pa.LastTooMany).Truncate(time.Second)) + " ago"
		}
		d.Providers = append(d.Providers, pv)
	}
	return d
}

// backIn says when a task due at returns: "in 3s", or "due" once its
// time has passed (asynq moves it at its next check).
func backIn(at, now time.Time) string {
	if !at.After(now) {
		return "due"
	}
	return "in " + fmtDuration(at.Sub(now))
}

// fmtDuration writes d shortly: "350ms", "2.4s", "1m30s", "59m58s".
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// fmtRate writes a rate a second: "0", "0.4/s", "12/s".
func fmtRate(r float64) string {
	switch {
	case r == 0:
		return "0"
	case r < 10:
		return strconv.FormatFloat(r, 'f', 1, 64) + "/s"
	}
	return strconv.FormatFloat(r, 'f', 0, 64) + "/s"
}
