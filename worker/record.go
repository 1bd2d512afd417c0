package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle"
)

// The record of admissions (docs/SCALING.md, "The history checker"): at
// debug level, a worker logs each admission, the fair lines' or first come
// first served (--fairness off), with the time its entries stand at by
// Redis's clock and the sliding logs they count in, and each late send it
// restamped. A checker rebuilds every log from these lines and checks
// every window.

// The messages of the record's log lines, at debug level: an admission,
// with "task", "at_us" (Redis time) and "logs" ([]RecordedLog); a late
// send restamped, with "task" and, when it moved entries, "at_us".
const (
	RecordAdmitted  = "admitted"
	RecordRestamped = "restamped a late send"
	recordedLevel   = slog.LevelDebug
)

// RecordedLog is a sliding log an admission counts in, as the record
// names it: the rule's key (the same in every shard), its limit, and its
// window in µs, the margin included.
type RecordedLog struct {
	Key    string `json:"key"`
	Limit  int    `json:"limit"`
	Window int64  `json:"window_us"`
	Cost   int    `json:"cost"`
}

// recordedLogs are the sliding logs of applied, as the record names them.
func recordedLogs(applied []policies.Applied) []RecordedLog {
	var logs []RecordedLog
	for _, a := range applied {
		if a.Check.Policy.Algorithm.String() == throttle.SlidingLog.String() {
			logs = append(logs, RecordedLog{Key: a.Check.Key, Limit: a.Check.Policy.Limit,
				Window: a.Check.Policy.Window.Microseconds(), Cost: max(a.Check.Cost, 1)})
		}
	}
	return logs
}

// recordAdmission logs task id's admission at `at` (Redis time) in the
// sliding logs of applied, when the logger records debug lines.
func recordAdmission(logger *slog.Logger, id string, at time.Time, applied []policies.Applied) {
	if at.IsZero() || !logger.Enabled(context.Background(), recordedLevel) {
		return
	}
	logger.Debug(RecordAdmitted, "task", id, "at_us", at.UnixMicro(), "logs", recordedLogs(applied))
}

// recordRestamp logs that task id's latest admission now stands at `at`
// (Redis time), or that it is in no sliding log (the zero time).
func recordRestamp(logger *slog.Logger, id string, late time.Duration, at time.Time) {
	if at.IsZero() {
		logger.Debug(RecordRestamped, "task", id, "late", late)
		return
	}
	logger.Debug(RecordRestamped, "task", id, "late", late, "at_us", at.UnixMicro())
}
