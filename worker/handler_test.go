package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/worker"
)

// fakeSMS is a provider.SMSProvider that records what it is asked to send
// and returns err.
type fakeSMS struct {
	got chan provider.Message[producer.SMS]
	err error
}

func newFakeSMS(err error) *fakeSMS {
	return &fakeSMS{got: make(chan provider.Message[producer.SMS], 10), err: err}
}

func (f *fakeSMS) SendSMS(_ context.Context, m provider.Message[producer.SMS]) error {
	f.got <- m
	return f.err
}

// fakeEmail is a provider.EmailProvider that records what it is asked to
// send and returns err.
type fakeEmail struct {
	got chan provider.Message[producer.Email]
	err error
}

func newFakeEmail(err error) *fakeEmail {
	return &fakeEmail{got: make(chan provider.Message[producer.Email], 10), err: err}
}

func (f *fakeEmail) SendEmail(_ context.Context, m provider.Message[producer.Email]) error {
	f.got <- m
	return f.err
}

// emailTask returns an email:send task for tenant built by the producer.
func emailTask(t *testing.T, tenant string, opts ...asynq.Option) *asynq.Task {
	t.Helper()
	task, err := producer.NewEmailTask(tenant, goodEmail, opts...)
	if err != nil {
		t.Fatalf("NewEmailTask(%q): %v", tenant, err)
	}
	return task
}

// TestHandlerArchives: what no retry can fix is archived (SkipRetry) with
// a clear error, and reaches no provider.
func TestHandlerArchives(t *testing.T) {
	t.Parallel()
	headers := map[string]string{producer.HeaderTenant: "acme", producer.HeaderMaxRetry: "3"}
	byHand := func(typ, payload string) *asynq.Task {
		return asynq.NewTaskWithHeaders(typ, []byte(payload), headers)
	}
	cases := []struct {
		name      string
		task      *asynq.Task
		noSMS     bool // no SMS provider
		noEmail   bool // no email provider
		wantInErr []string
	}{
		{"sms payload not JSON", byHand(producer.TypeSMS, "to=+15551234567"), false, false, []string{"invalid task"}},
		{"sms payload empty", byHand(producer.TypeSMS, ""), false, false, []string{"invalid task"}},
		{"sms payload with an unknown field", byHand(producer.TypeSMS, `{"to":"+15551234567","body":"hi","cc":"x"}`), false, false,
			[]string{"invalid task", "cc"}},
		{"sms with a bad number", byHand(producer.TypeSMS, `{"to":"555-1234","body":"hi"}`), false, false,
			[]string{`to "555-1234"`}},
		{"sms with an empty body", byHand(producer.TypeSMS, `{"to":"+15551234567","body":"  "}`), false, false,
			[]string{"body"}},
		{"email payload not JSON", byHand(producer.TypeEmail, "{"), false, false, []string{"invalid task"}},
		{"email without a subject", byHand(producer.TypeEmail, `{"to":"ada@example.com","body":"hi"}`), false, false,
			[]string{"subject"}},
		{"unknown type", byHand("push:send", `{"to":"x"}`), false, false, []string{`unknown task type "push:send"`}},
		{"empty type", byHand("", `{}`), false, false, []string{`unknown task type ""`}},
		{"no SMS provider", smsTask(t, "acme"), true, false, []string{"no SMS provider configured"}},
		{"no email provider", emailTask(t, "acme"), false, true, []string{"no email provider configured"}},
		{"no SMS provider, bad payload", byHand(producer.TypeSMS, "{"), true, false, []string{"no SMS provider configured"}},
		// Valid JSON padded with spaces: refused for its size, not decoded.
		{"sms payload over MaxPayload", byHand(producer.TypeSMS, oversized(`{"to":"+15551234567","body":"hi"}`)), false, false,
			[]string{fmt.Sprintf("the payload is %d bytes of JSON, more than the limit of %d", producer.MaxPayload+1, producer.MaxPayload)}},
		{"email payload over MaxPayload", byHand(producer.TypeEmail, oversized(`{"to":"ada@example.com","subject":"Hi","body":"hi"}`)), false, false,
			[]string{fmt.Sprintf("the payload is %d bytes of JSON, more than the limit of %d", producer.MaxPayload+1, producer.MaxPayload)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sms, email := newFakeSMS(nil), newFakeEmail(nil)
			var h asynq.Handler
			switch {
			case tc.noSMS:
				h = worker.Handler(nil, email)
			case tc.noEmail:
				h = worker.Handler(sms, nil)
			default:
				h = worker.Handler(sms, email)
			}
			err := h.ProcessTask(context.Background(), tc.task)
			if !errors.Is(err, asynq.SkipRetry) {
				t.Fatalf("ProcessTask = %v, want an error matching SkipRetry", err)
			}
			for _, want := range tc.wantInErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if got := testwait.Drain(sms.got); len(got) > 0 {
				t.Errorf("SMS provider was called: %v", got)
			}
			if got := testwait.Drain(email.got); len(got) > 0 {
				t.Errorf("email provider was called: %v", got)
			}
		})
	}
}

// oversized returns payload followed by spaces, which JSON allows, to
// producer.MaxPayload+1 bytes: a valid payload, but one byte too large.
func oversized(payload string) string {
	return payload + strings.Repeat(" ", producer.MaxPayload+1-len(payload))
}

