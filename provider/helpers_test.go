package provider_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/syncbuf"
	"github.com/sluicehq/sluice/producer"
)

// waitFor is how long a test waits for something to happen before it fails.
const waitFor = 30 * time.Second

// receive returns the next value of ch, or fails t after waitFor.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatalf("no %s within %v", what, waitFor)
		panic("unreachable")
	}
}

// drain returns what ch holds now, without waiting.
func drain[T any](ch <-chan T) []T {
	var out []T
	for {
		select {
		case v := <-ch:
			out = append(out, v)
		default:
			return out
		}
	}
}

var (
	goodSMS   = producer.SMS{To: "+15551234567", Body: "Your code is 123456"}
	goodEmail = producer.Email{To: "ada@example.com", Subject: "Welcome", Body: "Hello Ada", From: "team@example.com"}
)

// logRecords decodes the JSON lines that a slog.JSONHandler wrote to b.
func logRecords(t *testing.T, b *syncbuf.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// ignoreTime leaves the "time" of slog records out of comparisons.
var ignoreTime = cmp.FilterPath(func(p cmp.Path) bool {
	mi, ok := p.Last().(cmp.MapIndex)
	return ok && mi.Key().String() == "time"
}, cmp.Ignore())
