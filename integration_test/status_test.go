package integration_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testneed"
)

// chromium returns the path of the browser of the status page test: the
// chromium on PATH (Debian's package chromium). Without it the test
// skips, or fails when CI is "true", as redistest does without a Redis.
func chromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		testneed.Missing(t, "no chromium for the browser test (apt-get install chromium): %v", err)
	}
	return path
}

// browser starts a headless Chromium of t's own, with a fresh profile, and
// returns the context of its tab; the browser stops when t ends. It loads
// only what the test gives it: the flags turn off what Chromium would
// fetch by itself (updates, sync, QUIC), and the status page has no
// external assets.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first action starts the browser, which lives as long as the
	// context of that action: ctx itself, not one with a timeout.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1180, 900)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// statusDOM is what the status page shows, read from the DOM that the
// browser rendered: the text of its cells.
type statusDOM struct {
	Rendered string `json:"rendered"`
	Refresh  string `json:"refresh"`
	Redis    string `json:"redis"`
	Tenants  []struct {
		Tenant  string      `json:"tenant"`
		Waiting string      `json:"waiting"`
		Rows    []windowDOM `json:"rows"`
	} `json:"tenants"`
	Globals []windowDOM `json:"globals"`
	Queues  []struct {
		Queue     string `json:"queue"`
		Throttled string `json:"throttled"`
		By        []struct {
			By    string `json:"by"`
			Count string `json:"count"`
		} `json:"by"`
	} `json:"queues"`
}

// windowDOM is one window's row.
type windowDOM struct {
	Type    string `json:"type"`
	Rule    string `json:"rule"`
	Scope   string `json:"scope"`
	Tenant  string `json:"tenant"`
	Used    string `json:"used"`
	Limit   string `json:"limit"`
	Waiting string `json:"waiting"`
	Denials string `json:"denials"`
	Next    string `json:"next"`
}

// readStatusJS collects statusDOM from the page.
const readStatusJS = `(() => {
  const text = (el, sel) => { const e = el.querySelector(sel); return e ? e.textContent.trim() : ""; };
  const row = r => ({type: r.dataset.type, rule: r.dataset.rule, scope: r.dataset.scope, tenant: r.dataset.tenant,
    used: text(r, ".used"), limit: text(r, ".limit"), waiting: text(r, ".waiting"), denials: text(r, ".denials"), next: text(r, ".next")});
  const refresh = document.querySelector('meta[http-equiv="refresh"]');
  return {
    rendered: text(document, "#rendered"),
    refresh: refresh ? refresh.content : "",
    redis: text(document, "#redis"),
    tenants: Array.from(document.querySelectorAll("#tenants tbody.tenant")).map(b => ({
      tenant: b.dataset.tenant, waiting: text(b, "tr.tenant-head .waiting"), rows: Array.from(b.querySelectorAll("tr.window")).map(row)})),
    globals: Array.from(document.querySelectorAll("#global tr.window")).map(row),
    queues: Array.from(document.querySelectorAll("#backlog tr.queue")).map(q => ({queue: q.dataset.queue, throttled: text(q, ".throttled"),
      by: Array.from(q.querySelectorAll("li[data-by]")).map(li => ({by: li.dataset.by, count: text(li, ".count")}))})),
  };
})()`

// loadStatus loads url in the browser and reads the page.
func loadStatus(ctx context.Context, url string) (statusDOM, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		return statusDOM{}, err
	}
	return chromedp.Run(ctx, chromedp.Evaluate[statusDOM](readStatusJS))
}

// number reads a cell that must hold a whole number.
func number(t *testing.T, what, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Errorf("%s: %q is not a number", what, s)
	}
	return n
}

