package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/syncbuf"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// The tests of this file run the Throttle middleware in a real asynq server
// (see startServer), so that tasks carry asynq's context (ID, retry count,
// MaxRetry) and their fate is asynq's: archived, in the retry set, done.
// They assert outcomes, not the timing of denials.

// newThrottle returns the middleware for the policies in yaml, with a
// limiter on rdb whose keys start with prefix, and deletes those keys when
// the test ends.
func newThrottle(t *testing.T, rdb *redis.Client, prefix, yaml string) *worker.Throttle {
	t.Helper()
	p, err := policies.Parse(t.Name(), []byte(yaml))
	if err != nil {
		t.Fatalf("ParsePolicies: %v", err)
	}
	tr, err := worker.NewThrottle(throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)), policies.Static(p),
		&worker.ThrottleConfig{DelayedTaskCheckInterval: serverCheckInterval, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("NewThrottle: %v", err)
	}
	t.Cleanup(func() {
		if keys := redistest.Keys(t, rdb, prefix); len(keys) > 0 {
			if err := rdb.Del(context.Background(), keys...).Err(); err != nil {
				t.Errorf("delete limiter keys: %v", err)
			}
		}
	})
	return tr
}

// perHour is a policies file with one tenant rule for sms:send: one task an
// hour, so that a denied task stays in the retry set for the test's life.
const perHour = `
tasks:
  sms:send:
    - {name: per-hour, scope: tenant, limit: 1, window: 1h}
`

// TestMiddlewareBadTenant: a task without a valid tenant header is archived
// without reaching the handler or the limiter.
func TestMiddlewareBadTenant(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	payload := []byte(`{"to":"+15551234567","body":"hi"}`)
	cases := []struct {
		name    string
		headers map[string]string
	}{
		{"no headers", nil},
		{"no tenant header", map[string]string{producer.HeaderMaxRetry: "3"}},
		{"empty tenant", map[string]string{producer.HeaderTenant: "", producer.HeaderMaxRetry: "3"}},
		{"tenant with a space", map[string]string{producer.HeaderTenant: "a b", producer.HeaderMaxRetry: "3"}},
		{"tenant with braces", map[string]string{producer.HeaderTenant: "{acme}", producer.HeaderMaxRetry: "3"}},
		{"tenant with a slash", map[string]string{producer.HeaderTenant: "acme/x", producer.HeaderMaxRetry: "3"}},
		{"tenant too long", map[string]string{producer.HeaderTenant: strings.Repeat("a", producer.MaxTenantLen+1), producer.HeaderMaxRetry: "3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := redistest.Prefix(t)
			rec := newRecorder(nil)
			s := startServer(t, rdb, newThrottle(t, rdb, prefix, perHour).Middleware(rec))
			info := s.enqueue(t, asynq.NewTaskWithHeaders(producer.TypeSMS, payload, tc.headers), asynq.MaxRetry(5))

			f := testwait.Receive(t, s.failures, "ErrorHandler call")
			s.stop()
			if !errors.Is(f.Err, asynq.SkipRetry) {
				t.Errorf("error %q does not match SkipRetry", f.Err)
			}
			for _, want := range []string{"task sms:send", "header sluice-tenant", "tenant"} {
				if !strings.Contains(f.Err.Error(), want) {
					t.Errorf("error %q does not contain %q", f.Err, want)
				}
			}
			if calls := testwait.Drain(rec.calls); len(calls) > 0 {
				t.Errorf("handler ran %d times, want 0", len(calls))
			}
			got := s.info(t, info.ID)
			if got.State != asynq.TaskStateArchived {
				t.Errorf("state = %v, want archived", got.State)
			}
			if got.Retried != 0 {
				t.Errorf("Retried = %d, want 0", got.Retried)
			}
			if !strings.Contains(got.LastErr, "header sluice-tenant") {
				t.Errorf("LastErr = %q, want the header named", got.LastErr)
			}
			if keys := redistest.Keys(t, rdb, prefix); len(keys) > 0 {
				t.Errorf("the limiter wrote %q", keys)
			}
		})
	}
}

