package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	const year = 365 * 24 * time.Hour
	cases := []struct {
		name   string
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"seconds", "120", 2 * time.Minute, true},
		{"one second", "1", time.Second, true},
		{"zero", "0", 0, true},
		{"leading zeros", "007", 7 * time.Second, true},
		{"spaces around", "  30 \t", 30 * time.Second, true},
		{"a year", "31536000", year, true},
		{"more than a year, cut to a year", "31536001", year, true},
		{"347 days, as one provider sent", "30000000", 30000000 * time.Second, true},
		{"int64's largest", "9223372036854775807", year, true},
		{"overflows int64", "99999999999999999999", year, true},
		{"negative", "-1", 0, false},
		{"negative beyond int64", "-99999999999999999999", 0, false},
		{"fraction", "1.5", 0, false},
		{"unit", "10s", 0, false},
		{"IMF-fixdate in the future", "Wed, 04 Mar 2026 05:07:37 GMT", 90 * time.Second, true},
		{"RFC 850 date", "Wednesday, 04-Mar-26 05:07:37 GMT", 90 * time.Second, true},
		{"asctime date", "Wed Mar  4 05:07:37 2026", 90 * time.Second, true},
		{"date now", "Wed, 04 Mar 2026 05:06:07 GMT", 0, true},
		{"date a year ahead", "Thu, 04 Mar 2027 05:06:07 GMT", year, true},
		{"date more than a year ahead", "Thu, 04 Mar 2027 05:06:08 GMT", year, true},
		{"date centuries ahead", "Fri, 31 Dec 9999 23:59:59 GMT", year, true},
		{"date in the past", "Wed, 04 Mar 2026 05:00:00 GMT", 0, true},
		{"date long ago", "Thu, 01 Jan 1970 00:00:00 GMT", 0, true},
		{"date in another zone", "Wed, 04 Mar 2026 05:07:37 PST", 0, false},
		{"empty", "", 0, false},
		{"spaces", "   ", 0, false},
		{"garbage", "soon", 0, false},
		{"date garbage", "Wed, 32 Mar 2026 05:07:37 GMT", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := provider.ParseRetryAfter(tc.value, now)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("ParseRetryAfter(%q) = %v, %t; want %v, %t", tc.value, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// FuzzParseRetryAfter checks that ParseRetryAfter never panics, and that
// its wait is never negative and never more than a year, from any clock:
// delay-seconds as written, an HTTP date as the time until it (0 once
// past), each cut to a year; anything else unusable (0, false).
func FuzzParseRetryAfter(f *testing.F) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC).UnixNano()
	for _, v := range []string{
		"", "0", "120", " 30\t", "007", "-1", "1.5", "10s", "31536000", "31536001", "99999999999999999999",
		"-99999999999999999999", "+5", "0x10",
		"Wed, 04 Mar 2026 05:07:37 GMT", "Wednesday, 04-Mar-26 05:07:37 GMT", "Wed Mar  4 05:07:37 2026",
		"Thu, 01 Jan 1970 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "Wed, 04 Mar 2026 05:07:37 PST", "soon",
	} {
		f.Add(v, now)
	}
	f.Add("Fri, 31 Dec 9999 23:59:59 GMT", int64(math.MinInt64))
	f.Add("Mon, 01 Jan 0001 00:00:00 GMT", int64(math.MaxInt64))
	const year = 365 * 24 * time.Hour
	f.Fuzz(func(t *testing.T, v string, nowNanos int64) {
		now := time.Unix(0, nowNanos)
		got, ok := provider.ParseRetryAfter(v, now)
		if got < 0 || got > year || !ok && got != 0 {
			t.Fatalf("ParseRetryAfter(%q, %v) = %v, %t; want 0 to a year, or 0 and false", v, now, got, ok)
		}
		trimmed := strings.TrimSpace(v)
		if secs, err := strconv.ParseInt(trimmed, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			want := min(time.Duration(secs), year/time.Second) * time.Second // ErrRange: secs is int64's bound
			if wantOK := secs >= 0; ok != wantOK || ok && got != want {
				t.Errorf("ParseRetryAfter(%q) = %v, %t; want %v, %t", v, got, ok, want, wantOK)
			}
			return
		}
		at, err := http.ParseTime(trimmed)
		if err != nil {
			if ok {
				t.Errorf("ParseRetryAfter(%q) = %v, %t; want 0, false", v, got, ok)
			}
			return
		}
		if want := min(max(0, at.Sub(now)), year); !ok || got != want {
			t.Errorf("ParseRetryAfter(%q, %v) = %v, %t; want %v, true", v, now, got, ok, want)
		}
	})
}

