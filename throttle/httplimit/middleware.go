package httplimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// Limiter decides requests: *throttle.Limiter, or a wrapper around one (to
// count decisions, say). It must be safe for concurrent use.
type Limiter interface {
	AllowMulti(ctx context.Context, checks []throttle.Check) (throttle.MultiDecision, error)
}

var _ Limiter = (*throttle.Limiter)(nil)

// Defaults of Config.
const (
	// DefaultDecisionTimeout is Config.DecisionTimeout's default. A
	// decision takes well under a millisecond on a healthy Redis; during
	// an outage every limited request waits this long before the
	// FailureMode applies, so it is kept short for an API.
	DefaultDecisionTimeout = 250 * time.Millisecond

	// DefaultUnavailableRetryAfter is Config.UnavailableRetryAfter's
	// default.
	DefaultUnavailableRetryAfter = time.Second
)

// Config configures a Middleware. The zero value is usable: every zero
// field takes its default; negative durations are an error.
type Config struct {
	// FailureMode says what to do when the limiter cannot decide (Redis
	// down, or slower than DecisionTimeout); default FailClosed.
	FailureMode throttle.FailureMode

	// DecisionTimeout bounds the limiter's decision for each request;
	// default DefaultDecisionTimeout (250 ms). The bound holds whatever
	// the Redis client's own timeouts: the decision runs in a goroutine
	// that the request stops waiting for. A decision cut short can still
	// be recorded in Redis after the request was answered, as any call
	// whose context ends after it was sent.
	DecisionTimeout time.Duration

	// UnavailableRetryAfter is the Retry-After of a 503 (FailClosed),
	// rounded up to whole seconds; default DefaultUnavailableRetryAfter
	// (1 s).
	UnavailableRetryAfter time.Duration

	// LegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset to the draft's fields, for older clients; default
	// false.
	LegacyHeaders bool

	// Reject writes the response to a request the middleware does not
	// serve (see Rejection); the rate-limit fields and Retry-After are set
	// already. Default WriteProblem. It must be safe for concurrent use.
	Reject func(w http.ResponseWriter, r *http.Request, rej Rejection)

	// Logger receives the middleware's logs: the limiter going down and
	// coming back (once each way, not once a request), KeyFunc failures
	// and invalid rules. Nil means slog.Default().
	Logger *slog.Logger
}

// Middleware holds HTTP requests to the limiter's rules; see Handler. It is
// safe for concurrent use.
type Middleware struct {
	limiter Limiter
	key     KeyFunc
	rules   RuleFunc
	mode    throttle.FailureMode
	timeout time.Duration
	retry   time.Duration // UnavailableRetryAfter, whole seconds
	legacy  bool
	reject  func(http.ResponseWriter, *http.Request, Rejection)
	logger  *slog.Logger

	outage *throttle.Outage // logs the limiter going down and up, once each way
}