// TestMiddlewareOversizedPayload: an SMS or email task whose payload is
// larger than producer.MaxPayload is archived with the reason, without
// reaching the limiter (it spends no quota) or a provider.
func TestMiddlewareOversizedPayload(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	headers := map[string]string{producer.HeaderTenant: "acme", producer.HeaderMaxRetry: "3"}
	cases := []struct {
		name    string
		typ     string
		payload string
	}{
		{"sms", producer.TypeSMS, oversized(`{"to":"+15551234567","body":"hi"}`)},
		{"email", producer.TypeEmail, oversized(`{"to":"ada@example.com","subject":"Hi","body":"hi"}`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := redistest.Prefix(t)
			sms, email := newFakeSMS(nil), newFakeEmail(nil)
			policies := perHour + "  email:send:\n    - {name: per-hour, scope: tenant, limit: 1, window: 1h}\n"
			s := startServer(t, rdb, newThrottle(t, rdb, prefix, policies).Middleware(worker.Handler(sms, email)))
			info := s.enqueue(t, asynq.NewTaskWithHeaders(tc.typ, []byte(tc.payload), headers), asynq.MaxRetry(5))

			f := testwait.Receive(t, s.failures, "ErrorHandler call")
			s.stop()
			if !errors.Is(f.Err, asynq.SkipRetry) {
				t.Errorf("error %q does not match SkipRetry", f.Err)
			}
			want := fmt.Sprintf("task %s: invalid task: the payload is %d bytes of JSON, more than the limit of %d", tc.typ, producer.MaxPayload+1, producer.MaxPayload)
			got := s.info(t, info.ID)
			if got.State != asynq.TaskStateArchived {
				t.Errorf("state = %v, want archived", got.State)
			}
			if !strings.Contains(got.LastErr, want) {
				t.Errorf("LastErr = %q, want it to contain %q", got.LastErr, want)
			}
			if got.Retried != 0 {
				t.Errorf("Retried = %d, want 0", got.Retried)
			}
			if n := len(testwait.Drain(sms.got)) + len(testwait.Drain(email.got)); n > 0 {
				t.Errorf("a provider was called %d times, want 0", n)
			}
			if keys := redistest.Keys(t, rdb, prefix); len(keys) > 0 {
				t.Errorf("the limiter wrote %q", keys)
			}
		})
	}
}

// TestMiddlewareThrottles: a task over its limit does not run, is not a
// failure (its Retried count stays 0, and a task with a retry budget of 0
// is not archived), and waits in the retry set; each scope and override
// counts as the policies say.
func TestMiddlewareThrottles(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	cases := []struct {
		name          string
		policies      string
		tenants       []string // one task each, in order
		wantRuns      int
		wantThrottled int
		wantBy        string
	}{
		{"tenant scope counts per tenant", perHour, []string{"acme", "acme", "globex"}, 2, 1, "rule per-hour"},
		{"global scope counts all tenants", `
tasks:
  sms:send:
    - {name: provider, scope: global, limit: 1, window: 1h}
`, []string{"acme", "globex"}, 1, 1, "rule provider"},
		{"override raises a tenant's limit", `
tasks:
  sms:send:
    - {name: per-hour, scope: tenant, limit: 1, window: 1h, tenants: {big: {limit: 2}}}
`, []string{"big", "big", "big", "acme", "acme"}, 3, 2, "rule per-hour"},
		{"every rule must allow", `
tasks:
  sms:send:
    - {name: per-hour, scope: tenant, limit: 5, window: 1h}
    - {name: provider, scope: global, limit: 2, window: 1h}
`, []string{"a", "b", "c"}, 2, 1, "rule provider"},
		{"many denied", perHour, []string{"acme", "acme", "acme", "acme", "acme", "acme"}, 1, 5, "rule per-hour"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(nil)
			s := startServer(t, rdb, newThrottle(t, rdb, redistest.Prefix(t), tc.policies).Middleware(rec))
			ids := map[string]bool{}
			for _, tenant := range tc.tenants {
				ids[s.enqueue(t, smsTask(t, tenant, asynq.MaxRetry(0))).ID] = true
			}

			for range tc.wantRuns {
				if c := testwait.Receive(t, rec.calls, "handler call"); !ids[c.ID] {
					t.Errorf("handler ran task %q, not one of the test's", c.ID)
				}
			}
			var throttled []failure
			for range tc.wantThrottled {
				throttled = append(throttled, testwait.Receive(t, s.failures, "ErrorHandler call"))
			}
			s.stop()
			if calls := testwait.Drain(rec.calls); len(calls) > 0 {
				t.Errorf("handler ran %d more times", len(calls))
			}
			if more := testwait.Drain(s.failures); len(more) > 0 {
				t.Errorf("%d more ErrorHandler calls, the first %v", len(more), more[0].Err)
			}
			checkThrottledErrors(t, throttled, tc.wantBy)
			checkThrottledRetrySet(t, s, tc.wantThrottled, tc.wantBy)
			checkThrottledLogs(t, s, ids, tc.wantThrottled)
		})
	}
}

