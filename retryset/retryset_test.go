package retryset_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/retryset"
)

// TestThrottledBy: the messages of the ThrottledErrors that the middleware
// and the providers return are told apart from failures, whatever the
// failures say.
func TestThrottledBy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		lastErr string
		by      string
		ok      bool
	}{
		{(&provider.ThrottledError{RetryAfter: 1500 * time.Millisecond, By: "rule tenant-per-second"}).Error(), "rule tenant-per-second", true},
		{(&provider.ThrottledError{RetryAfter: time.Second, By: "limiter unavailable", Err: errors.New("dial tcp: connection refused; back in line")}).Error(), "limiter unavailable", true},
		{(&provider.ThrottledError{RetryAfter: time.Minute, By: "provider 429", Err: errors.New("429 Too Many Requests"), FromProvider: true}).Error(), "provider 429", true},
		{(&provider.ThrottledError{By: "provider hold"}).Error(), "provider hold", true},
		{"provider down: throttled by the carrier", "", false},
		{"Throttled by rule x; back in 1s", "", false},
		{fmt.Errorf("send: %w", &provider.ThrottledError{By: "rule x"}).Error(), "", false}, // not as the middleware returns it
		{"", "", false},
	}
	for _, tc := range cases {
		by, ok := retryset.ThrottledBy(tc.lastErr)
		if by != tc.by || ok != tc.ok {
			t.Errorf("ThrottledBy(%q) = %q, %v; want %q, %v", tc.lastErr, by, ok, tc.by, tc.ok)
		}
	}
}