// request is what a provider received.
type request struct {
	Method      string
	ContentType string
	Key         string // the Idempotency-Key header
	Auth        string // the Authorization header
	Body        map[string]any
}

// webhookServer is an SMS webhook on loopback that records each request and
// answers with reply.
func webhookServer(t *testing.T, reply func(w http.ResponseWriter)) (*httptest.Server, <-chan request) {
	t.Helper()
	got := make(chan request, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("provider: read body: %v", err)
		}
		req := request{Method: r.Method, ContentType: r.Header.Get("Content-Type"), Key: r.Header.Get("Idempotency-Key"), Auth: r.Header.Get("Authorization")}
		if err := json.Unmarshal(data, &req.Body); err != nil {
			t.Errorf("provider: body %q is not JSON: %v", data, err)
		}
		got <- req
		reply(w)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func status(code int, body string, headers ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

var webhookMessage = provider.Message[producer.SMS]{ID: "task-1", Tenant: "acme", Payload: goodSMS}

// TestWebhookRequest: one POST of the message as JSON, keyed by the task ID.
func TestWebhookRequest(t *testing.T) {
	t.Parallel()
	srv, got := webhookServer(t, status(http.StatusOK, "queued"))
	w := &provider.Webhook{URL: srv.URL + "/send", Client: srv.Client()}
	if err := w.SendSMS(context.Background(), webhookMessage); err != nil {
		t.Fatalf("SendSMS: %v", err)
	}
	want := request{
		Method:      http.MethodPost,
		ContentType: "application/json",
		Key:         "task-1",
		Body:        map[string]any{"id": "task-1", "tenant": "acme", "to": goodSMS.To, "body": goodSMS.Body},
	}
	if diff := cmp.Diff(want, testwait.Receive(t, got, "request")); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	if extra := testwait.Drain(got); len(extra) > 0 {
		t.Errorf("%d more requests: %v", len(extra), extra)
	}
}

// TestWebhookToken: a Token goes as a bearer token, in place of the basic
// authentication of the URL's user information.
func TestWebhookToken(t *testing.T) {
	t.Parallel()
	srv, got := webhookServer(t, status(http.StatusOK, ""))
	withUser := strings.Replace(srv.URL, "://", "://user:pass@", 1)
	cases := []struct {
		name string
		w    *provider.Webhook
		want string
	}{
		{"token", &provider.Webhook{URL: srv.URL, Token: "t0ken"}, "Bearer t0ken"},
		{"user information", &provider.Webhook{URL: withUser}, "Basic dXNlcjpwYXNz"},
		{"both", &provider.Webhook{URL: withUser, Token: "t0ken"}, "Bearer t0ken"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.w.Client = srv.Client()
			if err := tc.w.SendSMS(context.Background(), webhookMessage); err != nil {
				t.Fatalf("SendSMS: %v", err)
			}
			if got, want := testwait.Receive(t, got, "request").Auth, tc.want; got != want {
				t.Errorf("Authorization = %q, want %q", got, want)
			}
		})
	}
}

// TestWebhookRedacts: neither an error nor String shows the token or the
// URL's user information, whichever way the request fails.
func TestWebhookRedacts(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	failing, _ := webhookServer(t, status(http.StatusInternalServerError, "down"))
	const user, password, token, key = "us3r", "s3cret", "t0ken", "k3y"
	withUser := func(u string) string { return strings.Replace(u, "://", "://"+user+":"+password+"@", 1) }
	cases := []struct {
		name       string
		url        string
		wantString string // String()
	}{
		{"unreachable", withUser(closedURL), "webhook " + strings.Replace(closedURL, "://", "://xxxxx@", 1)},
		{"5xx", withUser(failing.URL), "webhook " + strings.Replace(failing.URL, "://", "://xxxxx@", 1)},
		{"control character", "http://" + user + ":" + password + "@sms.example/\x7f", "webhook http://xxxxx@sms.example/\x7f"},
		{"no scheme", user + ":" + password + "@sms.example/send", "webhook xxxxx@sms.example/send"},
		{"user only", "http://" + password + "@127.0.0.1:1/send", "webhook http://xxxxx@127.0.0.1:1/send"},
		{"query key", closedURL + "/send?api_key=" + key + "&Password=" + key + "&" + key, "webhook " + closedURL + "/send?api_key=xxxxx&Password=xxxxx&xxxxx"},
		{"query key and user", withUser(failing.URL) + "?token=" + key, "webhook " + strings.Replace(failing.URL, "://", "://xxxxx@", 1) + "?token=xxxxx"},
		{"query key, control character", "http://sms.example/\x7f?api_key=" + key, "webhook http://sms.example/\x7f?xxxxx"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := &provider.Webhook{URL: tc.url, Token: token, Client: &http.Client{Timeout: 5 * time.Second}}
			if got := w.String(); got != tc.wantString {
				t.Errorf("String() = %q, want %q", got, tc.wantString)
			}
			err := w.SendSMS(context.Background(), webhookMessage)
			if err == nil {
				t.Fatal("SendSMS = nil, want an error")
			}
			for _, secret := range []string{user, password, token, key} {
				if strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%+v", err), secret) {
					t.Errorf("error %q shows %q", err, secret)
				}
			}
		})
	}
}

