package status_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/retryset"
	"github.com/sluicehq/sluice/status"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// TestPageArguments: a nil client, or a config without policies or
// activity, is an error, not a panic.
func TestPageArguments(t *testing.T) {
	t.Parallel()
	p, err := policies.Parse(t.Name(), []byte(perHourAndAccount))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	pf, activity := policies.Static(p), status.NewActivity(nil)
	cases := []struct {
		name    string
		rdb     redis.UniversalClient
		cfg     status.PageConfig
		wantErr string
	}{
		{"nil client", nil, status.PageConfig{Policies: pf, Activity: activity}, "nil Redis client"},
		{"no policies", rdb, status.PageConfig{Activity: activity}, "nil Policies"},
		{"no activity", rdb, status.PageConfig{Policies: pf}, "nil Activity"},
		{"both", rdb, status.PageConfig{Policies: pf, Activity: activity}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, err := status.Page(tc.rdb, tc.cfg)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Page: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Page = %v, %v; want an error saying %q", h, err, tc.wantErr)
			}
		})
	}
}

// pageRow is what the status page shows of one window.
type pageRow struct {
	Used, Limit, InLine, Waiting, Denials, Next string
}

var (
	windowRowRE = regexp.MustCompile(`(?s)<tr class="window" data-type="([^"]*)" data-rule="([^"]*)" data-scope="([^"]*)" data-tenant="([^"]*)">(.*?)</tr>`)
	cellREs     = map[string]*regexp.Regexp{
		"used":    regexp.MustCompile(`<span class="used">([^<]*)</span>`),
		"limit":   regexp.MustCompile(`<span class="limit">([^<]*)</span>`),
		"inline":  regexp.MustCompile(`<span class="inline">([^<]*)</span>`),
		"waiting": regexp.MustCompile(`<td class="num waiting">([^<]*)</td>`),
		"denials": regexp.MustCompile(`<td class="num denials">([^<]*)</td>`),
		"next":    regexp.MustCompile(`<td class="next">([^<]*)</td>`),
	}
)

// pageRows returns the window rows of a status page by "tenant/rule"
// ("global/rule" for a global rule).
func pageRows(body string) map[string]pageRow {
	cell := func(row, name string) string {
		if m := cellREs[name].FindStringSubmatch(row); m != nil {
			return m[1]
		}
		return ""
	}
	rows := map[string]pageRow{}
	for _, m := range windowRowRE.FindAllStringSubmatch(body, -1) {
		owner := m[4]
		if m[3] == policies.ScopeGlobal {
			owner = "global"
		}
		row := m[5]
		rows[owner+"/"+m[2]] = pageRow{
			Used: cell(row, "used"), Limit: cell(row, "limit"), InLine: cell(row, "inline"),
			Waiting: cell(row, "waiting"), Denials: cell(row, "denials"), Next: cell(row, "next"),
		}
	}
	return rows
}

const perHourAndAccount = `
tasks:
  sms:send:
    - {name: per-hour, scope: tenant, limit: 1, window: 1h}
    - {name: account, scope: global, limit: 100, window: 1h}
    - {name: trial, scope: global, limit: 1, window: 1h, mode: shadow}
`

// TestPage runs a worker whose tenants get one SMS an hour, enqueues
// 3 for acme and 2 for globex, and reads the page once the 3 denied wait
// in the retry set: each tenant's window full with its places in line,
// the global window once, the denials of this worker, the backlog by
// tenant and rule, and the provider's answers.
func TestPage(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() { rdb.Del(context.Background(), redistest.Keys(t, rdb, prefix)...) })
	q := redistest.Queue(t, rdb)
	p, err := policies.Parse(t.Name(), []byte(perHourAndAccount))
	if err != nil {
		t.Fatal(err)
	}
	pf, activity := policies.Static(p), status.NewActivity(nil)
	sent := make(smsRecorder, 10)
	ctx, stop := testwait.RunServer(t, newPageWorker(t, rdb, q, prefix, pf, activity, sent))
	defer stop()
	ins := enqueueAndWaitDenied(t, ctx, rdb, q, sent)
	activity.ObserveProvider(worker.ProviderEvent{Provider: "sms", Err: &provider.StatusError{Code: 429, Status: "429 Too Many Requests"}})

	h, err := status.Page(rdb, status.PageConfig{Policies: pf, Activity: activity, Queues: []string{q}, Prefix: prefix, Name: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("GET / = %d:\n%s", rec.Code, body)
	}
	for name, want := range map[string]string{"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"} {
		if got := rec.Header().Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}

	checkWindowRows(t, body)
	for _, s := range []string{
		`<meta http-equiv="refresh" content="2">`,
		`Sluice worker <span class="name">w1</span>`,
		`<p class="okline" id="redis">`,
		`<span class="tname">acme</span> <span class="sub">last seen`,
		`<span class="waiting">2</span> throttled in the retry set, next back in`,
		`<td class="num"><span class="throttled">3</span></td><td><ul class="by"><li data-by="rule per-hour"><span class="count">3</span> rule per-hour</li></ul>`,
		`<tr class="provider" data-provider="sms"><td>sms</td><td class="num">3</td><td class="num recent429">1</td><td class="num total429">1</td>`,
		`this worker's`,
		`<td class="rule">trial <span class="shadow"`,
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the page has no %s", s)
		}
	}
	if t.Failed() {
		t.Logf("page:\n%s", body)
	}

	checkRetrySetHead(t, ctx, ins, q)
	checkPageRetryTasks(t, rdb, pf, activity, q, prefix)
}

