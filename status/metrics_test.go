package status_test

import (
	"errors"
	"fmt"
	"maps"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/status"
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
			m, err := status.NewMetrics(reg, nil)
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

// TestMetricsRuleLimit: each decision sets each rule's gauge to the limit
// it held the task to; the last decision wins.
func TestMetricsRuleLimit(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m, err := status.NewMetrics(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	allowed := throttle.MultiDecision{Decision: throttle.Decision{Allowed: true}, Denied: -1}
	m.ObserveDecision(worker.DecisionEvent{TaskType: "sms:send", Rules: []string{"tenant", "provider"}, Limits: []int{5, 50}, Decision: allowed})
	m.ObserveDecision(worker.DecisionEvent{TaskType: "sms:send", Rules: []string{"tenant", "provider"}, Limits: []int{5, 45}, Decision: allowed})
	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "sluice_rule_limit" {
			continue
		}
		for _, x := range f.GetMetric() {
			for _, l := range x.GetLabel() {
				if l.GetName() == "policy" {
					got[l.GetValue()] = x.GetGauge().GetValue()
				}
			}
		}
	}
	if want := map[string]float64{"tenant": 5, "provider": 45}; !maps.Equal(got, want) {
		t.Errorf("sluice_rule_limit by rule = %v, want %v", got, want)
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
		m, err := status.NewMetrics(reg, &status.MetricsConfig{TenantLabel: on})
		if err != nil {
			t.Fatal(err)
		}
		m.ObserveDecision(e)
		got := strings.Contains(counters(t, reg), `sluice_tenant_decisions_total{policy="tenant",result="allowed",task_type="sms:send",tenant="acme"} 1`)
		if got != on {
			t.Errorf("TenantLabel %t: tenant series present: %t", on, got)
		}
	}
	if _, err := status.NewMetrics(nil, nil); err == nil {
		t.Errorf("NewMetrics(nil, nil): no error")
	}
	reg := prometheus.NewRegistry()
	if _, err := status.NewMetrics(reg, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := status.NewMetrics(reg, nil); err == nil {
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
		if got := status.ResponseClass(tc.err); got != tc.want {
			t.Errorf("ResponseClass(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestMetricsObserveThrottledAndProvider: throttled returns by what held
// them back; other errors are not throttled returns.
func TestMetricsObserveThrottledAndProvider(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m, err := status.NewMetrics(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveThrottled(worker.ThrottledEvent{TaskType: "sms:send", Err: &provider.ThrottledError{By: "rule tenant"}})
	m.ObserveThrottled(worker.ThrottledEvent{TaskType: "sms:send", Err: fmt.Errorf("wrapped: %w", &provider.ThrottledError{By: "provider 429", FromProvider: true})})
	m.ObserveThrottled(worker.ThrottledEvent{TaskType: "sms:send", Err: errors.New("a failure")})
	m.ObserveProvider(worker.ProviderEvent{Provider: "sms"})
	m.ObserveProvider(worker.ProviderEvent{Provider: "email", Err: &textproto.Error{Code: 421}})
	m.ObserveDecision(worker.DecisionEvent{TaskType: "sms:send", Decision: throttle.MultiDecision{Decision: throttle.Decision{Allowed: true}, Denied: -1},
		Shadow: []worker.ShadowDecision{{Rule: "trial", Allowed: false}}})
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
