package throttle

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// scriptReply reads the decision script's reply as integers (see
// lua/decide.lua); a single integer comes back as an array of one.
func scriptReply(cmd *redis.Cmd) ([]int64, error) {
	v, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	if one, ok := v.(int64); ok {
		return []int64{one}, nil
	}
	return cmd.Int64Slice()
}

// admitted turns the short reply of an admission, the count of each check
// after it and its time, into the full reply: each check allowed, with no
// retry-after and a reset-after of one window (the script replies short
// only when no check holds a place ahead of now, so the newest member of
// each is this admission), and the admission's time last.
func admitted(short []int64, checks []Check) []int64 {
	n := len(checks)
	full := make([]int64, 5+4*n)
	full[0] = 1
	for i, c := range checks {
		full[1+4*i] = 1
		full[2+4*i] = short[i]
		full[4+4*i] = c.Policy.Window.Microseconds()
	}
	full[4+4*n] = short[n]
	return full
}

// readReply turns the script's reply into decisions; see lua/decide.lua.
func readReply(reply []int64, checks []Check) MultiDecision {
	md := MultiDecision{Denied: -1, Checks: make([]Decision, len(checks))}
	rep := 0
	for i, c := range checks {
		r := reply[1+4*i : 5+4*i]
		d := Decision{
			Allowed:    r[0] == 1,
			Limit:      c.Policy.Limit,
			Count:      int(r[1]),
			RetryAfter: time.Duration(r[2]) * time.Microsecond,
			ResetAfter: time.Duration(r[3]) * time.Microsecond,
		}
		d.Remaining = max(0, d.Limit-d.Count)
		md.Checks[i] = d

		if !d.Allowed && (md.Denied < 0 || d.RetryAfter > md.Checks[md.Denied].RetryAfter) {
			md.Denied = i
		}
		if d.Remaining < md.Checks[rep].Remaining {
			rep = i
		}
		md.ResetAfter = max(md.ResetAfter, d.ResetAfter)
	}
	if md.Denied >= 0 {
		rep = md.Denied
	}
	md.Allowed = reply[0] == 1
	md.Limit = md.Checks[rep].Limit
	md.Count = md.Checks[rep].Count
	md.RetryAfter = md.Checks[rep].RetryAfter
	md.Remaining = md.Checks[rep].Remaining
	for _, d := range md.Checks {
		md.Remaining = min(md.Remaining, d.Remaining)
	}
	n := len(checks)
	if by := int(reply[4*n+2]); by > 0 {
		// Denied: come back at the request's time, which fits every check
		// (in line mode, the place reserved there).
		md.Denied = by - 1
		md.Limit = md.Checks[md.Denied].Limit
		md.Count = md.Checks[md.Denied].Count
		md.RetryAfter = time.Duration(reply[4*n+1]) * time.Microsecond
	}
	if reply[4*n+3] == 1 {
		// Back before its place: the time left until it.
		md.Early = true
		md.RetryAfter = time.Duration(reply[4*n+1]) * time.Microsecond
	}
	return md
}