// TestWebhookDefaultClient: a Webhook without a Client sends all the same.
func TestWebhookDefaultClient(t *testing.T) {
	t.Parallel()
	srv, got := webhookServer(t, status(http.StatusAccepted, ""))
	w := &provider.Webhook{URL: srv.URL}
	if err := w.SendSMS(context.Background(), webhookMessage); err != nil {
		t.Fatalf("SendSMS: %v", err)
	}
	if got, want := testwait.Receive(t, got, "request").Key, "task-1"; got != want {
		t.Errorf("Idempotency-Key = %q, want %q", got, want)
	}
}

// replyOutcome is what a send makes of a provider's reply.
type replyOutcome int

const (
	replySent replyOutcome = iota
	replyThrottled
	replyRetried
	replyArchived
)

// webhookReplyCase is a provider reply and what the send makes of it.
type webhookReplyCase struct {
	name      string
	reply     func(http.ResponseWriter)
	want      replyOutcome
	wantWait  [2]time.Duration // bounds of RetryAfter, when throttled
	wantInErr []string
}

// webhookReplyCases are the replies of TestWebhookReplies.
func webhookReplyCases() []webhookReplyCase {
	// The HTTP date is in whole seconds: a date d ahead is a wait of d-1s
	// to d.
	dateIn := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(http.TimeFormat) }
	return []webhookReplyCase{
		{"200", status(http.StatusOK, `{"status":"queued"}`), replySent, [2]time.Duration{}, nil},
		{"201", status(http.StatusCreated, ""), replySent, [2]time.Duration{}, nil},
		{"204", status(http.StatusNoContent, ""), replySent, [2]time.Duration{}, nil},
		{"429 with seconds", status(http.StatusTooManyRequests, "slow down", "Retry-After", "7"), replyThrottled,
			[2]time.Duration{7 * time.Second, 7 * time.Second}, []string{"provider 429", "429 Too Many Requests: slow down"}},
		{"429 with zero seconds", status(http.StatusTooManyRequests, "", "Retry-After", "0"), replyThrottled,
			[2]time.Duration{0, 0}, []string{"429 Too Many Requests"}},
		{"429 with an HTTP date", func(w http.ResponseWriter) {
			status(http.StatusTooManyRequests, "slow down", "Retry-After", dateIn(30*time.Second))(w)
		}, replyThrottled, [2]time.Duration{28 * time.Second, 30 * time.Second}, []string{"slow down"}},
		{"429 with a past HTTP date", func(w http.ResponseWriter) {
			status(http.StatusTooManyRequests, "", "Retry-After", dateIn(-time.Hour))(w)
		}, replyThrottled, [2]time.Duration{0, 0}, nil},
		{"429 with more than a year", status(http.StatusTooManyRequests, "", "Retry-After", "40000000"), replyThrottled,
			[2]time.Duration{365 * 24 * time.Hour, 365 * 24 * time.Hour}, nil},
		{"429 without Retry-After", status(http.StatusTooManyRequests, "slow down"), replyThrottled,
			[2]time.Duration{provider.DefaultProviderRetry, provider.DefaultProviderRetry}, []string{"slow down"}},
		{"429 with a bad Retry-After", status(http.StatusTooManyRequests, "", "Retry-After", "soon"), replyThrottled,
			[2]time.Duration{provider.DefaultProviderRetry, provider.DefaultProviderRetry}, nil},
		{"500", status(http.StatusInternalServerError, "database on fire"), replyRetried, [2]time.Duration{},
			[]string{"webhook: ", "500 Internal Server Error: database on fire"}},
		{"502 without a body", status(http.StatusBadGateway, ""), replyRetried, [2]time.Duration{}, []string{"502 Bad Gateway"}},
		{"503", status(http.StatusServiceUnavailable, "maintenance\n", "Retry-After", "60"), replyRetried, [2]time.Duration{},
			[]string{"503 Service Unavailable: maintenance"}},
		{"400", status(http.StatusBadRequest, "  number not in service\n"), replyArchived, [2]time.Duration{},
			[]string{"webhook: ", "400 Bad Request: number not in service"}},
		{"401", status(http.StatusUnauthorized, "bad API key"), replyArchived, [2]time.Duration{}, []string{"401 Unauthorized: bad API key"}},
		{"404 without a body", status(http.StatusNotFound, ""), replyArchived, [2]time.Duration{}, []string{"404 Not Found"}},
		{"422", status(http.StatusUnprocessableEntity, `{"error":"body too long"}`), replyArchived, [2]time.Duration{},
			[]string{`{"error":"body too long"}`}},
		{"long message cut to 512 bytes", status(http.StatusBadRequest, strings.Repeat("x", 600)+"END"), replyArchived, [2]time.Duration{},
			[]string{strings.Repeat("x", 512)}},
	}
}

