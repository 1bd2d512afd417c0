package provider_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/provider"
)

// TestThrottledError: the message that the worker's retry set reads back
// ("throttled by <By>; back in <RetryAfter>", then the cause), the cause
// found through it, and IsThrottled through wrapping.
func TestThrottledError(t *testing.T) {
	t.Parallel()
	errDial := errors.New("dial tcp: connection refused")
	cases := []struct {
		name    string
		err     *provider.ThrottledError
		wantMsg string
	}{
		{"a rule", &provider.ThrottledError{RetryAfter: 1500 * time.Millisecond, By: "rule tenant-per-second"},
			"throttled by rule tenant-per-second; back in 1.5s"},
		{"rounded to the millisecond", &provider.ThrottledError{RetryAfter: 2400400 * time.Microsecond, By: "rule r"},
			"throttled by rule r; back in 2.4s"},
		{"with a cause", &provider.ThrottledError{RetryAfter: time.Second, By: "limiter unavailable", Err: errDial},
			"throttled by limiter unavailable; back in 1s: dial tcp: connection refused"},
		{"zero", &provider.ThrottledError{}, "throttled by ; back in 0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got, want := tc.err.Error(), tc.wantMsg; got != want {
				t.Errorf("Error() = %q, want %q", got, want)
			}
			if got, want := errors.Unwrap(tc.err), tc.err.Err; got != want {
				t.Errorf("Unwrap() = %v, want %v", got, want)
			}
			if !provider.IsThrottled(tc.err) {
				t.Errorf("IsThrottled(%q) = false, want true", tc.err)
			}
			if !provider.IsThrottled(fmt.Errorf("send: %w", tc.err)) {
				t.Errorf("IsThrottled(wrapped %q) = false, want true", tc.err)
			}
		})
	}
	for _, err := range []error{nil, errDial, context.Canceled, provider.Permanent(errDial)} {
		if provider.IsThrottled(err) {
			t.Errorf("IsThrottled(%v) = true, want false", err)
		}
	}
}

func TestPermanent(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	skip := fmt.Errorf("%w: bad number", asynq.SkipRetry)
	cases := []struct {
		name    string
		err     error
		wantMsg string // "" for a nil error
	}{
		{"nil", nil, ""},
		{"plain error", errBoom, "skip retry for the task: boom"},
		{"wrapped error", fmt.Errorf("webhook: %w", errBoom), "skip retry for the task: webhook: boom"},
		{"already permanent", skip, "skip retry for the task: bad number"},
		{"SkipRetry itself", asynq.SkipRetry, "skip retry for the task"},
		{"permanent twice", provider.Permanent(errBoom), "skip retry for the task: boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := provider.Permanent(tc.err)
			if tc.wantMsg == "" {
				if got != nil {
					t.Fatalf("Permanent(nil) = %v, want nil", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("Permanent(%v) = nil", tc.err)
			}
			if got, want := got.Error(), tc.wantMsg; got != want {
				t.Errorf("Permanent(%v) = %q, want %q", tc.err, got, want)
			}
			if !errors.Is(got, asynq.SkipRetry) {
				t.Errorf("Permanent(%v) does not match SkipRetry", tc.err)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("Permanent(%v) does not match its cause", tc.err)
			}
			if again := provider.Permanent(got); again != got {
				t.Errorf("Permanent(Permanent(%v)) = %q, want the same error %q", tc.err, again, got)
			}
		})
	}
}