// newPageWorker returns a worker for TestPage on queue q whose tenants get
// one SMS an hour, sent to sent, and whose denied tasks wait in the retry
// set, holding places in line.
func newPageWorker(t *testing.T, rdb *redis.Client, q, prefix string, pf *policies.File, activity *status.Activity, sent smsRecorder) *worker.Server {
	t.Helper()
	srv, err := worker.NewServer(rdb, worker.Config{
		ThrottleConfig: worker.ThrottleConfig{
			MaxHold:                  -1, // the denied go to the retry set
			DelayedTaskCheckInterval: serverCheckInterval,
			// First come, first served: the denied hold places in line,
			// which the page shows.
			Fairness: worker.FairnessOff,
		},
		Policies:        pf,
		SMS:             sent,
		Email:           provider.LogProvider{},
		Queues:          map[string]int{q: 1},
		Prefix:          prefix,
		ShutdownTimeout: 5 * time.Second,
		Observers:       []worker.Observer{activity},
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// enqueueAndWaitDenied enqueues 3 SMS for acme and 2 for globex on q, and
// waits for the 2 sent and the 3 denied in the retry set; it returns an
// inspector of q's Redis.
func enqueueAndWaitDenied(t *testing.T, ctx context.Context, rdb *redis.Client, q string, sent smsRecorder) *asynq.Inspector {
	t.Helper()
	pc := producer.NewClientFromRedisClient(rdb)
	for tenant, n := range map[string]int{"acme": 3, "globex": 2} {
		for range n {
			if _, err := pc.EnqueueSMS(ctx, tenant, goodSMS, asynq.Queue(q)); err != nil {
				t.Fatal(err)
			}
		}
	}
	testwait.Receive(t, sent, "the first SMS")
	testwait.Receive(t, sent, "the second SMS")
	ins := asynq.NewInspectorFromRedisClient(rdb)
	testwait.Eventually(t, func() (bool, string) {
		qi, err := ins.GetQueueInfo(q)
		if err != nil {
			return false, err.Error()
		}
		return qi.Retry == 3 && qi.Active == 0, fmt.Sprintf("%d in the retry set, %d active, not 3 and 0", qi.Retry, qi.Active)
	})
	return ins
}

// checkWindowRows checks the window rows of TestPage's page body.
func checkWindowRows(t *testing.T, body string) {
	t.Helper()
	rows := pageRows(body)
	// Each tenant used its one SMS of the hour; the denied hold places in
	// line, 1 and 2 hours on, in every rule's window: the global one counts
	// both tenants.
	want := map[string]pageRow{
		"acme/per-hour":   {Used: "1", Limit: "1", InLine: "2", Waiting: "2", Denials: "0.2/s"},
		"globex/per-hour": {Used: "1", Limit: "1", InLine: "1", Waiting: "1", Denials: "0.1/s"},
		"global/account":  {Used: "2", Limit: "100", InLine: "3", Waiting: "0", Denials: "0"},
		"global/trial":    {Used: "1", Limit: "1", Waiting: "0", Denials: "0"},
	}
	for key, row := range rows {
		if !strings.HasPrefix(row.Next, "in ") && row.Next != "now" {
			t.Errorf("%s: next slot %q, want \"now\" or \"in ...\"", key, row.Next)
		}
		row.Next = ""
		rows[key] = row
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("window rows (-want +got):\n%s\npage:\n%s", diff, body)
	}
}

// checkRetrySetHead checks that RetrySetHead reads as many of the 3 tasks
// in q's retry set as asked, counts them, and reports the rest unread, and
// that RetrySet reads all.
func checkRetrySetHead(t *testing.T, ctx context.Context, ins *asynq.Inspector, q string) {
	t.Helper()
	for _, tc := range []struct{ scan, wantRead, wantUnread int }{
		{1, 1, 2},
		{2, 2, 1},
		{3, 3, 0},
		{500, 3, 0},
	} {
		rq, err := retryset.Head(ctx, ins, q, 10, tc.scan)
		if err != nil {
			t.Fatal(err)
		}
		if got := rq.Throttled + rq.Failed; got != tc.wantRead || rq.Unread != tc.wantUnread {
			t.Errorf("RetrySetHead(scan %d): %d read, %d unread; want %d and %d", tc.scan, got, rq.Unread, tc.wantRead, tc.wantUnread)
		}
	}
	if rq, err := retryset.Read(ctx, ins, q, 10); err != nil || rq.Throttled != 3 || rq.Unread != 0 {
		t.Errorf("RetrySet: %d throttled, %d unread, err %v; want 3, 0, nil", rq.Throttled, rq.Unread, err)
	}
}

// checkPageRetryTasks checks that a page that reads 2 tasks of each retry
// set counts those and says how many more wait.
func checkPageRetryTasks(t *testing.T, rdb *redis.Client, pf *policies.File, activity *status.Activity, q, prefix string) {
	t.Helper()
	h, err := status.Page(rdb, status.PageConfig{Policies: pf, Activity: activity, Queues: []string{q}, Prefix: prefix, RetryTasks: 2})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	body := rec.Body.String()
	for _, s := range []string{
		`<td class="num"><span class="throttled">2</span><br><span class="sub unread">+1 not read</span></td>`,
		`The counts cover the first 2 tasks of a queue's retry set`,
	} {
		if !strings.Contains(body, s) {
			t.Errorf("with RetryTasks 2, the page has no %s\n%s", s, body)
		}
	}
}

// TestPageWithoutRedis: with Redis refusing connections, or
// accepting them and never answering, the page renders within its Timeout
// (the client's own timeouts are far longer), shows this worker's tenants
// and says what it could not read.
func TestPageWithoutRedis(t *testing.T) {
	t.Parallel()
	p, err := policies.Parse(t.Name(), []byte(perHourAndAccount))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		listen   func(t *testing.T) string // returns the address of a Redis that does not answer
		wantText string
	}{
		{"refused", func(t *testing.T) string {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			return addr
		}, "connection refused"},
		{"silent", func(t *testing.T) string {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var conns sync.WaitGroup
			t.Cleanup(func() { l.Close(); conns.Wait() })
			conns.Go(func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					conns.Go(func() { _, _ = io.Copy(io.Discard, c); c.Close() }) // reads, never answers
				}
			})
			return l.Addr().String()
		}, "Redis did not answer within 300ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := tc.listen(t)
			// Timeouts far longer than the page's, and one dial a call: by
			// default go-redis dials 5 times, 100 ms apart, and the refusal
			// would come after the page's timeout.
			rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second,
				MaxRetries: -1, DialerRetries: 1})
			t.Cleanup(func() { _ = rdb.Close() })
			a := status.NewActivity(nil)
			a.ObserveDecision(decision("acme", 0))
			const timeout = 300 * time.Millisecond
			h, err := status.Page(rdb, status.PageConfig{Policies: policies.Static(p), Activity: a, Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 { // more pages than reads at once: none waits for the last
				start := time.Now()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
				took := time.Since(start)
				body := rec.Body.String()
				if took > timeout+time.Second {
					t.Errorf("page %d took %v, more than its timeout %v", i, took, timeout)
				}
				if rec.Code != http.StatusOK {
					t.Fatalf("page %d: GET / = %d:\n%s", i, rec.Code, body)
				}
				for _, s := range []string{`<p class="alert" id="redis">Redis: `, tc.wantText, `<span class="tname">acme</span>`, `Not read: `} {
					if !strings.Contains(body, s) {
						t.Errorf("page %d has no %s:\n%s", i, s, body)
					}
				}
			}
		})
	}
}

