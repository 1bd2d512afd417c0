package integration_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/redistest"
)

// opsAddr waits for p's log line that says where its operations server
// listens (--metrics-addr 127.0.0.1:0 picks a free port) and returns the
// address.
func opsAddr(t *testing.T, p *workerProc) string {
	t.Helper()
	var addr string
	waitFor(t, 10*time.Second, "the worker's operations server", nil, func() bool {
		lines := logLines(t, p.logs.String(), "operations server listening")
		if len(lines) > 0 {
			addr, _ = lines[0]["addr"].(string)
		}
		return addr != ""
	})
	return addr
}

// get fetches http://addr/path and returns the status and body.
func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// metricSums is what a scrape says, summed over workers: the value of each
// counter series by its name and labels ("name{a=x,b=y}", labels sorted
// by name as Prometheus writes them).
type metricSums map[string]float64

// scrapeAll returns the counters of the workers at addrs, summed.
func scrapeAll(t *testing.T, addrs ...string) metricSums {
	t.Helper()
	sums := metricSums{}
	for _, addr := range addrs {
		sums.scrape(t, addr)
	}
	return sums
}

// scrape adds the counters of the worker at addr to sums.
func (sums metricSums) scrape(t *testing.T, addr string) {
	t.Helper()
	code, body := get(t, addr, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics answered %d: %s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	for name, f := range families {
		if f.GetType() != dto.MetricType_COUNTER {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sums[name+"{"+strings.Join(labels, ",")+"}"] += m.GetCounter().GetValue()
		}
	}
}

// TestMetricsMatchTheProvider drains a throttled backlog through two
// workers, scrapes their /metrics, and checks the counts against what the
// provider received: every task it got was allowed once by every rule, and
// answered 2xx; tasks were denied and sent back, and none ran without a
// decision.
func TestMetricsMatchTheProvider(t *testing.T) {
	rawURL := redistest.URL(t)
	rdb := redistest.Client(t)
	queue := redistest.Queue(t, rdb)
	sink := newSMSSink(t)
	lim := limits{tenant: 3, global: 5}
	want := backlog(t, rdb, queue, 12, "acme", "globex")
	procs := startWorkers(t, 2, "--redis", rawURL, "--policies", lim.policies(t), "--sms-webhook", sink.srv.URL,
		"--queues", queue+"=1", "--prefix", redistest.Prefix(t), "--concurrency", "4",
		"--metrics-addr", "127.0.0.1:0", "--log-level", "info")
	addrs := []string{opsAddr(t, procs[0]), opsAddr(t, procs[1])}

	waitDrained(t, rdb, queue, 60*time.Second)
	sums := scrapeAll(t, addrs...)
	stopWorkers(t, procs...)
	rs := sink.receipts()
	checkDelivered(t, rs, want, nil)

	delivered := float64(len(rs))
	cases := []struct {
		series string
		want   func(got float64) bool
		what   string
	}{
		{`sluice_decisions_total{policy=tenant,result=allowed,task_type=sms:send}`, eq(delivered), fmt.Sprint(delivered, ", the tasks the provider got")},
		{`sluice_decisions_total{policy=provider,result=allowed,task_type=sms:send}`, eq(delivered), fmt.Sprint(delivered, ", the tasks the provider got")},
		{`sluice_provider_responses_total{class=2xx,provider=sms}`, eq(delivered), fmt.Sprint(delivered, ", the tasks the provider got")},
		{`sluice_fail_open_admissions_total{task_type=sms:send}`, eq(0), "0"},
		{`sluice_limiter_errors_total{task_type=sms:send}`, eq(0), "0"},
	}
	for _, tc := range cases {
		if got := sums[tc.series]; !tc.want(got) {
			t.Errorf("%s = %v, want %s", tc.series, got, tc.what)
		}
	}
	denied := sums[`sluice_decisions_total{policy=tenant,result=denied,task_type=sms:send}`] +
		sums[`sluice_decisions_total{policy=provider,result=denied,task_type=sms:send}`]
	if denied == 0 {
		t.Errorf("no denial counted: the backlog of %d at %d a second was throttled", len(want), lim.global)
	}
	t.Logf("%v tasks at the provider; the workers counted %v allowed per rule, %v denied, %v throttled returns by the tenant rule and %v by the provider rule",
		delivered, sums[`sluice_decisions_total{policy=provider,result=allowed,task_type=sms:send}`], denied,
		sums[`sluice_throttled_returns_total{by=rule tenant,task_type=sms:send}`], sums[`sluice_throttled_returns_total{by=rule provider,task_type=sms:send}`])
}

func eq(want float64) func(float64) bool { return func(got float64) bool { return got == want } }

// TestReadyz: /readyz answers 200 while Redis answers, 503 with the reason
// once the worker is cut off it, and 200 again when it comes back;
// /healthz answers 200 throughout.
func TestReadyz(t *testing.T) {
	rawURL := redistest.URL(t)
	rdb := redistest.Client(t)
	proxy, throughProxy := startProxy(t, rawURL)
	p := startWorkers(t, 1, "--redis", throughProxy, "--policies", limits{global: 10}.policies(t), "--sms-log",
		"--queues", redistest.Queue(t, rdb)+"=1", "--prefix", redistest.Prefix(t),
		"--metrics-addr", "127.0.0.1:0", "--log-level", "info")[0]
	addr := opsAddr(t, p)

	ready := func(want int) func() bool {
		return func() bool { code, _ := get(t, addr, "/readyz"); return code == want }
	}
	waitFor(t, 10*time.Second, "/readyz 200 with Redis up", nil, ready(http.StatusOK))
	for _, mode := range []faultproxy.Mode{faultproxy.Refuse, faultproxy.Blackhole} {
		proxy.Set(mode)
		waitFor(t, 10*time.Second, fmt.Sprintf("/readyz 503 with Redis cut off (%v)", mode), nil, ready(http.StatusServiceUnavailable))
		if code, body := get(t, addr, "/readyz"); !strings.Contains(body, "redis") {
			t.Errorf("/readyz with Redis cut off (%v): %d %q, want the reason, naming Redis", mode, code, body)
		}
		if code, _ := get(t, addr, "/healthz"); code != http.StatusOK {
			t.Errorf("/healthz with Redis cut off (%v): %d, want 200: the process is alive", mode, code)
		}
		proxy.Set(faultproxy.Pass)
		waitFor(t, 10*time.Second, "/readyz 200 with Redis back", nil, ready(http.StatusOK))
	}
	stopWorkers(t, p)
}
