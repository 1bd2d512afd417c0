package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// dashboardEmpty are the dashboard's expressions that a throttled drain
// with Redis up cannot give data, and why.
var dashboardEmpty = map[string]string{
	`sum by (task_type) (rate(sluice_limiter_errors_total{job=~"$job"}[$__rate_interval]))`:       "no decision fails while Redis is up",
	`sum by (task_type) (rate(sluice_fail_open_admissions_total{job=~"$job"}[$__rate_interval]))`: "no task runs undecided while Redis is up",
}

// TestDashboardAgainstPrometheus: Debian's Prometheus scrapes a worker
// (--metrics-tenants) every second through a throttled drain of 60 SMS of
// three tenants, two priorities, at 6 a second; each expression of
// deploy/grafana/sluice.json, run at the drain's middle, returns data,
// but for those dashboardEmpty names.
func TestDashboardAgainstPrometheus(t *testing.T) {
	t.Parallel()
	bin := needPrometheus(t)
	rawURL, rdb := redistest.URL(t), redistest.Client(t)
	enqueueBin := buildCLIs(t)
	queue, prefix := redistest.Queue(t, rdb), redistest.Prefix(t)
	sink := newSMSSink(t)
	policies := writePolicies(t, `
tasks:
  sms:send:
    - { name: tenant, scope: tenant, limit: 5, window: 1s }
    - { name: provider, scope: global, limit: 6, window: 1s }
`)
	procs := startWorkers(t, 1, "--redis", rawURL, "--policies", policies, "--sms-webhook", sink.srv.URL,
		"--queues", queue+"=1", "--prefix", prefix, "--concurrency", "10", "--max-hold", "500ms",
		"--metrics-addr", "127.0.0.1:0", "--metrics-tenants", "--log-level", "info")
	api := startPrometheus(t, bin, opsAddr(t, procs[0]))
	// Enqueued once Prometheus scrapes: the drain's counters have samples
	// from its start.
	for _, tenant := range []string{"acme", "globex", "initech"} {
		enqueueSMS(t, enqueueBin, rawURL, queue, tenant, tenant, 15, "--prefix", prefix)
		enqueueSMS(t, enqueueBin, rawURL, queue, tenant, tenant+"-urgent", 5, "--prefix", prefix, "--priority", "1")
	}

	waitFor(t, 60*time.Second, "half the SMS at the provider", sink.notified, func() bool { return len(sink.receipts()) >= 30 })
	mid := time.Now()
	waitFor(t, 60*time.Second, "every SMS at the provider", sink.notified, func() bool { return len(sink.receipts()) >= 60 })
	time.Sleep(3 * time.Second) // the last scrapes
	stopWorkers(t, procs...)

	data, err := os.ReadFile(filepath.Join("..", "deploy", "grafana", "sluice.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("deploy/grafana/sluice.json: %v", err)
	}
	exprs := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			exprs++
			q := strings.NewReplacer("$__rate_interval", "10s", "$job", "sluice").Replace(target.Expr)
			n := promSeries(t, api, q, mid)
			why, empty := dashboardEmpty[target.Expr]
			switch {
			case n == 0 && !empty:
				t.Errorf("panel %q: %s returned no data at the drain's middle", p.Title, q)
			case n > 0 && empty:
				t.Errorf("panel %q: %s returned %d series, listed as empty (%s): take it off the list", p.Title, q, n, why)
			}
		}
	}
	if exprs < 15 {
		t.Errorf("the dashboard has %d expressions, want its 15 or more", exprs)
	}
}

// needPrometheus returns the path of Debian's prometheus, failing t in CI
// when it is missing (.ci/test-deps.sh installs it), skipping elsewhere.
func needPrometheus(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("prometheus is missing: apt-get install prometheus (.ci/test-deps.sh)")
		}
		t.Skip("prometheus is missing: apt-get install prometheus")
	}
	return bin
}

// startPrometheus starts bin scraping target (host:port) every second as
// job "sluice", listening on a free loopback port, stopped when t ends;
// it returns the address of its API once a scrape has succeeded.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: sluice
    static_configs: [{targets: [%q]}]
`, target)), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", logs.String())
		}
	})
	waitFor(t, 30*time.Second, "prometheus's first scrape of the worker", nil, func() bool {
		return promSeries(t, addr, `up{job="sluice"} == 1`, time.Now()) > 0
	})
	return addr
}

// promSeries runs the instant query q at `at` against the Prometheus API at
// addr and returns the number of series it returned: 0 while Prometheus is
// not answering yet; a query it refuses fails t.
func promSeries(t *testing.T, addr, q string, at time.Time) int {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/api/v1/query?" + url.Values{
		"query": {q}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)},
	}.Encode())
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var r struct {
		Status, Error string
		Data          struct{ Result []json.RawMessage }
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0 // not JSON: Prometheus starting ("Service Unavailable")
	}
	if r.Status != "success" {
		t.Fatalf("query %s: %s", q, r.Error)
	}
	return len(r.Data.Result)
}
