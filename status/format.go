package status

import (
	"strconv"
	"time"
)

// backIn says when a task due at returns: "in 3s", or "due" once its
// time has passed (asynq moves it at its next check).
func backIn(at, now time.Time) string {
	if !at.After(now) {
		return "due"
	}
	return "in " + fmtDuration(at.Sub(now))
}

// ago says how long before now t was, to the second: "12s ago".
func ago(t, now time.Time) string {
	return fmtDuration(now.Sub(t).Truncate(time.Second)) + " ago"
}

// fmtDuration writes d shortly: "350ms", "2.4s", "1m30s", "59m58s".
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// fmtRate writes a rate a second: "0", "0.4/s", "12/s".
func fmtRate(r float64) string {
	switch {
	case r == 0:
		return "0"
	case r < 10:
		return strconv.FormatFloat(r, 'f', 1, 64) + "/s"
	}
	return strconv.FormatFloat(r, 'f', 0, 64) + "/s"
}
