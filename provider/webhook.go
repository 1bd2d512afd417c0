package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/producer"
)

// Webhook sends SMS by POSTing JSON {"id", "tenant", "to", "body"} to URL,
// with the header Idempotency-Key set to the task ID and, when Token is
// set, "Authorization: Bearer <Token>".
//
//   - 2xx: sent.
//   - 429: the provider throttled us: a *ThrottledError to come back at its
//     Retry-After (seconds or an HTTP date, at most a year; DefaultProviderRetry
//     without a usable one).
//   - 5xx and network errors: a failure, retried with backoff.
//   - other 4xx: permanent, archived with the provider's message.
//
// Errors and String never show Token, nor the user information or query
// values of URL (https://user:password@host/?key=k becomes
// https://xxxxx@host/?key=xxxxx).
type Webhook struct {
	// URL receives the POSTs. User information in it, if any, is sent as
	// HTTP basic authentication, unless Token is set.
	URL string

	// Token, when not empty, is sent as "Authorization: Bearer <Token>".
	Token string

	// Client makes the requests; nil means a client with a 10 s timeout.
	Client *http.Client
}

var _ SMSProvider = (*Webhook)(nil)

// DefaultProviderRetry is how long a task waits after a 429 without a
// usable Retry-After.
const DefaultProviderRetry = time.Second

var defaultHTTPClient = &http.Client{Timeout: 10 * time.Second}

type webhookBody struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	To     string `json:"to"`
	Body   string `json:"body"`
}

// Validate reports whether w.URL is an http or https URL with a host.
// SendSMS checks the same; call Validate to find a mistake at startup
// rather than at the first message. Its error shows the URL redacted.
func (w *Webhook) Validate() error {
	u, err := url.Parse(w.URL)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // without the URL it quotes whole
		}
		return fmt.Errorf("webhook: URL %q: %v", redactURL(w.URL), err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("webhook: URL %q: want http:// or https:// and a host", redactURL(w.URL))
	}
	return nil
}

// SendSMS posts m to the webhook.
func (w *Webhook) SendSMS(ctx context.Context, m Message[producer.SMS]) error {
	body, err := json.Marshal(webhookBody{ID: m.ID, Tenant: m.Tenant, To: m.Payload.To, Body: m.Payload.Body})
	if err != nil {
		return Permanent(fmt.Errorf("webhook: encode: %w", err))
	}
	if err := w.Validate(); err != nil {
		return Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return Permanent(fmt.Errorf("webhook: %w", w.redactError(err)))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", m.ID)
	if w.Token != "" {
		req.Header.Set("Authorization", "Bearer "+w.Token)
	}
	client := w.Client
	if client == nil {
		client = defaultHTTPClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", w.redactError(err))
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusTooManyRequests:
		wait, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		if !ok {
			wait = DefaultProviderRetry
		}
		return &ThrottledError{RetryAfter: wait, By: "provider 429", Err: providerError(resp, msg), FromProvider: true}
	case code >= 500:
		return fmt.Errorf("webhook: %w", providerError(resp, msg))
	default:
		return Permanent(fmt.Errorf("webhook: %w", providerError(resp, msg)))
	}
}

// String returns "webhook " and the URL with its user information
// redacted, for logs.
func (w *Webhook) String() string { return "webhook " + redactURL(w.URL) }

// redactError returns err with the URL that a *url.Error quotes (net/url
// and net/http quote it whole, or with only the password hidden) replaced
// by the redacted URL. The *url.Error is copied, so errors.Is still finds
// its cause (context.Canceled, a timeout).
func (w *Webhook) redactError(err error) error {
	ue, ok := errors.AsType[*url.Error](err)
	if !ok {
		return err
	}
	redacted := *ue
	redacted.URL = redactURL(w.URL)
	return &redacted
}

// redactURL returns rawURL with its user information, user name and
// password alike, replaced by "xxxxx", and each query value too (an API key
// is often passed as ?api_key=). A URL that does not parse, or an opaque
// one such as "user:password@host", loses everything before its last "@"
// but the scheme, and its whole query.
func redactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	switch {
	case err == nil && u.Opaque == "" && u.User == nil && u.RawQuery == "":
		return rawURL // as written
	case err == nil && u.Opaque == "":
		if u.User != nil {
			u.User = url.User("xxxxx")
		}
		u.RawQuery = redactQuery(u.RawQuery)
		return u.String()
	case !strings.Contains(rawURL, "@") && !strings.Contains(rawURL, "?"):
		return rawURL // as written
	}
	if base, _, ok := strings.Cut(rawURL, "?"); ok {
		rawURL = base + "?xxxxx"
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		scheme, rest = "", rawURL
	} else {
		scheme += "://"
	}
	i := strings.LastIndex(rest, "@")
	switch {
	case i >= 0:
		return scheme + "xxxxx" + rest[i:]
	case strings.Contains(rawURL, "@"): // the "@" is before "://": nothing of it can be shown
		return "xxxxx"
	}
	return rawURL
}

// redactQuery returns the raw query q with each value replaced by "xxxxx",
// its keys kept as written; a parameter without "=" may be a key itself.
func redactQuery(q string) string {
	if q == "" {
		return ""
	}
	params := strings.Split(q, "&")
	for i, p := range params {
		k, _, ok := strings.Cut(p, "=")
		switch {
		case ok:
			params[i] = k + "=xxxxx"
		case p != "":
			params[i] = "xxxxx"
		}
	}
	return strings.Join(params, "&")
}

func providerError(resp *http.Response, msg []byte) error {
	return &StatusError{Code: resp.StatusCode, Status: resp.Status, Text: strings.TrimSpace(string(msg))}
}

// StatusError is a provider's answer to a message it did not take: the
// webhook's HTTP status and the start of the body. The worker's metrics
// count provider responses by its Code's class.
type StatusError struct {
	Code   int    // 429
	Status string // "429 Too Many Requests"
	Text   string // the first 512 bytes of the body, trimmed; may be empty
}

func (e *StatusError) Error() string {
	if e.Text == "" {
		return e.Status
	}
	return e.Status + ": " + e.Text
}

// maxRetryAfter is the longest wait ParseRetryAfter returns: a longer one
// is cut to it. The worker cuts holds far shorter (--max-provider-hold).
const maxRetryAfter = 365 * 24 * time.Hour

// ParseRetryAfter reads an HTTP Retry-After value, delay-seconds or an
// HTTP date, as a wait from now, cut to a year: a provider that asks for
// longer still asks for a long wait, not for the 1 s default. It reports
// false for an empty or unusable value; a date in the past is a wait of 0.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	secs, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err == nil && secs >= 0:
		return min(time.Duration(secs), maxRetryAfter/time.Second) * time.Second, true
	case err == nil:
		return 0, false
	case errors.Is(err, strconv.ErrRange):
		// Digits beyond int64: far more than a year, or a negative value.
		if secs < 0 {
			return 0, false
		}
		return maxRetryAfter, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	wait := at.Sub(now) // saturated, not wrapped, for dates centuries away
	return min(max(0, wait), maxRetryAfter), true
}