// New returns the middleware that keys each request with key and holds it
// to the rules that rules gives for that key, deciding with limiter. A nil
// cfg takes every default. It fails, rather than panics, for a nil
// limiter, key or rules, or a bad cfg.
func New(limiter Limiter, key KeyFunc, rules RuleFunc, cfg *Config) (*Middleware, error) {
	if l, ok := limiter.(*throttle.Limiter); limiter == nil || ok && l == nil {
		return nil, errors.New("httplimit: New needs a limiter")
	}
	if key == nil {
		return nil, errors.New("httplimit: New needs a KeyFunc")
	}
	if rules == nil {
		return nil, errors.New("httplimit: New needs a RuleFunc")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	switch {
	case c.FailureMode != throttle.FailClosed && c.FailureMode != throttle.FailOpen:
		return nil, fmt.Errorf("httplimit: unknown FailureMode %d", c.FailureMode)
	case c.DecisionTimeout < 0:
		return nil, fmt.Errorf("httplimit: DecisionTimeout %v is negative", c.DecisionTimeout)
	case c.UnavailableRetryAfter < 0:
		return nil, fmt.Errorf("httplimit: UnavailableRetryAfter %v is negative", c.UnavailableRetryAfter)
	}
	m := &Middleware{
		limiter: limiter,
		key:     key,
		rules:   rules,
		mode:    c.FailureMode,
		timeout: c.DecisionTimeout,
		retry:   time.Duration(ceilSeconds(c.UnavailableRetryAfter)) * time.Second,
		legacy:  c.LegacyHeaders,
		reject:  c.Reject,
		logger:  c.Logger,
	}
	if m.timeout == 0 {
		m.timeout = DefaultDecisionTimeout
	}
	if m.retry == 0 {
		m.retry = DefaultUnavailableRetryAfter
	}
	if m.reject == nil {
		m.reject = WriteProblem
	}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	what := "requests are answered 503 (fail-closed)"
	if m.mode == throttle.FailOpen {
		what = "requests are served without a decision (fail-open)"
	}
	m.outage = throttle.NewOutage(m.logger, "httplimit: limiter unavailable: "+what, "httplimit: limiter available again")
	return m, nil
}

// Handler wraps next: for each request it finds the key and the rules,
// checks every rule in one atomic limiter call, sets the rate-limit
// header fields, and serves the request with next only if every rule
// allows it (or, with FailOpen, if the limiter could not decide). See the
// package documentation for the responses and the fields. A nil next
// answers every request it would serve with 500.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	if next == nil {
		next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.logger.Error("httplimit: Handler(nil): no handler to serve the request", "path", r.URL.Path)
			m.reject(w, r, Rejection{Status: http.StatusInternalServerError, Err: errors.New("httplimit: Handler(nil)")})
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.admit(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// admit decides r, sets the header fields, answers r itself when it is
// not to be served, and reports whether it is.
func (m *Middleware) admit(w http.ResponseWriter, r *http.Request) bool {
	key, err := m.key(r)
	if err == nil && key == "" {
		err = fmt.Errorf("%w: the key is empty", ErrBadKey)
	}
	if err != nil {
		if errors.Is(err, ErrBadKey) {
			m.reject(w, r, Rejection{Status: http.StatusBadRequest, Err: err})
			return false
		}
		m.logger.Error("httplimit: the KeyFunc failed", "path", r.URL.Path, "err", err)
		m.reject(w, r, Rejection{Status: http.StatusInternalServerError, Err: err})
		return false
	}

	rules := m.rules(r, key)
	if len(rules) == 0 {
		return true
	}
	checks := make([]throttle.Check, len(rules))
	for i, rule := range rules {
		if !validName(rule.Name) {
			err := fmt.Errorf("httplimit: rule %d's name %s is not printable ASCII, as RateLimit-Policy needs", i+1, throttle.Quote(rule.Name))
			m.logger.Error("httplimit: invalid rules", "err", err)
			m.reject(w, r, Rejection{Status: http.StatusInternalServerError, Err: err})
			return false
		}
		checks[i] = rule.Check
	}

	h := w.Header()
	h.Set(HeaderPolicy, policyField(rules))
	md, err := m.decide(r.Context(), checks)
	if err != nil {
		return m.failed(w, r, err)
	}
	m.outage.Observe(nil)

	i := report(md)
	d := md.Checks[i]
	if md.Allowed {
		setLimit(h, rules[i].Name, d.Limit, d.Remaining, ceilSeconds(d.ResetAfter), m.legacy)
		return true
	}
	wait := max(1, ceilSeconds(md.RetryAfter))
	setLimit(h, rules[i].Name, d.Limit, d.Remaining, wait, m.legacy)
	h.Set(HeaderRetryAfter, strconv.FormatInt(wait, 10))
	m.reject(w, r, Rejection{
		Status:     http.StatusTooManyRequests,
		Rule:       rules[i].Name,
		Policy:     rules[i].Check.Policy,
		RetryAfter: time.Duration(wait) * time.Second,
	})
	return false
}

// failed answers a request whose decision failed with err, and reports
// whether it is to be served anyway (FailOpen).
func (m *Middleware) failed(w http.ResponseWriter, r *http.Request, err error) bool {
	if badInput(err) {
		// The rules, not Redis: no FailureMode makes them right.
		w.Header().Del(HeaderPolicy)
		m.logger.Error("httplimit: the limiter rejected the rules", "path", r.URL.Path, "err", err)
		m.reject(w, r, Rejection{Status: http.StatusInternalServerError, Err: err})
		return false
	}
	if r.Context().Err() != nil {
		// The client went away: not the limiter's fault, and no one to
		// serve.
		m.reject(w, r, Rejection{Status: http.StatusServiceUnavailable, RetryAfter: m.retry, Err: err})
		return false
	}
	m.outage.Observe(err)
	if m.mode == throttle.FailOpen {
		return true
	}
	w.Header().Set(HeaderRetryAfter, strconv.FormatInt(ceilSeconds(m.retry), 10))
	m.reject(w, r, Rejection{Status: http.StatusServiceUnavailable, RetryAfter: m.retry, Err: err})
	return false
}

// badInput reports whether err is the limiter refusing its input, rather
// than Redis failing.
func badInput(err error) bool {
	for _, e := range []error{throttle.ErrInvalidKey, throttle.ErrInvalidPolicy, throttle.ErrInvalidCost,
		throttle.ErrDuplicateKey, throttle.ErrMixedGroups, throttle.ErrInvalidConfig} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// decide asks the limiter about checks, giving up after the decision
// timeout or when ctx ends, whether or not the limiter's Redis client
// honours contexts.
func (m *Middleware) decide(ctx context.Context, checks []throttle.Check) (throttle.MultiDecision, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	type result struct {
		md  throttle.MultiDecision
		err error
	}
	done := make(chan result, 1)
	go func() {
		md, err := m.limiter.AllowMulti(ctx, checks)
		done <- result{md, err}
	}()
	decided := func(res result) (throttle.MultiDecision, error) {
		if res.err == nil && len(res.md.Checks) != len(checks) {
			res.err = fmt.Errorf("httplimit: the limiter decided %d checks of %d", len(res.md.Checks), len(checks))
		}
		return res.md, res.err
	}
	select {
	case res := <-done:
		return decided(res)
	case <-ctx.Done():
		// A decision that came as the time ran out was counted: it stands.
		select {
		case res := <-done:
			if res.err == nil {
				return decided(res)
			}
		default:
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return throttle.MultiDecision{}, fmt.Errorf("httplimit: no decision within %v: %w", m.timeout, ctx.Err())
		}
		return throttle.MultiDecision{}, fmt.Errorf("httplimit: the request ended before a decision: %w", ctx.Err())
	}
}