// checkThrottledErrors checks that each ErrorHandler call in throttled was
// a denial by wantBy, of a task that had not failed before.
func checkThrottledErrors(t *testing.T, throttled []failure, wantBy string) {
	t.Helper()
	for _, f := range throttled {
		te, ok := errors.AsType[*provider.ThrottledError](f.Err)
		if !ok {
			t.Errorf("error %q is not a *ThrottledError", f.Err)
			continue
		}
		if got, want := te.By, wantBy; got != want {
			t.Errorf("ThrottledError.By = %q, want %q", got, want)
		}
		if f.Retried != 0 {
			t.Errorf("task %s ran with Retried = %d, want 0", f.ID, f.Retried)
		}
	}
}

// checkThrottledRetrySet checks that nothing was archived or counted as a
// failure, and that the wantThrottled denied tasks wait in the retry set
// for a free slot of wantBy's one-hour window.
func checkThrottledRetrySet(t *testing.T, s *server, wantThrottled int, wantBy string) {
	t.Helper()
	if archived := s.archived(t); len(archived) > 0 {
		t.Errorf("%d tasks archived, the first with %q", len(archived), archived[0].LastErr)
	}
	if qi := s.queueInfo(t); qi.FailedTotal != 0 {
		t.Errorf("queue counts %d failures, want 0: denials are not failures", qi.FailedTotal)
	}
	retries := s.retries(t)
	if got, want := len(retries), wantThrottled; got != want {
		t.Fatalf("%d tasks in the retry set, want %d", got, want)
	}
	for _, r := range retries {
		if r.Retried != 0 {
			t.Errorf("task %s: Retried = %d, want 0: a denial counted as a failure", r.ID, r.Retried)
		}
		if want := "throttled by " + wantBy; !strings.Contains(r.LastErr, want) {
			t.Errorf("task %s: LastErr = %q, want it to contain %q", r.ID, r.LastErr, want)
		}
		// A one-hour window: the task waits for a free slot, not a
		// fixed backoff.
		if soonest := time.Now().Add(30 * time.Minute); r.NextProcessAt.Before(soonest) {
			t.Errorf("task %s comes back at %v, before %v", r.ID, r.NextProcessAt, soonest)
		}
	}
}

// checkThrottledLogs checks that worker.ErrorHandler logged each of the
// wantThrottled denials at debug level, with the task's ID from asynq's
// context, and nothing else.
func checkThrottledLogs(t *testing.T, s *server, ids map[string]bool, wantThrottled int) {
	t.Helper()
	var logged int
	for _, r := range s.logs.JSONLines(t) {
		if r["msg"] != "task throttled" {
			t.Errorf("unexpected log record %v", r)
			continue
		}
		logged++
		if r["level"] != "DEBUG" {
			t.Errorf("throttled task logged at %v, want DEBUG", r["level"])
		}
		if id, _ := r["task"].(string); !ids[id] {
			t.Errorf("log record names task %q, not one of the test's", r["task"])
		}
	}
	if got, want := logged, wantThrottled; got != want {
		t.Errorf("%d throttled tasks logged, want %d", got, want)
	}
}

