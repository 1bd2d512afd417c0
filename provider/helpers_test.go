package provider_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/syncbuf"
	"github.com/sluicehq/sluice/producer"
)

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
