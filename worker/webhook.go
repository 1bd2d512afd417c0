package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/producer"
)

// Webhook sends SMS by POSTing JSON {"id", "tenant", "to", "body"} to URL,
// with the header Idempotency-Key set to the task ID.
//
//   - 2xx: sent.
//   - 429: the provider throttled us: a *ThrottledError to come back at its
//     Retry-After (seconds or an HTTP date; DefaultProviderRetry without a
//     usable one, or with one more than a year away).
//   - 5xx and network errors: a failure, retried with backoff.
//   - other 4xx: permanent, archived with the provider's message.
type Webhook struct {
	// URL receives the POSTs.
	URL string

	// Client makes the requests; nil means a client with a 10 s timeout.
	Client *http.Client
}

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

// SendSMS posts m to the webhook.
func (w *Webhook) SendSMS(ctx context.Context, m Message[producer.SMS]) error {
	body, err := json.Marshal(webhookBody{ID: m.ID, Tenant: m.Tenant, To: m.Payload.To, Body: m.Payload.Body})
	if err != nil {
		return Permanent(fmt.Errorf("webhook: encode: %w", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return Permanent(fmt.Errorf("webhook: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", m.ID)
	client := w.Client
	if client == nil {
		client = defaultHTTPClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
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

func providerError(resp *http.Response, msg []byte) error {
	text := strings.TrimSpace(string(msg))
	if text == "" {
		return errors.New(resp.Status)
	}
	return fmt.Errorf("%s: %s", resp.Status, text)
}

// maxRetryAfter is the longest wait ParseRetryAfter accepts: a provider
// that asks for more is not asking for a wait anyone can honour.
const maxRetryAfter = 365 * 24 * time.Hour

// ParseRetryAfter reads an HTTP Retry-After value, delay-seconds or an
// HTTP date, as a wait from now. It reports false for an empty or unusable
// value, and for a wait of more than a year; a date in the past is a wait
// of 0.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 || secs > int64(maxRetryAfter/time.Second) {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	wait := at.Sub(now) // saturated, not wrapped, for dates centuries away
	if wait > maxRetryAfter {
		return 0, false
	}
	return max(0, wait), true
}