// TestStatusPageInBrowser drains a throttled backlog of two tenants
// through two worker processes (2 a second for each tenant, 3 for all),
// loads the status page of one in headless Chromium while tasks wait in
// the retry set, and checks from the rendered DOM that each tenant's rows
// show its rule with used/limit figures within the limits, that the global
// rule is shown once, and that the backlog adds up: by tenant, by rule, and
// in all. It saves a screenshot of that page in t.TempDir(), and also at
// $SLUICE_STATUS_SCREENSHOT when set (docs/status.png is made so), then
// checks that the page refreshes itself and that the backlog drains
// within the limits.
func TestStatusPageInBrowser(t *testing.T) {
	ctx := browser(t)
	rawURL := redistest.URL(t)
	rdb := redistest.Client(t)
	queue := redistest.Queue(t, rdb)
	sink := newSMSSink(t)
	lim := limits{tenant: 2, global: 3}
	tenants := []string{"acme", "globex"}
	want := backlog(t, rdb, queue, 15, tenants...)
	procs := startWorkers(t, 2, "--redis", rawURL, "--policies", lim.policies(t), "--sms-webhook", sink.srv.URL,
		"--queues", queue+"=1", "--prefix", redistest.Prefix(t), "--concurrency", "4",
		"--metrics-addr", "127.0.0.1:0", "--log-level", "info")
	url := "http://" + opsAddr(t, procs[0]) + "/"

	page := waitStatusPage(t, ctx, url, len(tenants))
	saveScreenshot(t, ctx)
	t.Logf("the page: %+v", page)

	if page.Refresh != "2" {
		t.Errorf("meta refresh %q, want 2 (seconds)", page.Refresh)
	}
	if !regexp.MustCompile(`^Redis answered \d+ reads in `).MatchString(page.Redis) {
		t.Errorf("Redis line %q, want it to say Redis answered", page.Redis)
	}
	limit := map[string]int{"tenant": lim.tenant, "provider": lim.global}
	waitingByRule, tenantsWaiting := checkStatusTenants(t, page, tenants, limit)
	// The global rule: once, for all.
	if len(page.Globals) != 1 || page.Globals[0].Rule != "provider" {
		t.Errorf("global rows %+v, want one, of the provider rule", page.Globals)
	} else {
		checkWindowRow(t, "global/provider", page.Globals[0], "global", limit)
		waitingByRule["rule provider"] += number(t, "global/provider waiting", page.Globals[0].Waiting)
	}
	checkStatusBacklog(t, page, queue, waitingByRule, tenantsWaiting)

	// The page refreshes itself: a new rendering without a new navigation.
	waitFor(t, 10*time.Second, "the page to refresh itself", nil, func() bool {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		now, err := chromedp.Run(rctx, chromedp.Evaluate[string](`document.getElementById("rendered").textContent`))
		return err == nil && now != page.Rendered
	})

	waitDrained(t, rdb, queue, 60*time.Second)
	stopWorkers(t, procs...)
	rs := sink.receipts()
	checkDelivered(t, rs, want, nil)
	lim.check(t, rs)
}

// waitStatusPage returns the page at url once this worker has seen the
// tenants, as many as given, and each has tasks waiting in the retry set.
// A busy machine can be slow to render it: the wait is long, and on
// a failure the test says what the page last showed.
func waitStatusPage(t *testing.T, ctx context.Context, url string, tenants int) statusDOM {
	t.Helper()
	var page statusDOM
	seen := "nothing: no load succeeded"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the status page last seen: %s", seen)
		}
	})
	waitFor(t, 60*time.Second, "a status page with both tenants waiting in the retry set", nil, func() bool {
		var err error
		if page, err = loadStatus(ctx, url); err != nil {
			t.Logf("load %s: %v", url, err)
			return false
		}
		seen = fmt.Sprintf("%+v", page)
		if len(page.Tenants) != tenants {
			return false
		}
		for _, tp := range page.Tenants {
			if n, err := strconv.Atoi(tp.Waiting); err != nil || n == 0 {
				return false
			}
		}
		return true
	})
	return page
}

// saveScreenshot saves a screenshot of the browser's page in t.TempDir(),
// and at $SLUICE_STATUS_SCREENSHOT when set.
func saveScreenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	paths := []string{filepath.Join(t.TempDir(), "status.png")}
	if p := os.Getenv("SLUICE_STATUS_SCREENSHOT"); p != "" {
		paths = append(paths, p)
	}
	for _, p := range paths {
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot of the status page: %s", p)
	}
}