// TestMiddlewareDeniedTaskRunsLater: denied tasks run when their slots free,
// never more than the limit in a window, without spending their budget of 0.
func TestMiddlewareDeniedTaskRunsLater(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	rec := newRecorder(nil)
	// The rule "all" never denies: its window keeps every admission, with
	// the limiter's (Redis's) time.
	s := startServer(t, rdb, newThrottle(t, rdb, prefix, `
margin: 0s
tasks:
  sms:send:
    - {name: per-second, scope: tenant, limit: 1, window: 1s}
    - {name: all, scope: global, limit: 100, window: 1h}
`).Middleware(rec))
	const n = 3
	for range n {
		s.enqueue(t, smsTask(t, "acme", asynq.MaxRetry(0)))
	}
	var calls []call
	for range n {
		calls = append(calls, testwait.Receive(t, rec.calls, "handler call"))
	}
	s.stop()
	seen := map[string]bool{}
	for _, c := range calls {
		if seen[c.ID] {
			t.Errorf("task %s ran twice", c.ID)
		}
		seen[c.ID] = true
		if c.Retried != 0 {
			t.Errorf("task %s ran with Retried = %d, want 0", c.ID, c.Retried)
		}
	}
	for _, f := range testwait.Drain(s.failures) {
		if !provider.IsThrottled(f.Err) {
			t.Errorf("task %s failed: %v", f.ID, f.Err)
		}
	}
	if archived := s.archived(t); len(archived) > 0 {
		t.Errorf("%d tasks archived, the first with %q", len(archived), archived[0].LastErr)
	}

	// One task a second: admissions are at least a window apart.
	key, err := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)).RedisKey("rule/sms:send/all")
	if err != nil {
		t.Fatal(err)
	}
	admitted, err := rdb.ZRangeWithScores(context.Background(), key, 0, -1).Result()
	if err != nil {
		t.Fatalf("ZRANGE %s: %v", key, err)
	}
	if got, want := len(admitted), n; got != want {
		t.Fatalf("%d admissions in %s, want %d", got, key, want)
	}
	for i := 1; i < n; i++ {
		if gap := time.Duration(admitted[i].Score-admitted[i-1].Score) * time.Microsecond; gap < time.Second {
			t.Errorf("admission %d came %v after admission %d, want 1s or more", i, gap, i-1)
		}
	}
}

var errProviderDown = errors.New("provider down")

// retryBudgetCase is a case of TestMiddlewareRetryBudget: a task whose
// handler returns result (or panics), and how the task ends.
type retryBudgetCase struct {
	name        string
	task        func(t *testing.T) *asynq.Task
	result      error
	panics      bool
	wantState   asynq.TaskState
	wantRetried int
	wantErrIn   []string
	wantErrOut  string // must not be in LastErr
}

