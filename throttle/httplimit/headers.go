package httplimit

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// Header fields the middleware sets.
const (
	// HeaderPolicy lists the rules that apply to the request
	// (draft-ietf-httpapi-ratelimit-headers-11, section 3):
	// "per-key";q=100;w=60.
	HeaderPolicy = "RateLimit-Policy"

	// HeaderLimit is the state of the rule closest to its limit (section 4):
	// "per-key";r=42;t=60.
	HeaderLimit = "RateLimit"

	// HeaderRetryAfter is sent with 429 and 503, in whole seconds.
	HeaderRetryAfter = "Retry-After"

	// HeaderLegacyLimit, HeaderLegacyRemaining and HeaderLegacyReset are
	// the older, unstandardised fields that Config.LegacyHeaders adds: the
	// reported rule's limit, what remains of it, and the seconds until t.
	HeaderLegacyLimit     = "X-RateLimit-Limit"
	HeaderLegacyRemaining = "X-RateLimit-Remaining"
	HeaderLegacyReset     = "X-RateLimit-Reset"
)

// validName reports whether name can be sent as a Structured Fields
// string (RFC 9651, section 3.3.3): printable ASCII, and not empty.
func validName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// sfString serializes a valid name as a Structured Fields string.
func sfString(name string) string {
	var b strings.Builder
	b.Grow(len(name) + 2)
	b.WriteByte('"')
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(name[i])
	}
	b.WriteByte('"')
	return b.String()
}

// policyField is the RateLimit-Policy value of rules: each rule's name,
// its limit as q, and its window in seconds, rounded to the nearest, as w
// (none under half a second: w must be at least 1).
func policyField(rules []Rule) string {
	var b strings.Builder
	for i, r := range rules {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(sfString(r.Name))
		b.WriteString(";q=")
		b.WriteString(strconv.Itoa(r.Check.Policy.Limit))
		if w := (r.Check.Policy.Window + time.Second/2) / time.Second; w > 0 {
			b.WriteString(";w=")
			b.WriteString(strconv.FormatInt(int64(w), 10))
		}
	}
	return b.String()
}

// report returns the index of the check the RateLimit field reports: the
// one that denied, or else the one with the fewest units remaining, and
// of those the one whose window empties last.
func report(md throttle.MultiDecision) int {
	if !md.Allowed && md.Denied >= 0 && md.Denied < len(md.Checks) {
		return md.Denied
	}
	best := 0
	for i, d := range md.Checks {
		b := md.Checks[best]
		if d.Remaining < b.Remaining || d.Remaining == b.Remaining && d.ResetAfter > b.ResetAfter {
			best = i
		}
	}
	return best
}

// ceilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// setLimit sets the RateLimit field, and the legacy ones when asked, for
// the reported rule: remaining units r, and t seconds.
func setLimit(h http.Header, name string, limit, remaining int, t int64, legacy bool) {
	ts := strconv.FormatInt(t, 10)
	h.Set(HeaderLimit, sfString(name)+";r="+strconv.Itoa(remaining)+";t="+ts)
	if legacy {
		h.Set(HeaderLegacyLimit, strconv.Itoa(limit))
		h.Set(HeaderLegacyRemaining, strconv.Itoa(remaining))
		h.Set(HeaderLegacyReset, ts)
	}
}