// statusDenialsRE matches a window row's denials: 0, or a rate a second.
var statusDenialsRE = regexp.MustCompile(`^(0|\d+(\.\d)?/s)$`)

// checkWindowRow checks the window row r, named who in failures: its rule
// of sms:send with scope wantScope, its limit, figures within it, and what
// it says of denials and the next slot.
func checkWindowRow(t *testing.T, who string, r windowDOM, wantScope string, limit map[string]int) {
	t.Helper()
	if r.Type != "sms:send" || r.Scope != wantScope {
		t.Errorf("%s: rule %s of %s, scope %s; want sms:send, %s", who, r.Rule, r.Type, r.Scope, wantScope)
	}
	if got, want := number(t, who+" limit", r.Limit), limit[r.Rule]; got != want {
		t.Errorf("%s: limit %d, want %d", who, got, want)
	}
	if used := number(t, who+" used", r.Used); used < 0 || used > limit[r.Rule] {
		t.Errorf("%s: %d used of %d", who, used, limit[r.Rule])
	}
	if !statusDenialsRE.MatchString(r.Denials) {
		t.Errorf("%s: denials %q, want a rate such as 0.4/s", who, r.Denials)
	}
	if r.Next != "now" && !regexp.MustCompile(`^in \S+$`).MatchString(r.Next) {
		t.Errorf("%s: next slot %q, want now or in ...", who, r.Next)
	}
}

// checkStatusTenants checks that each tenant of the page has its own
// window of the tenant rule, one row. It returns the tasks waiting by rule
// ("rule <name>", as the backlog says it), and by tenant in all.
func checkStatusTenants(t *testing.T, page statusDOM, tenants []string, limit map[string]int) (waitingByRule map[string]int, tenantsWaiting int) {
	t.Helper()
	waitingByRule = map[string]int{}
	for i, tp := range page.Tenants {
		if tp.Tenant != tenants[i] {
			t.Errorf("tenant %d is %q, want %q (name order)", i, tp.Tenant, tenants[i])
		}
		if len(tp.Rows) != 1 || tp.Rows[0].Rule != "tenant" || tp.Rows[0].Tenant != tp.Tenant {
			t.Errorf("tenant %s: rows %+v, want one, of its tenant rule", tp.Tenant, tp.Rows)
			continue
		}
		r := tp.Rows[0]
		checkWindowRow(t, tp.Tenant+"/"+r.Rule, r, "tenant", limit)
		w := number(t, tp.Tenant+" waiting", tp.Waiting)
		byRule := number(t, tp.Tenant+"/tenant waiting", r.Waiting)
		if byRule > w {
			t.Errorf("tenant %s: %d waiting by its tenant rule, more than its %d waiting in all", tp.Tenant, byRule, w)
		}
		waitingByRule["rule tenant"] += byRule
		tenantsWaiting += w
	}
	return waitingByRule, tenantsWaiting
}

// checkStatusBacklog checks the page's backlog: the queue's throttled
// tasks are the tenants', and each rule's count is what its rows show.
func checkStatusBacklog(t *testing.T, page statusDOM, queue string, waitingByRule map[string]int, tenantsWaiting int) {
	t.Helper()
	if len(page.Queues) != 1 || page.Queues[0].Queue != queue {
		t.Fatalf("backlog of queues %+v, want queue %s alone", page.Queues, queue)
	}
	q := page.Queues[0]
	throttled, sum := number(t, "throttled", q.Throttled), 0
	for _, b := range q.By {
		n := number(t, "throttled by "+b.By, b.Count)
		sum += n
		if w, ok := waitingByRule[b.By]; ok && w != n {
			t.Errorf("backlog: %d throttled by %s, the rows show %d", n, b.By, w)
		}
	}
	if throttled == 0 || sum != throttled || tenantsWaiting != throttled {
		t.Errorf("backlog: %d throttled, %d by rule, %d by tenant; want the same, more than 0", throttled, sum, tenantsWaiting)
	}
}
