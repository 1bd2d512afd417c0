// Package httplimit is net/http middleware that holds API requests to
// Sluice's limiter: the same exact sliding-window log in Redis, and the
// same rules, as the workers that send SMS and email.
//
// For each request a KeyFunc names who is asking (a tenant, an API key, a
// client address), a RuleFunc says which rules apply to that key, and one
// atomic limiter call (throttle.Limiter.AllowMulti) checks them all: the
// request is served only if every rule allows, and then counts against
// every rule; a denied request counts against none.
//
//	l := throttle.NewLimiter(rdb)
//	rules, err := httplimit.Limits(httplimit.Limit{Name: "per-key", Policy: throttle.PerMinute(100)})
//	m, err := httplimit.New(l, httplimit.Hashed(httplimit.Header("X-API-Key")), rules, nil)
//	http.ListenAndServe(addr, m.Handler(mux))
//
// A policies file drives it through policies.HTTPRules, which lives in
// package policies (it imports this package, not the other way round), so
// that this package knows nothing of the file's format.
//
// # Responses
//
//   - A request without a usable key gets 400 (its KeyFunc's error wraps
//     ErrBadKey); a KeyFunc that fails otherwise, 500.
//   - A denied request gets 429 with Retry-After: the limiter's exact
//     RetryAfter in whole seconds, rounded up.
//   - When the limiter cannot decide within Config.DecisionTimeout (Redis
//     down or slow), FailClosed, the default, answers 503 with Retry-After;
//     FailOpen serves the request.
//   - Rules the limiter rejects (a bad policy, say) are a configuration
//     error: 500, logged, whatever the FailureMode.
//
// Config.Reject writes those responses; the default, WriteProblem, writes
// an RFC 9457 problem (application/problem+json).
//
// # Headers
//
// Every response to a limited request carries the fields of
// draft-ietf-httpapi-ratelimit-headers-11 (RateLimit header fields for
// HTTP, 23 May 2026):
//
//	RateLimit-Policy: "per-key";q=100;w=60
//	RateLimit: "per-key";r=42;t=60
//
// RateLimit-Policy lists every rule that applied: q is its limit and w its
// window in seconds, rounded to the nearest (a window under half a second
// has no w). RateLimit reports one rule, the one closest to its limit:
// the rule that denied the request, else the one with the fewest requests
// remaining (ties: the longer ResetAfter). r is what remains of it; t is
// the limiter's ResetAfter when allowed (the time until its window is
// empty, by which the whole quota is back; a sliding window frees
// slots one by one before that) and, when denied, the same number of
// seconds as Retry-After, as the draft asks (Retry-After no earlier than
// the end of t). No partition key (pk) is sent: keys may be secrets.
// Config.LegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset (q, r and t of the same rule; Reset in seconds from
// now, not a timestamp) for older clients. After a failed decision only
// RateLimit-Policy is sent; a request no rule applies to gets none.
package httplimit
