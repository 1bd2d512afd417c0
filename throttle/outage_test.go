package throttle

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/syncbuf"
)

// TestOutage: a run of failures is logged once as it begins, with the
// error and the attributes given, and once as it ends; calls that decide
// while the limiter answers log nothing; concurrent callers still log
// each change once.
func TestOutage(t *testing.T) {
	t.Parallel()
	var logs syncbuf.Buffer
	o := NewOutage(slog.New(slog.NewTextHandler(&logs, nil)), "limiter down", "limiter up")
	boom := errors.New("boom")
	var wg sync.WaitGroup
	for _, err := range []error{nil, nil, boom, boom, nil, nil, boom, nil} {
		for range 8 {
			wg.Go(func() { o.Observe(err, "latency", "5ms") })
		}
		wg.Wait()
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	want := []string{"limiter down", "limiter up", "limiter down", "limiter up"}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), logs.String())
	}
	for i, l := range lines {
		if !strings.Contains(l, `msg="`+want[i]+`"`) {
			t.Errorf("line %d %q, want %q", i+1, l, want[i])
		}
		if want[i] == "limiter down" && !strings.Contains(l, "err=boom latency=5ms") {
			t.Errorf("line %d %q lacks the error and the attributes", i+1, l)
		}
		if want[i] == "limiter up" && !strings.Contains(l, "unavailable_for=") {
			t.Errorf("line %d %q lacks how long the outage lasted", i+1, l)
		}
	}
}