// TestHandlerSends: a good task reaches its provider with its tenant and
// payload, and the provider's error comes back unchanged, so that a
// ThrottledError or a permanent error keeps its meaning.
func TestHandlerSends(t *testing.T) {
	t.Parallel()
	errDown := errors.New("provider down")
	throttled := &provider.ThrottledError{RetryAfter: 3 * time.Second, By: "provider 429"}
	rejected := provider.Permanent(errors.New("number not in service"))
	cases := []struct {
		name    string
		provErr error
	}{
		{"sent", nil},
		{"provider fails", errDown},
		{"provider throttles", throttled},
		{"provider rejects", rejected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sms, email := newFakeSMS(tc.provErr), newFakeEmail(tc.provErr)
			h := worker.Handler(sms, email)
			ctx := context.Background()

			err := h.ProcessTask(ctx, smsTask(t, "acme"))
			if !errors.Is(err, tc.provErr) || (tc.provErr == nil) != (err == nil) {
				t.Errorf("sms: ProcessTask = %v, want %v", err, tc.provErr)
			}
			wantSMS := provider.Message[producer.SMS]{Tenant: "acme", Payload: goodSMS, Priority: 3}
			if diff := cmp.Diff(wantSMS, testwait.Receive(t, sms.got, "SMS"), ignoreEnqueued); diff != "" {
				t.Errorf("SMS message (-want +got):\n%s", diff)
			}

			err = h.ProcessTask(ctx, emailTask(t, "globex"))
			if !errors.Is(err, tc.provErr) || (tc.provErr == nil) != (err == nil) {
				t.Errorf("email: ProcessTask = %v, want %v", err, tc.provErr)
			}
			wantEmail := provider.Message[producer.Email]{Tenant: "globex", Payload: goodEmail, Priority: 3}
			if diff := cmp.Diff(wantEmail, testwait.Receive(t, email.got, "email"), ignoreEnqueued); diff != "" {
				t.Errorf("email message (-want +got):\n%s", diff)
			}

			if n := len(testwait.Drain(sms.got)) + len(testwait.Drain(email.got)); n > 0 {
				t.Errorf("%d more messages", n)
			}
		})
	}
}

// TestHandlerTaskID runs tasks through a real asynq server: the provider
// gets the task's ID, its idempotency key, from asynq's context.
func TestHandlerTaskID(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	sms, email := newFakeSMS(nil), newFakeEmail(nil)
	s := startServer(t, rdb, worker.Handler(sms, email))

	smsInfo := s.enqueue(t, smsTask(t, "acme"))
	emailInfo := s.enqueue(t, emailTask(t, "globex"), asynq.TaskID("welcome-ada"))

	wantSMS := provider.Message[producer.SMS]{ID: smsInfo.ID, Tenant: "acme", Payload: goodSMS, Priority: 3}
	if diff := cmp.Diff(wantSMS, testwait.Receive(t, sms.got, "SMS"), ignoreEnqueued); diff != "" {
		t.Errorf("SMS message (-want +got):\n%s", diff)
	}
	wantEmail := provider.Message[producer.Email]{ID: emailInfo.ID, Tenant: "globex", Payload: goodEmail, Priority: 3}
	if diff := cmp.Diff(wantEmail, testwait.Receive(t, email.got, "email"), ignoreEnqueued); diff != "" {
		t.Errorf("email message (-want +got):\n%s", diff)
	}
	if got, want := emailInfo.ID, "welcome-ada"; got != want {
		t.Errorf("enqueued email ID = %q, want %q", got, want)
	}
}

// webhookServer is an SMS webhook on loopback that answers 200 and sends
// each request it gets on the channel it returns.
func webhookServer(t *testing.T) (*httptest.Server, <-chan webhookRequest) {
	t.Helper()
	got := make(chan webhookRequest, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := webhookRequest{Key: r.Header.Get("Idempotency-Key")}
		if err := json.NewDecoder(r.Body).Decode(&req.Body); err != nil {
			t.Errorf("webhook: body is not JSON: %v", err)
		}
		got <- req
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// webhookRequest is what webhookServer received.
type webhookRequest struct {
	Key  string // the Idempotency-Key header
	Body map[string]any
}

// TestHandlerWebhookIdempotencyKey: through a real asynq server, the
// webhook's Idempotency-Key is the task's ID, the same on every attempt.
func TestHandlerWebhookIdempotencyKey(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	srv, got := webhookServer(t)
	s := startServer(t, rdb, worker.Handler(&provider.Webhook{URL: srv.URL, Client: srv.Client()}, nil))
	info := s.enqueue(t, smsTask(t, "acme"))
	req := testwait.Receive(t, got, "request")
	if got, want := req.Key, info.ID; got != want {
		t.Errorf("Idempotency-Key = %q, want the task ID %q", got, want)
	}
	if got, want := req.Body["id"], any(info.ID); got != want {
		t.Errorf(`body "id" = %v, want the task ID %q`, got, want)
	}
}

// ignoreTime leaves the "time" of slog records out of comparisons.
var ignoreTime = cmp.FilterPath(func(p cmp.Path) bool {
	mi, ok := p.Last().(cmp.MapIndex)
	return ok && mi.Key().String() == "time"
}, cmp.Ignore())

// ignoreEnqueued leaves out of comparisons the time a message's task was
// enqueued (its producer.HeaderEnqueued), which TestEnqueuedHeader checks.
var ignoreEnqueued = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Enqueued" }, cmp.Ignore())