// TestMiddlewareRetryBudget: a real failure spends the task's budget, the
// producer.HeaderMaxRetry header (asynq's MaxRetry - 1 without it); with
// the budget spent the task is archived, saying so. Errors that are not
// failures pass through.
func TestMiddlewareRetryBudget(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	payload := []byte(`{"to":"+15551234567","body":"hi"}`)
	byHand := func(headers map[string]string, opts ...asynq.Option) func(t *testing.T) *asynq.Task {
		return func(*testing.T) *asynq.Task {
			return asynq.NewTaskWithHeaders(producer.TypeSMS, payload, headers, opts...)
		}
	}
	withProducer := func(opts ...asynq.Option) func(t *testing.T) *asynq.Task {
		return func(t *testing.T) *asynq.Task { return smsTask(t, "acme", opts...) }
	}
	cases := []retryBudgetCase{
		{"budget 0, failure archived", withProducer(asynq.MaxRetry(0)), errProviderDown,
			false, asynq.TaskStateArchived, 0, []string{"retry budget of 0 spent", "provider down"}, ""},
		{"budget 3, failure retried", withProducer(asynq.MaxRetry(3)), errProviderDown,
			false, asynq.TaskStateRetry, 1, []string{"provider down"}, "retry budget"},
		{"default budget, failure retried", withProducer(), errProviderDown,
			false, asynq.TaskStateRetry, 1, []string{"provider down"}, "retry budget"},
		{"no header: asynq MaxRetry(1) is a budget of 0", byHand(map[string]string{producer.HeaderTenant: "acme"}, asynq.MaxRetry(1)), errProviderDown,
			false, asynq.TaskStateArchived, 0, []string{"retry budget of 0 spent", "provider down"}, ""},
		{"no header: asynq MaxRetry(3) is a budget of 2", byHand(map[string]string{producer.HeaderTenant: "acme"}, asynq.MaxRetry(3)), errProviderDown,
			false, asynq.TaskStateRetry, 1, []string{"provider down"}, "retry budget"},
		{"bad header: asynq's MaxRetry counts", byHand(map[string]string{producer.HeaderTenant: "acme", producer.HeaderMaxRetry: "x"}, asynq.MaxRetry(1)), errProviderDown,
			false, asynq.TaskStateArchived, 0, []string{"retry budget of 0 spent"}, ""},
		{"header wins over asynq's MaxRetry", byHand(map[string]string{producer.HeaderTenant: "acme", producer.HeaderMaxRetry: "0"}, asynq.MaxRetry(10)), errProviderDown,
			false, asynq.TaskStateArchived, 0, []string{"retry budget of 0 spent"}, ""},
		{"permanent error archived as it is", withProducer(asynq.MaxRetry(3)), provider.Permanent(errors.New("number not in service")),
			false, asynq.TaskStateArchived, 0, []string{"number not in service"}, "retry budget"},
		{"provider throttling is not a failure", withProducer(asynq.MaxRetry(0)), &provider.ThrottledError{RetryAfter: time.Hour, By: "test provider"},
			false, asynq.TaskStateRetry, 0, []string{"throttled by test provider"}, "retry budget"},
		{"wrapped provider throttling is not a failure", withProducer(asynq.MaxRetry(0)), fmt.Errorf("send: %w", &provider.ThrottledError{RetryAfter: time.Hour, By: "test provider"}),
			false, asynq.TaskStateRetry, 0, []string{"throttled by test provider"}, "retry budget"},
		{"no header: asynq MaxRetry(0)", byHand(map[string]string{producer.HeaderTenant: "acme"}, asynq.MaxRetry(0)), errProviderDown,
			false, asynq.TaskStateArchived, 0, []string{"retry budget", "provider down"}, ""},
		{"a panic is a failure too", withProducer(asynq.MaxRetry(0)), nil,
			true, asynq.TaskStateArchived, 0, []string{"panic"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(func(call) error {
				if tc.panics {
					panic("provider exploded")
				}
				return tc.result
			})
			// The type has a rule: the task is admitted, then fails.
			s := startServer(t, rdb, newThrottle(t, rdb, redistest.Prefix(t), perHour).Middleware(rec))
			info := s.enqueue(t, tc.task(t))
			c := testwait.Receive(t, rec.calls, "handler call")
			f := testwait.Receive(t, s.failures, "ErrorHandler call")
			s.stop()
			if c.ID != info.ID || f.ID != info.ID {
				t.Errorf("handler ran %q, ErrorHandler saw %q; want %q", c.ID, f.ID, info.ID)
			}
			if got, want := errors.Is(f.Err, asynq.SkipRetry), tc.wantState == asynq.TaskStateArchived; got != want {
				t.Errorf("error %q: errors.Is(SkipRetry) = %t, want %t", f.Err, got, want)
			}
			checkRetryBudgetEnd(t, s, rec, info.ID, tc)
		})
	}
}

