package httplimit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// Rejection describes a request that the middleware answers itself,
// for Config.Reject.
type Rejection struct {
	// Status is the response's status code: http.StatusBadRequest (no
	// usable key), http.StatusTooManyRequests (denied),
	// http.StatusServiceUnavailable (no decision, FailClosed) or
	// http.StatusInternalServerError (the KeyFunc failed, or the limiter
	// rejected the rules).
	Status int

	// Rule is the name of the rule that denied the request, and Policy its
	// policy (429 only).
	Rule   string
	Policy throttle.Policy

	// RetryAfter is what the Retry-After header says, in whole seconds
	// (429 and 503); 0 otherwise.
	RetryAfter time.Duration

	// Err is the cause: the KeyFunc's error (400, 500) or the limiter's
	// (500, 503); nil for 429.
	Err error
}

// QuotaExceeded is the problem type of a 429 that WriteProblem writes,
// from draft-ietf-httpapi-ratelimit-headers-11, section 5.1.
const QuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// problem is an RFC 9457 problem document.
type problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail,omitempty"`
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
}

// WriteProblem is Config.Reject's default: it writes rej as an RFC 9457
// problem, application/problem+json. A 429 has the type QuotaExceeded and
// lists the rule in "violated-policies"; the others have the type
// "about:blank". The detail of a 400 is the KeyFunc's message (values in
// it cut short); a 500 or 503 says no more than what failed, as the cause
// can name servers and keys: the middleware logs it.
func WriteProblem(w http.ResponseWriter, _ *http.Request, rej Rejection) {
	p := problem{Type: "about:blank", Title: http.StatusText(rej.Status), Status: rej.Status}
	switch rej.Status {
	case http.StatusBadRequest:
		p.Detail = "no usable rate-limit key"
		if rej.Err != nil {
			p.Detail = cut(rej.Err.Error(), 300)
		}
	case http.StatusTooManyRequests:
		p.Type = QuotaExceeded
		p.Detail = fmt.Sprintf("rule %q allows %d requests in %v; retry in %ds", rej.Rule, rej.Policy.Limit, rej.Policy.Window, ceilSeconds(rej.RetryAfter))
		p.ViolatedPolicies = []string{rej.Rule}
	case http.StatusServiceUnavailable:
		p.Detail = "the rate limiter could not decide; retry in " + strconv.FormatInt(ceilSeconds(rej.RetryAfter), 10) + "s"
	case http.StatusInternalServerError:
		p.Detail = "the rate limiter is misconfigured"
	}
	body, err := json.Marshal(p)
	if err != nil {
		// Strings and ints only: cannot happen.
		http.Error(w, p.Title, rej.Status)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(rej.Status)
	_, _ = w.Write(append(body, '\n'))
}

// cut returns s cut to at most n bytes at the start of a UTF-8 character,
// marked with "..." when cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}
