package cli

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// TestJSONLogger: durations are text, at any depth, and the rest is as
// slog writes it; the level filters.
func TestJSONLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := JSONLogger(&buf, slog.LevelInfo)
	l.Debug("hidden")
	l.Info("started", "max_hold", 2*time.Second, "decision_timeout", 250*time.Millisecond,
		slog.Group("g", "wait", 1500*time.Microsecond), "concurrency", 10)
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	for key, want := range map[string]any{"msg": "started", "max_hold": "2s", "decision_timeout": "250ms", "concurrency": 10.0} {
		if got[key] != want {
			t.Errorf("%s = %#v, want %#v; line %s", key, got[key], want, buf.String())
		}
	}
	if g, _ := got["g"].(map[string]any); g["wait"] != "1.5ms" {
		t.Errorf("g.wait = %#v, want \"1.5ms\"; line %s", g["wait"], buf.String())
	}
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != 1 {
		t.Errorf("%d lines, want 1 (debug hidden): %s", n, buf.String())
	}
}