// checkRetryBudgetEnd checks, once s has stopped, the final state of task
// id, that the handler ran it only once, and the queue's failure count.
func checkRetryBudgetEnd(t *testing.T, s *server, rec *recorder, id string, tc retryBudgetCase) {
	t.Helper()
	got := s.info(t, id)
	if got.State != tc.wantState {
		t.Errorf("state = %v, want %v", got.State, tc.wantState)
	}
	if got.Retried != tc.wantRetried {
		t.Errorf("Retried = %d, want %d", got.Retried, tc.wantRetried)
	}
	for _, want := range tc.wantErrIn {
		if !strings.Contains(got.LastErr, want) {
			t.Errorf("LastErr = %q, want it to contain %q", got.LastErr, want)
		}
	}
	if tc.wantErrOut != "" && strings.Contains(got.LastErr, tc.wantErrOut) {
		t.Errorf("LastErr = %q, want it not to contain %q", got.LastErr, tc.wantErrOut)
	}
	if calls := testwait.Drain(rec.calls); len(calls) > 0 {
		t.Errorf("handler ran %d more times", len(calls))
	}
	wantFailed := 1
	if provider.IsThrottled(tc.result) {
		wantFailed = 0
	}
	if got, want := s.queueInfo(t).FailedTotal, wantFailed; got != want {
		t.Errorf("queue counts %d failures, want %d", got, want)
	}
}

// TestMiddlewareRetryBudgetSpent: a task with a budget of 1 is retried once
// after a failure, then archived after the second.
func TestMiddlewareRetryBudgetSpent(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	rec := newRecorder(func(call) error { return errProviderDown })
	s := startServer(t, rdb, newThrottle(t, rdb, redistest.Prefix(t), "tasks: {}\n").Middleware(rec))
	info := s.enqueue(t, smsTask(t, "acme", asynq.MaxRetry(1)))

	if c := testwait.Receive(t, rec.calls, "first run"); c.Retried != 0 {
		t.Errorf("first run: Retried = %d, want 0", c.Retried)
	}
	testwait.Receive(t, s.failures, "first failure")
	testwait.Eventually(t, func() (bool, string) {
		got := s.info(t, info.ID)
		return got.State == asynq.TaskStateRetry, "in state " + got.State.String()
	})
	if got := s.info(t, info.ID); got.Retried != 1 {
		t.Errorf("after the first failure: Retried = %d, want 1", got.Retried)
	}
	// asynq's backoff would bring it back in 15 s or more: run it now.
	if err := s.inspector.RunTask(s.queue, info.ID); err != nil {
		t.Fatalf("RunTask: %v", err)
	}
	if c := testwait.Receive(t, rec.calls, "second run"); c.Retried != 1 {
		t.Errorf("second run: Retried = %d, want 1", c.Retried)
	}
	f := testwait.Receive(t, s.failures, "second failure")
	s.stop()
	if !errors.Is(f.Err, asynq.SkipRetry) || !errors.Is(f.Err, errProviderDown) {
		t.Errorf("second failure %q, want SkipRetry wrapping the provider's error", f.Err)
	}
	got := s.info(t, info.ID)
	if got.State != asynq.TaskStateArchived {
		t.Errorf("state = %v, want archived", got.State)
	}
	if want := "retry budget of 1 spent: provider down"; !strings.Contains(got.LastErr, want) {
		t.Errorf("LastErr = %q, want it to contain %q", got.LastErr, want)
	}
	records := s.logs.JSONLines(t)
	if len(records) != 2 {
		t.Fatalf("%d log records, want 2: %v", len(records), records)
	}
	for i, want := range []struct {
		level, msg string
	}{{"WARN", "task failed; will retry"}, {"ERROR", "task archived"}} {
		if records[i]["level"] != want.level || records[i]["msg"] != want.msg || records[i]["task"] != info.ID {
			t.Errorf("log record %d = %v, want level %s, msg %q, task %s", i, records[i], want.level, want.msg, info.ID)
		}
	}
}

