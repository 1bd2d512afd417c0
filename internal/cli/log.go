package cli

import (
	"io"
	"log/slog"
)

// JSONLogger returns the logger of the commands: JSON lines on w at level,
// with durations written as Go writes them ("2s", "250ms") rather than as
// slog's JSON writes them, a count of nanoseconds.
func JSONLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationText}))
}

// durationText makes a duration's value its text.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
