package status

import (
	"errors"
	"fmt"
	"net/textproto"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/worker"
)

// MetricsConfig configures NewMetrics. The zero value is the default.
type MetricsConfig struct {
	// TenantLabel adds sluice_tenant_decisions_total, the decisions by
	// tenant as well. Off by default: every tenant is a time series, and a
	// Prometheus server with many tenants pays for each.
	TenantLabel bool
}

// Check at compile time that Metrics are a worker.Observer.
var _ worker.Observer = (*Metrics)(nil)

// Metrics are a worker's Prometheus metrics: its limiter decisions, the
// providers' answers and the tasks it sent back. They are a
// worker.Observer: give them to a Server (worker.Config.Observers), or feed
// them from your own middleware (Observe...).
// Label values are bounded: task types, rule names and status classes; a
// tenant appears only with MetricsConfig.TenantLabel. Safe for concurrent
// use.
type Metrics struct {
	decisions       *prometheus.CounterVec   // task_type, policy, result
	shadow          *prometheus.CounterVec   // task_type, policy, result
	tenantDecisions *prometheus.CounterVec   // task_type, policy, tenant, result; nil unless TenantLabel
	latency         *prometheus.HistogramVec // task_type
	retryAfter      *prometheus.HistogramVec // task_type, policy
	limiterErrors   *prometheus.CounterVec   // task_type
	failOpen        *prometheus.CounterVec   // task_type
	throttled       *prometheus.CounterVec   // task_type, by
	provider        *prometheus.CounterVec   // provider, class
	wait            *prometheus.HistogramVec // task_type, priority
	limit           *prometheus.GaugeVec     // task_type, policy
}

// Results of sluice_decisions_total.
const (
	ResultAllowed = "allowed" // admitted: counted for every rule checked
	ResultDenied  = "denied"  // refused: counted for the rule that set the wait
	ResultEarly   = "early"   // back before its place in line: not a new denial
)

// NewMetrics returns the metrics, registered with reg (a nil cfg takes
// the defaults). It fails when reg already holds metrics of these names.
func NewMetrics(reg prometheus.Registerer, cfg *MetricsConfig) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("status: NewMetrics: nil Registerer")
	}
	if cfg == nil {
		cfg = &MetricsConfig{}
	}
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_decisions_total",
			Help: "Limiter decisions by task type, rule (policy) and result: allowed (for every rule checked), denied (for the rule that set the wait), early (a task back before its place in line).",
		}, []string{"task_type", "policy", "result"}),
		shadow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_shadow_decisions_total",
			Help: "Decisions of rules in shadow mode, which never hold a task back: allowed or denied, by task type and rule.",
		}, []string{"task_type", "policy", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_decision_duration_seconds",
			Help:    "Time a limiter decision took, as the worker saw it, failed ones included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 15), // 100 µs to 1.6 s
		}, []string{"task_type"}),
		retryAfter: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_retry_after_seconds",
			Help:    "Wait a denial gave a task until its place in line, by task type and the rule that set it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 17), // 10 ms to 11 min
		}, []string{"task_type", "policy"}),
		limiterErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_limiter_errors_total",
			Help: "Limiter calls that did not decide (Redis unreachable or too slow, past --decision-timeout), by task type.",
		}, []string{"task_type"}),
		failOpen: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_fail_open_admissions_total",
			Help: "Tasks run without a decision because the limiter could not decide and the worker fails open, by task type.",
		}, []string{"task_type"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_throttled_returns_total",
			Help: "Tasks sent back to the queue to run later, without spending their retry budget, by task type and what held them back: a rule, the provider (429 or its hold), the limiter unavailable.",
		}, []string{"task_type", "by"}),
		provider: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_provider_responses_total",
			Help: "Providers' answers by provider (sms, email) and class: 2xx, 429, 4xx, 5xx (SMTP reply codes too), or error when none came.",
		}, []string{"provider", "class"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_wait_seconds",
			Help:    "Time from a task's enqueue (or the time it was due) to its provider taking it, by task type and priority (1 most urgent to 5).",
			Buckets: prometheus.ExponentialBuckets(0.025, 2, 16), // 25 ms to 14 min
		}, []string{"task_type", "priority"}),
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_rule_limit",
			Help: "The limit (or concurrency) a rule held its last task to, by task type and rule: an adaptive rule's limit in force, else the policies' limit.",
		}, []string{"task_type", "policy"}),
	}
	cs := []prometheus.Collector{m.decisions, m.shadow, m.latency, m.retryAfter, m.limiterErrors, m.failOpen, m.throttled, m.provider, m.wait, m.limit}
	if cfg.TenantLabel {
		m.tenantDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_tenant_decisions_total",
			Help: "sluice_decisions_total by tenant as well (--metrics-tenants).",
		}, []string{"task_type", "policy", "tenant", "result"})
		cs = append(cs, m.tenantDecisions)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("status: register metrics: %w", err)
		}
	}
	return m, nil
}