// TestWebhookReplies maps each kind of provider reply to its outcome: sent,
// throttled (not a failure), retried with backoff, or archived.
func TestWebhookReplies(t *testing.T) {
	t.Parallel()
	for _, tc := range webhookReplyCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, got := webhookServer(t, tc.reply)
			w := &provider.Webhook{URL: srv.URL, Client: srv.Client()}
			err := w.SendSMS(context.Background(), webhookMessage)
			testwait.Receive(t, got, "request")

			if tc.want == replySent {
				if err != nil {
					t.Fatalf("SendSMS = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("SendSMS = nil, want an error")
			}
			for _, want := range tc.wantInErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "END") {
				t.Errorf("error %q holds more than 512 bytes of the reply", err)
			}
			te, isThrottled := errors.AsType[*provider.ThrottledError](err)
			if got, want := isThrottled, tc.want == replyThrottled; got != want {
				t.Errorf("error %q: errors.As(*ThrottledError) = %t, want %t", err, got, want)
			}
			if got, want := errors.Is(err, asynq.SkipRetry), tc.want == replyArchived; got != want {
				t.Errorf("error %q: errors.Is(SkipRetry) = %t, want %t", err, got, want)
			}
			if te == nil {
				return
			}
			if te.RetryAfter < tc.wantWait[0] || te.RetryAfter > tc.wantWait[1] {
				t.Errorf("RetryAfter = %v, want %v to %v", te.RetryAfter, tc.wantWait[0], tc.wantWait[1])
			}
			if got, want := te.By, "provider 429"; got != want {
				t.Errorf("By = %q, want %q", got, want)
			}
			if te.Err == nil {
				t.Error("ThrottledError.Err is nil, want the provider's reply")
			}
		})
	}
}

// TestWebhookUnreachable: network failures are retried with backoff, never
// archived; so is a send cut short by its context (a worker shutting down).
func TestWebhookUnreachable(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body, so that the server notices when the client goes
		// away and cancels r.Context().
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-hang:
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(hang) })

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name   string
		ctx    context.Context
		w      *provider.Webhook
		wantIs error
	}{
		{"server closed", context.Background(), &provider.Webhook{URL: closedURL}, nil},
		{"context cancelled", cancelled, &provider.Webhook{URL: slow.URL, Client: slow.Client()}, context.Canceled},
		{"context deadline", nil, &provider.Webhook{URL: slow.URL, Client: slow.Client()}, context.DeadlineExceeded},
		{"client timeout", context.Background(), &provider.Webhook{URL: slow.URL, Client: &http.Client{Timeout: 50 * time.Millisecond}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := tc.ctx
			if ctx == nil {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
			}
			err := tc.w.SendSMS(ctx, webhookMessage)
			if err == nil {
				t.Fatal("SendSMS = nil, want an error")
			}
			if !strings.HasPrefix(err.Error(), "webhook: ") {
				t.Errorf("error %q does not start with %q", err, "webhook: ")
			}
			if errors.Is(err, asynq.SkipRetry) {
				t.Errorf("error %q matches SkipRetry: the task would be archived", err)
			}
			if provider.IsThrottled(err) {
				t.Errorf("error %q is a ThrottledError", err)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %q does not match %v", err, tc.wantIs)
			}
		})
	}
}

// TestWebhookBadURL: a URL that cannot make a request is permanent.
func TestWebhookBadURL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		url  string
	}{
		{"no scheme separator", "://sms.example"},
		{"control character", "http://sms.example/\x7f\n"},
		{"empty", ""},
		{"other scheme", "ftp://sms.example/send"},
		{"no host", "https:///send"},
		{"relative", "/send"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := &provider.Webhook{URL: tc.url}
			if err := w.Validate(); err == nil || !strings.HasPrefix(err.Error(), "webhook: URL ") {
				t.Errorf("Validate = %v, want an error naming the URL", err)
			}
			err := w.SendSMS(context.Background(), webhookMessage)
			if !errors.Is(err, asynq.SkipRetry) {
				t.Errorf("SendSMS = %v, want an error matching SkipRetry", err)
			}
		})
	}
}