// TestMiddlewareUnthrottledType: a task type with no rules runs at once,
// whatever the other types' limits, and the limiter counts nothing.
func TestMiddlewareUnthrottledType(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	cases := []struct {
		name     string
		policies string
	}{
		{"no rules at all", "tasks: {}\n"},
		{"rules for another type", `
extra_task_types: [push:send]
tasks:
  email:send:
    - {name: per-hour, scope: tenant, limit: 1, window: 1h}
  push:send:
    - {name: per-hour, scope: global, limit: 1, window: 1h}
`},
		{"an empty list of rules", "tasks:\n  sms:send: []\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := redistest.Prefix(t)
			rec := newRecorder(nil)
			s := startServer(t, rdb, newThrottle(t, rdb, prefix, tc.policies).Middleware(rec))
			const n = 5
			for range n {
				s.enqueue(t, smsTask(t, "acme", asynq.MaxRetry(0)))
			}
			for range n {
				testwait.Receive(t, rec.calls, "handler call")
			}
			s.stop()
			if f := testwait.Drain(s.failures); len(f) > 0 {
				t.Errorf("%d ErrorHandler calls, the first %v", len(f), f[0].Err)
			}
			if keys := redistest.Keys(t, rdb, prefix); len(keys) > 0 {
				t.Errorf("the limiter wrote %q", keys)
			}
		})
	}
}

// TestMiddlewareLimiterUnreachable: when the limiter's Redis does not
// answer, a throttled type's task waits without spending its budget
// (FailClosed, the default) or runs (FailOpen); an unthrottled type's task
// runs either way.
func TestMiddlewareLimiterUnreachable(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	dead, down := unreachableRedis(t)
	p, err := policies.Parse("inline", []byte(perHour))
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name    string
		mode    throttle.FailureMode
		wantRun bool // whether the SMS task runs
	}{
		{"fail closed", throttle.FailClosed, false},
		{"fail open", throttle.FailOpen, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr, err := worker.NewThrottle(throttle.NewLimiter(down), policies.Static(p), &worker.ThrottleConfig{
				FailureMode:              tc.mode,
				LimiterRetry:             time.Hour, // one denial, not one a second
				DelayedTaskCheckInterval: serverCheckInterval,
				Logger:                   slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder(nil)
			s := startServer(t, rdb, tr.Middleware(rec))
			sms := s.enqueue(t, smsTask(t, "acme", asynq.MaxRetry(0)))
			email := s.enqueue(t, emailTask(t, "acme", asynq.MaxRetry(0)))

			ran := map[string]bool{}
			ran[testwait.Receive(t, rec.calls, "handler call").ID] = true
			if tc.wantRun {
				ran[testwait.Receive(t, rec.calls, "handler call").ID] = true
				s.stop()
				if f := testwait.Drain(s.failures); len(f) > 0 {
					t.Errorf("%d ErrorHandler calls, the first %v", len(f), f[0].Err)
				}
			} else {
				f := testwait.Receive(t, s.failures, "ErrorHandler call")
				s.stop()
				checkLimiterDownDenial(t, s, f, sms.ID, dead)
			}
			if calls := testwait.Drain(rec.calls); len(calls) > 0 {
				t.Errorf("handler ran %d more times, the first %s", len(calls), calls[0].Type)
			}
			if !ran[email.ID] {
				t.Errorf("the email task, of a type without rules, did not run")
			}
			if got, want := ran[sms.ID], tc.wantRun; got != want {
				t.Errorf("SMS task ran: %t, want %t", got, want)
			}
		})
	}
}

// unreachableRedis returns a loopback address where nothing listens, and a
// client for it that fails at once: no retries, a one-second dial timeout.
func unreachableRedis(t *testing.T) (addr string, c *redis.Client) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	l.Close()
	c = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return addr, c
}

// checkLimiterDownDenial checks that f, the one ErrorHandler call, denied
// task smsID because the limiter at dead failed, and that the task waits in
// the retry set without spending its budget.
func checkLimiterDownDenial(t *testing.T, s *server, f failure, smsID, dead string) {
	t.Helper()
	if f.ID != smsID {
		t.Errorf("ErrorHandler saw task %s, want the SMS task %s", f.ID, smsID)
	}
	te, ok := errors.AsType[*provider.ThrottledError](f.Err)
	if !ok {
		t.Fatalf("error %q is not a *ThrottledError", f.Err)
	}
	if got, want := te.By, "limiter unavailable"; got != want {
		t.Errorf("By = %q, want %q", got, want)
	}
	if te.Err == nil || !strings.Contains(te.Err.Error(), dead) {
		t.Errorf("Err = %v, want the Redis error naming %s", te.Err, dead)
	}
	got := s.info(t, smsID)
	if got.State != asynq.TaskStateRetry || got.Retried != 0 {
		t.Errorf("SMS task: state %v, Retried %d; want retry, 0", got.State, got.Retried)
	}
}

