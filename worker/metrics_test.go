package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// TestMetricsObserveDecision: each kind of decision lands in its series,
// and only there.
func TestMetricsObserveDecision(t *testing.T) {
	t.Parallel()
	rules := []string{"tenant", "provider"}
	denied := func(by int, early bool) throttle.MultiDecision {
		return throttle.MultiDecision{Decision: throttle.Decision{RetryAfter: 1500 * time.Millisecond}, Denied: by, Early: early}
	}
	cases := []struct {
		name  string
		event worker.DecisionEvent
		want  string // the counters that change, in the text format, sorted
	}{
		{"allowed: every rule", worker.DecisionEvent{TaskType: "sms:send", Rules: rules, Decision: throttle.MultiDecision{Decision: throttle.Decision{Allowed: true}, Denied: -1}}, `
sluice_decisions_total{policy="provider",result="allowed",task_type="sms:send"} 1
sluice_decisions_total{policy="tenant",result="allowed",task_type="sms:send"} 1
`},
		{"denied: the rule that set the wait", worker.DecisionEvent{TaskType: "sms:send", Rules: rules, Decision: denied(1, false)}, `
sluice_decisions_total{policy="provider",result="denied",task_type="sms:send"} 1
`},
		{"early: not a denial", worker.DecisionEvent{TaskType: "sms:send", Rules: rules, Decision: denied(0, true)}, `
sluice_decisions_total{policy="tenant",result="early",task_type="sms:send"} 1
`},
		{"error", worker.DecisionEvent{TaskType: "sms:send", Rules: rules, Err: errors.New("dial tcp: refused")}, `
sluice_limiter_errors_total{task_type="sms:send"} 1
`},
		{"error, failed open", worker.DecisionEvent{TaskType: "sms:send", Rules: rules, Err: errors.New("dial tcp: refused"), FailedOpen: true}, `
sluice_fail_open_admissions_total{task_type="sms:send"} 1
sluice_limiter_errors_total{task_type="sms:send"} 1
`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewPedanticRegistry()
			m, err := worker.NewMetrics(reg, nil)
			if err != nil {
				t.Fatal(err)
			}
			m.ObserveDecision(tc.event)
			if got, want := counters(t, reg), strings.TrimSpace(tc.want); got != want {
				t.Errorf("counters:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// counters returns the counter samples of reg that are not zero, one a
// line, sorted.
func counters(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if m.GetCounter() == nil || m.GetCounter().GetValue() == 0 {
				continue
			}
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			lines = append(lines, fmt.Sprintf("%s{%s} %v", f.GetName(), strings.Join(labels, ","), m.GetCounter().GetValue()))
		}
	}
	return strings.Join(lines, "\n")
}

// TestMetricsTenantLabel: the tenant appears only when asked for, in a
// metric of its own.
func TestMetricsTenantLabel(t *testing.T) {
	t.Parallel()
	e := worker.DecisionEvent{TaskType: "sms:send", Tenant: "acme", Rules: []string{"tenant"},
		Decision: throttle.MultiDecision{Decision: throttle.Decision{Allowed: true}, Denied: -1}}
	for _, on := range []bool{false, true} {
		reg := prometheus.NewPedanticRegistry()
		m, err := worker.NewMetrics(reg, &worker.MetricsConfig{TenantLabel: on})
		if err != nil {
			t.Fatal(err)
		}
		m.ObserveDecision(e)
		got := strings.Contains(counters(t, reg), `sluice_tenant_decisions_total{policy="tenant",result="allowed",task_type="sms:send",tenant="acme"} 1`)
		if got != on {
			t.Errorf("TenantLabel %t: tenant series present: %t", on, got)
		}
	}
	if _, err := worker.NewMetrics(nil, nil); err == nil {
		t.Errorf("NewMetrics(nil, nil): no error")
	}
	reg := prometheus.NewRegistry()
	if _, err := worker.NewMetrics(reg, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := worker.NewMetrics(reg, nil); err == nil {
		t.Errorf("NewMetrics twice on one registry: no error")
	}
}

func TestResponseClass(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want string
	}{
		{nil, "2xx"},
		{&provider.StatusError{Code: 400, Status: "400 Bad Request"}, "4xx"},
		{fmt.Errorf("webhook: %w", &provider.StatusError{Code: 503, Status: "503 Service Unavailable"}), "5xx"},
		{&provider.ThrottledError{RetryAfter: time.Second, By: "provider 429", Err: &provider.StatusError{Code: 429}, FromProvider: true}, "429"},
		{&provider.ThrottledError{RetryAfter: time.Second, By: "provider 429", FromProvider: true}, "429"},
		{fmt.Errorf("%w: smtp: %w", asynq.SkipRetry, &textproto.Error{Code: 550, Msg: "no such user"}), "5xx"},
		{&textproto.Error{Code: 451, Msg: "try later"}, "4xx"},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), "error"},
		{&provider.StatusError{Code: 999}, "error"},
	}
	for _, tc := range cases {
		if got := worker.ResponseClass(tc.err); got != tc.want {
			t.Errorf("ResponseClass(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestMetricsObserveThrottledAndProvider: throttled returns by what held
// them back; other errors are not throttled returns.
func TestMetricsObserveThrottledAndProvider(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m, err := worker.NewMetrics(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveThrottled("sms:send", &provider.ThrottledError{By: "rule tenant"})
	m.ObserveThrottled("sms:send", fmt.Errorf("wrapped: %w", &provider.ThrottledError{By: "provider 429", FromProvider: true}))
	m.ObserveThrottled("sms:send", errors.New("a failure"))
	m.ObserveProvider("sms", nil)
	m.ObserveProvider("email", &textproto.Error{Code: 421})
	m.ObserveShadow("sms:send", "trial", false)
	want := strings.TrimSpace(`
sluice_provider_responses_total{class="2xx",provider="sms"} 1
sluice_provider_responses_total{class="4xx",provider="email"} 1
sluice_shadow_decisions_total{policy="trial",result="denied",task_type="sms:send"} 1
sluice_throttled_returns_total{by="provider",task_type="sms:send"} 1
sluice_throttled_returns_total{by="rule tenant",task_type="sms:send"} 1`)
	if got := counters(t, reg); got != want {
		t.Errorf("counters:\n%s\nwant:\n%s", got, want)
	}
}

// TestOpsHandler: the endpoints and what they answer.
func TestOpsHandler(t *testing.T) {
	t.Parallel()
	if _, err := worker.OpsHandler(worker.OpsConfig{}); err == nil {
		t.Errorf("OpsHandler without a Gatherer: no error")
	}
	reg := prometheus.NewPedanticRegistry()
	m, err := worker.NewMetrics(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveProvider("sms", nil)
	var down error
	h, err := worker.OpsHandler(worker.OpsConfig{Gatherer: reg, Ready: func(ctx context.Context) error { return down }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	get := func(path string) (int, string) {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	cases := []struct {
		path     string
		down     error
		wantCode int
		wantBody string
	}{
		{"/healthz", nil, 200, "ok\n"},
		{"/readyz", nil, 200, "ready\n"},
		{"/readyz", errors.New("redis: dial tcp: connection refused"), 503, "not ready: redis: dial tcp: connection refused\n"},
		{"/healthz", errors.New("redis down"), 200, "ok\n"},
		{"/nope", nil, 404, "404 page not found\n"},
	}
	for _, tc := range cases {
		down = tc.down
		if code, body := get(tc.path); code != tc.wantCode || body != tc.wantBody {
			t.Errorf("GET %s (ready: %v) = %d %q, want %d %q", tc.path, tc.down, code, body, tc.wantCode, tc.wantBody)
		}
	}
	code, body := get("/metrics")
	if code != 200 || !strings.Contains(body, `sluice_provider_responses_total{class="2xx",provider="sms"} 1`) {
		t.Errorf("GET /metrics = %d, without the provider's count:\n%s", code, body)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sluice_provider_responses_total Providers' answers by provider (sms, email) and class: 2xx, 429, 4xx, 5xx (SMTP reply codes too), or error when none came.
# TYPE sluice_provider_responses_total counter
sluice_provider_responses_total{class="2xx",provider="sms"} 1
`), "sluice_provider_responses_total"); err != nil {
		t.Error(err)
	}
}