// ObserveDecision counts one limiter call of the Throttle middleware, and
// the decisions of its rules in shadow mode.
func (m *Metrics) ObserveDecision(e worker.DecisionEvent) {
	m.latency.WithLabelValues(e.TaskType).Observe(e.Latency.Seconds())
	for i, n := range e.Limits {
		if i < len(e.Rules) {
			m.limit.WithLabelValues(e.TaskType, e.Rules[i]).Set(float64(n))
		}
	}
	for _, s := range e.Shadow {
		if s.Err == nil {
			m.observeShadow(e.TaskType, s.Rule, s.Allowed)
		}
	}
	count := func(rule, result string) {
		m.decisions.WithLabelValues(e.TaskType, rule, result).Inc()
		if m.tenantDecisions != nil {
			m.tenantDecisions.WithLabelValues(e.TaskType, rule, e.Tenant, result).Inc()
		}
	}
	switch d := e.Decision; {
	case e.Err != nil:
		m.limiterErrors.WithLabelValues(e.TaskType).Inc()
		if e.FailedOpen {
			m.failOpen.WithLabelValues(e.TaskType).Inc()
		}
	case d.Allowed:
		for _, rule := range e.Rules {
			count(rule, ResultAllowed)
		}
	case len(e.Rules) > 0:
		rule := e.Rules[0]
		if d.Denied >= 0 && d.Denied < len(e.Rules) {
			rule = e.Rules[d.Denied]
		}
		if d.Early {
			count(rule, ResultEarly)
			return
		}
		count(rule, ResultDenied)
		m.retryAfter.WithLabelValues(e.TaskType, rule).Observe(d.RetryAfter.Seconds())
	}
}

// observeShadow counts the decision of a rule in shadow mode.
func (m *Metrics) observeShadow(taskType, rule string, allowed bool) {
	result := ResultDenied
	if allowed {
		result = ResultAllowed
	}
	m.shadow.WithLabelValues(taskType, rule, result).Inc()
}

// ObserveThrottled counts a task sent back to the queue by e.Err, a
// provider.ThrottledError; other errors are not counted.
func (m *Metrics) ObserveThrottled(e worker.ThrottledEvent) {
	te, ok := errors.AsType[*provider.ThrottledError](e.Err)
	if !ok {
		return
	}
	by := te.By
	if te.FromProvider {
		by = "provider"
	}
	m.throttled.WithLabelValues(e.TaskType, by).Inc()
}

// ObserveProvider counts the answer of e.Provider ("sms", "email") to one
// message: e.Err is what its Send returned. A message the provider took
// observes sluice_wait_seconds, from its enqueue.
func (m *Metrics) ObserveProvider(e worker.ProviderEvent) {
	m.provider.WithLabelValues(e.Provider, ResponseClass(e.Err)).Inc()
	if e.Err == nil && !e.Enqueued.IsZero() && e.Priority > 0 {
		m.wait.WithLabelValues(e.TaskType, strconv.Itoa(e.Priority)).Observe(max(0, time.Since(e.Enqueued).Seconds()))
	}
}

// ResponseClass returns the class of a provider's answer, from what its
// Send returned: "2xx" for nil; the class of a *provider.StatusError's code or of
// an SMTP reply (*textproto.Error), with "429" apart; "429" for a
// provider.ThrottledError from the provider; "error" when no answer came (the
// connection failed, a timeout).
func ResponseClass(err error) string {
	if err == nil {
		return "2xx"
	}
	code := 0
	if se, ok := errors.AsType[*provider.StatusError](err); ok {
		code = se.Code
	} else if te, ok := errors.AsType[*textproto.Error](err); ok {
		code = te.Code
	} else if te, ok := errors.AsType[*provider.ThrottledError](err); ok && te.FromProvider {
		code = 429
	}
	switch {
	case code == 429:
		return "429"
	case code >= 100 && code <= 599:
		return fmt.Sprintf("%dxx", code/100)
	}
	return "error"
}