// TestPageFairLines: with the fair lines, the page shows each waiting
// tenant's tasks in line by priority, with its weight, read from Redis.
func TestPageFairLines(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() { rdb.Del(context.Background(), redistest.Keys(t, rdb, prefix)...) })
	ls := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)).Lines(throttle.LinesConfig{})
	account := throttle.LineCheck{Check: throttle.Check{Key: "account", Policy: throttle.Policy{Limit: 1, Window: time.Hour}, Cost: 1}, Shared: true}
	arrivals := []struct {
		tenant   string
		priority int
		weight   float64
		n        int
	}{{"acme", 3, 1, 4}, {"globex", 1, 2, 2}}
	for _, a := range arrivals {
		for i := range a.n {
			if _, err := ls.Arrive(context.Background(), throttle.Arrival{Class: producer.TypeSMS, Priority: a.priority, Tenant: a.tenant,
				Weight: a.weight, Queue: "default", ID: fmt.Sprintf("%s-%d", a.tenant, i), Checks: []throttle.LineCheck{account}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	p, err := policies.Parse(t.Name(), []byte(perHourAndAccount))
	if err != nil {
		t.Fatal(err)
	}
	h, err := status.Page(rdb, status.PageConfig{Policies: policies.Static(p), Activity: status.NewActivity(nil), Prefix: prefix, Lines: []*throttle.Lines{ls}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	body := rec.Body.String()
	// acme's first task was admitted at once: 3 of its 4 wait.
	for _, want := range []string{
		`<tr class="flow" data-tenant="globex" data-priority="1"><td></td><td>globex</td><td class="num">1</td><td class="num">2</td><td class="num inline">2</td>`,
		`<tr class="flow" data-tenant="acme" data-priority="3"><td></td><td>acme</td><td class="num">3</td><td class="num">1</td><td class="num inline">3</td>`,
		`<span class="priority" data-priority="1">1: <span class="count">2</span></span> <span class="priority" data-priority="3">3: <span class="count">3</span></span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s:\n%s", want, section(body, "lines"))
		}
	}
}

// TestPageFairLinesShards: given the lines of two shards, the page shows
// the waiting tenants of both, in one table by task type.
func TestPageFairLinesShards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() { rdb.Del(context.Background(), redistest.Keys(t, rdb, prefix)...) })
	base := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	policy := throttle.Policy{Limit: 1, Window: time.Hour}
	var lines []*throttle.Lines
	for i, g := range (layout.Layout{Shards: 2}).Groups(producer.TypeSMS) {
		ls := base.InGroup(g).Lines(throttle.LinesConfig{})
		lines = append(lines, ls)
		tenant := []string{"acme", "globex"}[i]
		// The shard's own log of the rule: its first task goes, two wait.
		account := throttle.LineCheck{Check: throttle.Check{Key: "account", Policy: policy, Cost: 1}, Shared: true}
		for j := range 3 {
			if _, err := ls.Arrive(ctx, throttle.Arrival{Class: producer.TypeSMS, Priority: 2, Tenant: tenant, Weight: 1,
				Queue: g, ID: fmt.Sprintf("%s-%d", tenant, j), Checks: []throttle.LineCheck{account}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	p, err := policies.Parse(t.Name(), []byte(perHourAndAccount))
	if err != nil {
		t.Fatal(err)
	}
	h, err := status.Page(rdb, status.PageConfig{Policies: policies.Static(p), Activity: status.NewActivity(nil), Prefix: prefix, Lines: lines})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	body := section(rec.Body.String(), "lines")
	for _, want := range []string{
		`<tr class="flow" data-tenant="acme" data-priority="2"><td></td><td>acme</td><td class="num">2</td><td class="num">1</td><td class="num inline">2</td>`,
		`<tr class="flow" data-tenant="globex" data-priority="2"><td></td><td>globex</td><td class="num">2</td><td class="num">1</td><td class="num inline">2</td>`,
		`<span class="priority" data-priority="2">2: <span class="count">4</span></span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s:\n%s", want, body)
		}
	}
}

// section returns the section of body whose id is id.
func section(body, id string) string {
	i := strings.Index(body, `<section id="`+id+`">`)
	if i < 0 {
		return "(no section " + id + ")"
	}
	j := strings.Index(body[i:], "</section>")
	if j < 0 {
		return body[i:]
	}
	return body[i : i+j]
}

// TestPageAdaptiveAndCap: an adaptive rule shows its limit in force and
// its ceiling; a concurrency rule, the slots held of its cap, at once.
func TestPageAdaptiveAndCap(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() { rdb.Del(context.Background(), redistest.Keys(t, rdb, prefix)...) })
	p, err := policies.Parse(t.Name(), []byte(`
tasks:
  sms:send:
    - {name: provider, scope: global, limit: 200, window: 1s, adaptive: true}
    - {name: relay, scope: global, concurrency: 4}
`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	rules := p.For(producer.TypeSMS, "acme")
	if _, err := l.Adapt(ctx, rules[0].Check, rules[0].Min, throttle.SlowDown); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if md, err := l.AllowInLine(ctx, id, []throttle.Check{rules[1].Check}); err != nil || !md.Allowed {
			t.Fatalf("take a slot: %+v, %v", md, err)
		}
	}
	activity := status.NewActivity(nil)
	activity.ObserveDecision(worker.DecisionEvent{TaskType: producer.TypeSMS, Tenant: "acme"})
	h, err := status.Page(rdb, status.PageConfig{Policies: policies.Static(p), Activity: activity, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	body := rec.Body.String()
	rows := pageRows(body)
	if r := rows["global/provider"]; r.Limit != "45" || !strings.Contains(body, `of 200</span> per 1s`) {
		t.Errorf("the adaptive rule shows limit %q (%+v), want 45 of 200 per 1s", r.Limit, r)
	}
	if r := rows["global/relay"]; r.Limit != "4" || r.Used != "2" || !strings.Contains(body, `<span class="limit">4</span> at once`) {
		t.Errorf("the concurrency rule shows %+v, want 2 used of 4 at once", r)
	}
}