// TestMiddlewareQuotaSpentOnAdmission: a task that fails after admission
// has used its slot.
func TestMiddlewareQuotaSpentOnAdmission(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	rec := newRecorder(func(call) error { return errProviderDown })
	s := startServer(t, rdb, newThrottle(t, rdb, redistest.Prefix(t), perHour).Middleware(rec))
	first := s.enqueue(t, smsTask(t, "acme", asynq.MaxRetry(3)))
	testwait.Receive(t, rec.calls, "handler call")
	if f := testwait.Receive(t, s.failures, "first failure"); f.ID != first.ID || provider.IsThrottled(f.Err) {
		t.Fatalf("first failure: task %s, %v; want task %s failing", f.ID, f.Err, first.ID)
	}
	second := s.enqueue(t, smsTask(t, "acme", asynq.MaxRetry(3)))
	f := testwait.Receive(t, s.failures, "second failure")
	s.stop()
	if f.ID != second.ID || !provider.IsThrottled(f.Err) {
		t.Errorf("second failure: task %s, %v; want task %s throttled", f.ID, f.Err, second.ID)
	}
	if calls := testwait.Drain(rec.calls); len(calls) > 0 {
		t.Errorf("handler ran %d more times", len(calls))
	}
}

func TestNewThrottleRejects(t *testing.T) {
	t.Parallel()
	p, err := policies.Parse("inline", []byte(perHour))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialed
	t.Cleanup(func() { _ = rdb.Close() })
	limiter := throttle.NewLimiter(rdb)
	cases := []struct {
		name       string
		limiter    *throttle.Limiter
		policyFile *policies.File
	}{
		{"no limiter", nil, policies.Static(p)},
		{"no policy file", limiter, nil},
		{"no policies", limiter, policies.Static(nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr, err := worker.NewThrottle(tc.limiter, tc.policyFile, nil)
			if err == nil {
				t.Fatalf("NewThrottle = %v, want an error", tr)
			}
			if tr != nil {
				t.Errorf("NewThrottle returned a Throttle with its error")
			}
		})
	}
}

// TestErrorHandler: throttled tasks are logged at debug level, archived ones
// at error, failures to retry at warn.
func TestErrorHandler(t *testing.T) {
	t.Parallel()
	throttled := &provider.ThrottledError{RetryAfter: 2 * time.Second, By: "rule per-second"}
	cases := []struct {
		name      string
		err       error
		wantLevel string
		wantMsg   string
	}{
		{"throttled", throttled, "DEBUG", "task throttled"},
		{"throttled, wrapped", fmt.Errorf("send: %w", throttled), "DEBUG", "task throttled"},
		{"archived", provider.Permanent(errors.New("number not in service")), "ERROR", "task archived"},
		{"archived, budget spent", fmt.Errorf("%w: retry budget of 0 spent: %w", asynq.SkipRetry, errProviderDown), "ERROR", "task archived"},
		{"failed", errProviderDown, "WARN", "task failed; will retry"},
		{"failed, wrapped", fmt.Errorf("webhook: %w", errProviderDown), "WARN", "task failed; will retry"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf syncbuf.Buffer
			h := worker.ErrorHandler(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
			h.HandleError(context.Background(), smsTask(t, "acme"), tc.err)
			records := buf.JSONLines(t)
			if len(records) != 1 {
				t.Fatalf("%d log records, want 1: %v", len(records), records)
			}
			r := records[0]
			want := map[string]any{
				"level": tc.wantLevel, "msg": tc.wantMsg,
				"task": "", "type": producer.TypeSMS, "tenant": "acme", "err": tc.err.Error(),
			}
			if tc.wantLevel == "WARN" {
				want["retried"] = float64(0)
			}
			if diff := cmp.Diff(want, r, ignoreTime); diff != "" {
				t.Errorf("log record (-want +got):\n%s", diff)
			}
		})
	}
}
