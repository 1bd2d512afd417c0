package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/syncbuf"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/throttle/httplimit"
)

// TestAllowThenDeny: with a limit of 3 a minute, three requests are served
// with the draft's fields and a remaining count that goes 2, 1, 0; the
// fourth is 429 with Retry-After, the same fields, and a problem naming
// the rule. The legacy fields come only when asked for.
func TestAllowThenDeny(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		legacy bool
	}{
		{"draft fields only", false},
		{"with X-RateLimit fields", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, _ := newLimiter(t)
			m := newMiddleware(t, l, httplimit.Header("X-API-Key"),
				limits(t, httplimit.Limit{Name: "per-key", Policy: throttle.PerMinute(3)}),
				&httplimit.Config{LegacyHeaders: tc.legacy})
			srv := serve(t, m)

			for i, wantR := range []int{2, 1, 0} {
				resp := get(t, srv, "/", "X-API-Key", "k1")
				if resp.status != http.StatusOK || resp.body != "served\n" {
					t.Fatalf("request %d: %d %q, want 200 served", i+1, resp.status, resp.body)
				}
				if i == 0 {
					t.Logf("the first response:\n%s", resp.dump)
				}
				if got, want := resp.header.Get(httplimit.HeaderPolicy), `"per-key";q=3;w=60`; got != want {
					t.Errorf("request %d: RateLimit-Policy %q, want %q", i+1, got, want)
				}
				f := rateLimit(t, resp.header)
				if f.name != "per-key" || f.r != wantR || f.t < 59 || f.t > 60 {
					t.Errorf("request %d: RateLimit %+v, want per-key r=%d t=59..60", i+1, f, wantR)
				}
				if resp.header.Get(httplimit.HeaderRetryAfter) != "" {
					t.Errorf("request %d: Retry-After on an allowed request", i+1)
				}
				checkLegacy(t, resp.header, tc.legacy, 3, wantR, f.t)
			}

			resp := get(t, srv, "/", "X-API-Key", "k1")
			if resp.status != http.StatusTooManyRequests {
				t.Fatalf("request 4: %d %q, want 429", resp.status, resp.body)
			}
			t.Logf("the 429:\n%s", resp.dump)
			retry, err := strconv.Atoi(resp.header.Get(httplimit.HeaderRetryAfter))
			if err != nil || retry < 1 || retry > 60 {
				t.Errorf("Retry-After %q, want whole seconds 1..60", resp.header.Get(httplimit.HeaderRetryAfter))
			}
			if got, want := resp.header.Get(httplimit.HeaderPolicy), `"per-key";q=3;w=60`; got != want {
				t.Errorf("429: RateLimit-Policy %q, want %q", got, want)
			}
			if f := rateLimit(t, resp.header); f != (limitField{"per-key", 0, retry}) {
				t.Errorf("429: RateLimit %+v, want per-key r=0 t=%d (the Retry-After)", f, retry)
			}
			checkLegacy(t, resp.header, tc.legacy, 3, 0, retry)
			p := problem(t, resp)
			if p.Type != httplimit.QuotaExceeded || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "per-key" ||
				p.Detail != fmt.Sprintf(`rule "per-key" allows 3 requests in 1m0s; retry in %ds`, retry) {
				t.Errorf("429 problem %+v", p)
			}
		})
	}
}

// checkLegacy checks the X-RateLimit fields: present with these values
// when legacy, absent otherwise.
func checkLegacy(t *testing.T, h http.Header, legacy bool, limit, remaining, reset int) {
	t.Helper()
	got := []string{h.Get(httplimit.HeaderLegacyLimit), h.Get(httplimit.HeaderLegacyRemaining), h.Get(httplimit.HeaderLegacyReset)}
	want := []string{"", "", ""}
	if legacy {
		want = []string{strconv.Itoa(limit), strconv.Itoa(remaining), strconv.Itoa(reset)}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("X-RateLimit-Limit, -Remaining, -Reset = %q, want %q", got, want)
	}
}

// TestKeysIndependent: a key whose window is full does not hold back
// another key.
func TestKeysIndependent(t *testing.T) {
	t.Parallel()
	l, _ := newLimiter(t)
	m := newMiddleware(t, l, httplimit.Header("X-Tenant"),
		limits(t, httplimit.Limit{Name: "tenant", Policy: throttle.PerHour(2)}), nil)
	srv := serve(t, m)

	cases := []struct {
		tenant     string
		wantStatus int
		wantR      int
	}{
		{"acme", http.StatusOK, 1},
		{"acme", http.StatusOK, 0},
		{"acme", http.StatusTooManyRequests, 0},
		{"globex", http.StatusOK, 1},
		{"acme", http.StatusTooManyRequests, 0},
		{"globex", http.StatusOK, 0},
		{"globex", http.StatusTooManyRequests, 0},
	}
	for i, tc := range cases {
		resp := get(t, srv, "/", "X-Tenant", tc.tenant)
		if resp.status != tc.wantStatus {
			t.Fatalf("request %d (%s): %d, want %d", i+1, tc.tenant, resp.status, tc.wantStatus)
		}
		if f := rateLimit(t, resp.header); f.r != tc.wantR {
			t.Errorf("request %d (%s): r=%d, want %d", i+1, tc.tenant, f.r, tc.wantR)
		}
	}
}

// TestSeveralRules: every rule is listed in RateLimit-Policy; RateLimit
// reports the rule closest to its limit (fewest remaining), or the one that
// denied; a denied request counts against no rule.
func TestSeveralRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		limits     []httplimit.Limit
		requests   int
		wantPolicy string
		want       []limitField // RateLimit of each request, t not compared
		wantStatus []int
	}{
		{
			name:       "the short window binds first",
			limits:     []httplimit.Limit{{"burst", throttle.PerMinute(2)}, {"daily", throttle.PerDay(5)}},
			requests:   3,
			wantPolicy: `"burst";q=2;w=60, "daily";q=5;w=86400`,
			want:       []limitField{{"burst", 1, 0}, {"burst", 0, 0}, {"burst", 0, 0}},
			wantStatus: []int{200, 200, 429},
		},
		{
			name:       "the long window binds first",
			limits:     []httplimit.Limit{{"minute", throttle.PerMinute(5)}, {"hour", throttle.PerHour(2)}},
			requests:   3,
			wantPolicy: `"minute";q=5;w=60, "hour";q=2;w=3600`,
			want:       []limitField{{"hour", 1, 0}, {"hour", 0, 0}, {"hour", 0, 0}},
			wantStatus: []int{200, 200, 429},
		},
		{
			name:       "equal remaining: the longer reset",
			limits:     []httplimit.Limit{{"a", throttle.PerMinute(3)}, {"b", throttle.PerHour(3)}},
			requests:   1,
			wantPolicy: `"a";q=3;w=60, "b";q=3;w=3600`,
			want:       []limitField{{"b", 2, 0}},
			wantStatus: []int{200},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, _ := newLimiter(t)
			srv := serve(t, newMiddleware(t, l, httplimit.Header("X-API-Key"), limits(t, tc.limits...), nil))
			for i := range tc.requests {
				resp := get(t, srv, "/", "X-API-Key", "k")
				if resp.status != tc.wantStatus[i] {
					t.Fatalf("request %d: status %d, want %d", i+1, resp.status, tc.wantStatus[i])
				}
				if got := resp.header.Get(httplimit.HeaderPolicy); got != tc.wantPolicy {
					t.Errorf("request %d: RateLimit-Policy %q, want %q", i+1, got, tc.wantPolicy)
				}
				f := rateLimit(t, resp.header)
				f.t = 0
				if f != tc.want[i] {
					t.Errorf("request %d: RateLimit %+v, want %+v", i+1, f, tc.want[i])
				}
			}
		})
	}

	// Denied by one rule, the request took nothing from the other.
	t.Run("a denial counts nowhere", func(t *testing.T) {
		t.Parallel()
		l, prefix := newLimiter(t)
		rules := limits(t, httplimit.Limit{"burst", throttle.PerMinute(1)}, httplimit.Limit{"daily", throttle.PerDay(10)})
		srv := serve(t, newMiddleware(t, l, httplimit.Header("X-API-Key"), rules, nil))
		for range 3 {
			get(t, srv, "/", "X-API-Key", "k")
		}
		d, err := throttle.NewLimiter(redistest.Client(t), throttle.WithPrefix(prefix)).Peek(context.Background(), "http/daily/k", throttle.PerDay(10))
		if err != nil {
			t.Fatal(err)
		}
		if d.Count != 1 {
			t.Errorf("daily window holds %d after 1 allowed and 2 denied requests, want 1", d.Count)
		}
	})
}

// TestWindowField: w is the window in seconds rounded to the nearest, and
// absent under half a second.
func TestWindowField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		window time.Duration
		want   string
	}{
		{400 * time.Millisecond, `"w";q=5`},
		{500 * time.Millisecond, `"w";q=5;w=1`},
		{1050 * time.Millisecond, `"w";q=5;w=1`}, // a policies file's 1s with its 50 ms margin
		{90 * time.Second, `"w";q=5;w=90`},
		{7 * 24 * time.Hour, `"w";q=5;w=604800`},
	}
	for _, tc := range cases {
		t.Run(tc.window.String(), func(t *testing.T) {
			t.Parallel()
			l, _ := newLimiter(t)
			rules := limits(t, httplimit.Limit{Name: "w", Policy: throttle.Policy{Limit: 5, Window: tc.window}})
			resp := get(t, serve(t, newMiddleware(t, l, httplimit.Header("X-API-Key"), rules, nil)), "/", "X-API-Key", "k")
			if got := resp.header.Get(httplimit.HeaderPolicy); got != tc.want {
				t.Errorf("RateLimit-Policy %q, want %q", got, tc.want)
			}
		})
	}
}

// deadAddr returns a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// blackHole returns a loopback address that accepts connections and never
// answers, as a Redis that hangs.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestRedisDown: when the limiter cannot decide, FailClosed (the default)
// answers 503 with Retry-After and FailOpen serves the request; both send
// RateLimit-Policy and no RateLimit, and log the outage once. The decision
// timeout holds even when Redis hangs and the client ignores contexts.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		addr       func(*testing.T) string
		cfg        httplimit.Config
		wantStatus int
		wantRetry  string
	}{
		{"refused, fail closed", deadAddr, httplimit.Config{}, http.StatusServiceUnavailable, "1"},
		{"refused, fail closed, 2.5s retry", deadAddr, httplimit.Config{UnavailableRetryAfter: 2500 * time.Millisecond}, http.StatusServiceUnavailable, "3"},
		{"refused, fail open", deadAddr, httplimit.Config{FailureMode: throttle.FailOpen}, http.StatusOK, ""},
		{"hanging, fail closed", blackHole, httplimit.Config{DecisionTimeout: 100 * time.Millisecond}, http.StatusServiceUnavailable, "1"},
		{"hanging, fail open", blackHole, httplimit.Config{DecisionTimeout: 100 * time.Millisecond, FailureMode: throttle.FailOpen}, http.StatusOK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Timeouts far beyond the decision timeout, and contexts
			// ignored (go-redis's default): the middleware's bound is what
			// answers.
			rdb := redis.NewClient(&redis.Options{Addr: tc.addr(t), MaxRetries: -1,
				DialTimeout: 20 * time.Second, ReadTimeout: 20 * time.Second, WriteTimeout: 20 * time.Second})
			t.Cleanup(func() { _ = rdb.Close() })
			logs := &syncbuf.Buffer{}
			cfg := tc.cfg
			cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
			m := newMiddleware(t, throttle.NewLimiter(rdb), httplimit.Header("X-API-Key"),
				limits(t, httplimit.Limit{Name: "per-key", Policy: throttle.PerMinute(3)}), &cfg)
			srv := serve(t, m)

			for i := range 2 {
				start := time.Now()
				resp := get(t, srv, "/", "X-API-Key", "k")
				if took := time.Since(start); took > 10*time.Second {
					t.Errorf("request %d took %v: the decision timeout did not hold", i+1, took)
				}
				if resp.status != tc.wantStatus {
					t.Fatalf("request %d: %d %q, want %d", i+1, resp.status, resp.body, tc.wantStatus)
				}
				if got := resp.header.Get(httplimit.HeaderRetryAfter); got != tc.wantRetry {
					t.Errorf("request %d: Retry-After %q, want %q", i+1, got, tc.wantRetry)
				}
				if got, want := resp.header.Get(httplimit.HeaderPolicy), `"per-key";q=3;w=60`; got != want {
					t.Errorf("request %d: RateLimit-Policy %q, want %q", i+1, got, want)
				}
				if got := resp.header.Values(httplimit.HeaderLimit); len(got) > 0 {
					t.Errorf("request %d: RateLimit %q without a decision", i+1, got)
				}
				if tc.wantStatus == http.StatusServiceUnavailable {
					if p := problem(t, resp); p.Detail != "the rate limiter could not decide; retry in "+tc.wantRetry+"s" {
						t.Errorf("request %d: problem %+v", i+1, p)
					}
					if strings.Contains(resp.body, "127.0.0.1") {
						t.Errorf("request %d: the 503 shows the Redis address: %q", i+1, resp.body)
					}
				}
			}
			if n := strings.Count(logs.String(), "limiter unavailable"); n != 1 {
				t.Errorf("logged the outage %d times over 2 requests, want once:\n%s", n, logs)
			}
		})
	}
}

// flaky is a Limiter that fails while down is set, then asks the real one.
type flaky struct {
	httplimit.Limiter
	mu   sync.Mutex
	down bool
}

func (f *flaky) AllowMulti(ctx context.Context, checks []throttle.Check) (throttle.MultiDecision, error) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return throttle.MultiDecision{}, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	}
	return f.Limiter.AllowMulti(ctx, checks)
}

// TestRedisComesBack: after an outage the middleware decides again, and
// logs that the limiter is back, once.
func TestRedisComesBack(t *testing.T) {
	t.Parallel()
	l, _ := newLimiter(t)
	f := &flaky{Limiter: l, down: true}
	logs := &syncbuf.Buffer{}
	m := newMiddleware(t, f, httplimit.Header("X-API-Key"),
		limits(t, httplimit.Limit{Name: "per-key", Policy: throttle.PerMinute(3)}),
		&httplimit.Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	srv := serve(t, m)

	if resp := get(t, srv, "/", "X-API-Key", "k"); resp.status != http.StatusServiceUnavailable {
		t.Fatalf("down: %d, want 503", resp.status)
	}
	f.mu.Lock()
	f.down = false
	f.mu.Unlock()
	for i, wantR := range []int{2, 1} {
		resp := get(t, srv, "/", "X-API-Key", "k")
		if resp.status != http.StatusOK || rateLimit(t, resp.header).r != wantR {
			t.Fatalf("back, request %d: %d %v, want 200 r=%d", i+1, resp.status, resp.header, wantR)
		}
	}
	if got := logs.String(); strings.Count(got, "limiter unavailable") != 1 || strings.Count(got, "limiter available again") != 1 {
		t.Errorf("logs, want one line down and one back:\n%s", got)
	}
}

// TestBadKeys: a request without a usable key is 400 with a message that
// says why, and a KeyFunc that fails otherwise is 500; neither reaches the
// limiter nor the handler.
func TestBadKeys(t *testing.T) {
	t.Parallel()
	failing := func(*http.Request) (string, error) { return "", errors.New("tenant lookup: connection reset") }
	empty := func(*http.Request) (string, error) { return "", nil }
	long := func(*http.Request) (string, error) {
		return "", fmt.Errorf("%w: %s", httplimit.ErrBadKey, strings.Repeat("x", 1000))
	}
	xff, err := httplimit.ClientIP(&httplimit.IPConfig{TrustedProxies: []netipPrefix{mustPrefix(t, "127.0.0.0/8")}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		key        httplimit.KeyFunc
		header     []string
		wantStatus int
		wantDetail string
	}{
		{"no header", httplimit.Header("X-API-Key"), nil, 400, "no usable key: the request has no X-API-Key header"},
		{"empty header", httplimit.Header("X-API-Key"), []string{"X-API-Key", ""}, 400, "no usable key: the X-API-Key header is empty"},
		{"two headers", httplimit.Header("X-API-Key"), []string{"X-API-Key", "a", "X-API-Key", "b"}, 400, "no usable key: the request has 2 X-API-Key headers; send one"},
		{"hashed, no header", httplimit.Hashed(httplimit.Header("X-API-Key")), nil, 400, "no usable key: the request has no X-API-Key header"},
		{"empty key", empty, nil, 400, "no usable key: the key is empty"},
		{"a long message, cut", long, nil, 400, "no usable key: " + strings.Repeat("x", 285) + "..."},
		{"bad X-Forwarded-For", xff, []string{"X-Forwarded-For", "not-an-ip"}, 400, `no usable key: X-Forwarded-For names "not-an-ip" where a client address should be`},
		{"KeyFunc fails", failing, nil, 500, "the rate limiter is misconfigured"},
		{"Hashed(nil)", httplimit.Hashed(nil), nil, 500, "the rate limiter is misconfigured"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, prefix := newLimiter(t)
			srv := serve(t, newMiddleware(t, l, tc.key,
				limits(t, httplimit.Limit{Name: "per-key", Policy: throttle.PerMinute(3)}), nil))
			resp := get(t, srv, "/", tc.header...)
			if resp.status != tc.wantStatus {
				t.Fatalf("status %d %q, want %d", resp.status, resp.body, tc.wantStatus)
			}
			if p := problem(t, resp); p.Detail != tc.wantDetail || p.Type != "about:blank" {
				t.Errorf("problem %+v, want detail %q", p, tc.wantDetail)
			}
			if h := resp.header.Get(httplimit.HeaderPolicy); h != "" {
				t.Errorf("RateLimit-Policy %q on a request without a key", h)
			}
			if keys := redistest.Keys(t, redistest.Client(t), prefix); len(keys) > 0 {
				t.Errorf("the limiter wrote %q", keys)
			}
		})
	}
}

// TestHostileKeys: keys with braces, colons, line breaks, percent signs,
// a megabyte, or the form the limiter gives a long key, each get a window
// of their own, and every Redis key stays under the limiter's prefix.
func TestHostileKeys(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("A", 1<<20)
	// Each pair of distinct keys holds marker, unique to the subtest, so
	// that its Redis keys can be found wherever they are.
	cases := []struct {
		name string
		keys func(marker string) (a, b string) // a's full window must not hold back b
	}{
		{"braces", func(m string) (string, string) { return m + "a{b}c", m + "a%7Bb%7Dc" }},
		{"closing the hash tag", func(m string) (string, string) { return m + "}:x", m + "%7D:x" }},
		{"colons", func(m string) (string, string) { return m + ":x", m + "x:" }},
		{"a slash", func(m string) (string, string) { return m + "/x", m + "x/" }},
		{"line breaks", func(m string) (string, string) { return m + "a\nb", m + "a\r\nb" }},
		{"NUL", func(m string) (string, string) { return m + "a\x00b", m + "a" }},
		{"a megabyte", func(m string) (string, string) { return long + m, long[1:] + "B" + m }},
		{"the long-key form", func(m string) (string, string) { return long + m, "#" + sha256Hex(long+m) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, prefix := newLimiter(t)
			marker := "marker-" + strings.TrimSuffix(redistest.Prefix(t), ":")
			a, b := tc.keys(marker)
			byQuery := func(r *http.Request) (string, error) { return r.URL.Query().Get("k"), nil }
			srv := serve(t, newMiddleware(t, l, byQuery,
				limits(t, httplimit.Limit{Name: "one", Policy: throttle.PerHour(1)}), nil))
			path := func(k string) string { return "/?k=" + urlQueryEscape(k) }

			if resp := get(t, srv, path(a)); resp.status != http.StatusOK {
				t.Fatalf("a, first: %d %q", resp.status, cut(resp.body))
			}
			if resp := get(t, srv, path(a)); resp.status != http.StatusTooManyRequests {
				t.Fatalf("a, second: %d %q, want 429", resp.status, cut(resp.body))
			}
			if resp := get(t, srv, path(b)); resp.status != http.StatusOK {
				t.Fatalf("b after a's window filled: %d %q, want 200: the keys share a window", resp.status, cut(resp.body))
			}
			rdb := redistest.Client(t)
			if keys := redistest.Keys(t, rdb, prefix); len(keys) != 2 {
				t.Errorf("Redis keys under the prefix: %q, want 2", keys)
			}
			for _, k := range redistest.Keys(t, rdb, "") {
				if strings.Contains(k, marker) && !strings.HasPrefix(k, prefix) {
					t.Errorf("Redis key %q is outside the prefix %q", cut(k), prefix)
				}
			}
		})
	}
}

// TestInvalidRules: rules the limiter or the headers cannot take are a
// server error, whatever the FailureMode; nothing is served.
func TestInvalidRules(t *testing.T) {
	t.Parallel()
	rulesOf := func(rs ...httplimit.Rule) httplimit.RuleFunc {
		return func(*http.Request, string) []httplimit.Rule { return rs }
	}
	cases := []struct {
		name  string
		rules httplimit.RuleFunc
	}{
		{"limit 0", rulesOf(httplimit.Rule{Name: "r", Check: throttle.Check{Key: "k", Policy: throttle.PerMinute(0), Cost: 1}})},
		{"cost 0", rulesOf(httplimit.Rule{Name: "r", Check: throttle.Check{Key: "k", Policy: throttle.PerMinute(1)}})},
		{"same key twice", rulesOf(
			httplimit.Rule{Name: "a", Check: throttle.Check{Key: "k", Policy: throttle.PerMinute(1), Cost: 1}},
			httplimit.Rule{Name: "b", Check: throttle.Check{Key: "k", Policy: throttle.PerMinute(1), Cost: 1}})},
		{"empty name", rulesOf(httplimit.Rule{Check: throttle.Check{Key: "k", Policy: throttle.PerMinute(1), Cost: 1}})},
		{"name with a line break", rulesOf(httplimit.Rule{Name: "a\nb", Check: throttle.Check{Key: "k", Policy: throttle.PerMinute(1), Cost: 1}})},
	}
	for _, tc := range cases {
		for _, mode := range []throttle.FailureMode{throttle.FailClosed, throttle.FailOpen} {
			t.Run(fmt.Sprintf("%s/mode %d", tc.name, mode), func(t *testing.T) {
				t.Parallel()
				l, _ := newLimiter(t)
				srv := serve(t, newMiddleware(t, l, httplimit.Header("X-API-Key"), tc.rules, &httplimit.Config{FailureMode: mode}))
				resp := get(t, srv, "/", "X-API-Key", "k")
				if resp.status != http.StatusInternalServerError {
					t.Fatalf("%d %q, want 500", resp.status, resp.body)
				}
				if h := resp.header.Get(httplimit.HeaderPolicy); h != "" {
					t.Errorf("RateLimit-Policy %q with invalid rules", h)
				}
			})
		}
	}
}

// TestNoRules: a request that no rule applies to is served, with no
// rate-limit fields and no limiter call.
func TestNoRules(t *testing.T) {
	t.Parallel()
	none := func(r *http.Request, key string) []httplimit.Rule { return nil }
	f := &flaky{down: true} // would fail if asked
	resp := get(t, serve(t, newMiddleware(t, f, httplimit.Header("X-API-Key"), none, nil)), "/", "X-API-Key", "k")
	if resp.status != http.StatusOK {
		t.Fatalf("%d %q, want 200", resp.status, resp.body)
	}
	for _, h := range []string{httplimit.HeaderPolicy, httplimit.HeaderLimit, httplimit.HeaderRetryAfter} {
		if v := resp.header.Get(h); v != "" {
			t.Errorf("%s: %q on an unlimited request", h, v)
		}
	}
}

// TestReject: Config.Reject writes the responses the middleware gives
// itself, with the fields already set.
func TestReject(t *testing.T) {
	t.Parallel()
	l, _ := newLimiter(t)
	var got []httplimit.Rejection
	var mu sync.Mutex
	reject := func(w http.ResponseWriter, r *http.Request, rej httplimit.Rejection) {
		mu.Lock()
		got = append(got, rej)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(rej.Status)
		fmt.Fprintf(w, "custom %d, RateLimit %s\n", rej.Status, w.Header().Get(httplimit.HeaderLimit))
	}
	srv := serve(t, newMiddleware(t, l, httplimit.Header("X-API-Key"),
		limits(t, httplimit.Limit{Name: "one", Policy: throttle.PerHour(1)}), &httplimit.Config{Reject: reject}))

	get(t, srv, "/", "X-API-Key", "k")
	resp := get(t, srv, "/", "X-API-Key", "k")
	if !strings.HasPrefix(resp.body, `custom 429, RateLimit "one";r=0;t=`) {
		t.Errorf("429 body %q", resp.body)
	}
	if resp := get(t, srv, "/"); resp.body != "custom 400, RateLimit \n" {
		t.Errorf("400 body %q", resp.body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].Rule != "one" || got[0].Policy != throttle.PerHour(1) ||
		got[0].RetryAfter < time.Second || got[0].RetryAfter%time.Second != 0 || !errors.Is(got[1].Err, httplimit.ErrBadKey) {
		t.Errorf("rejections %+v", got)
	}
}

// TestNew: New rejects nil arguments and bad configurations with an error,
// never a panic.
func TestNew(t *testing.T) {
	t.Parallel()
	l := throttle.NewLimiter(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})) // never dialled
	key := httplimit.Header("X-API-Key")
	rules := func(*http.Request, string) []httplimit.Rule { return nil }
	cases := []struct {
		name    string
		limiter httplimit.Limiter
		key     httplimit.KeyFunc
		rules   httplimit.RuleFunc
		cfg     *httplimit.Config
		wantErr string
	}{
		{"nil config", l, key, rules, nil, ""},
		{"nil limiter", nil, key, rules, nil, "httplimit: New needs a limiter"},
		{"nil *throttle.Limiter", (*throttle.Limiter)(nil), key, rules, nil, "httplimit: New needs a limiter"},
		{"nil KeyFunc", l, nil, rules, nil, "httplimit: New needs a KeyFunc"},
		{"nil RuleFunc", l, key, nil, nil, "httplimit: New needs a RuleFunc"},
		{"unknown mode", l, key, rules, &httplimit.Config{FailureMode: 7}, "httplimit: unknown FailureMode 7"},
		{"negative timeout", l, key, rules, &httplimit.Config{DecisionTimeout: -time.Second}, "httplimit: DecisionTimeout -1s is negative"},
		{"negative retry", l, key, rules, &httplimit.Config{UnavailableRetryAfter: -time.Second}, "httplimit: UnavailableRetryAfter -1s is negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := httplimit.New(tc.limiter, tc.key, tc.rules, tc.cfg)
			if tc.wantErr == "" {
				if err != nil || m == nil {
					t.Fatalf("New: %v, %v", m, err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr || m != nil {
				t.Errorf("New: %v, %v; want nil, %q", m, err, tc.wantErr)
			}
		})
	}
}

// TestLimits: Limits rejects what would make bad keys or headers.
func TestLimits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		limits  []httplimit.Limit
		wantErr string
	}{
		{"none", nil, "httplimit: Limits needs at least one limit"},
		{"empty name", []httplimit.Limit{{"", throttle.PerMinute(1)}}, `httplimit: limit 1: name "" must be 1 to 64 letters, digits, '.', '_' or '-'`},
		{"slash", []httplimit.Limit{{"a/b", throttle.PerMinute(1)}}, `httplimit: limit 1: name "a/b" must be 1 to 64 letters, digits, '.', '_' or '-'`},
		{"twice", []httplimit.Limit{{"a", throttle.PerMinute(1)}, {"a", throttle.PerHour(1)}}, `httplimit: limit 2: name "a" is used twice`},
		{"bad policy", []httplimit.Limit{{"a", throttle.PerMinute(0)}}, "httplimit: limit 1 (a): invalid policy: limit 0 is below 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rf, err := httplimit.Limits(tc.limits...)
			if err == nil || err.Error() != tc.wantErr || rf != nil {
				t.Errorf("Limits: %v; want %q", err, tc.wantErr)
			}
		})
	}
	rf := limits(t, httplimit.Limit{"a", throttle.PerMinute(1)}, httplimit.Limit{"b", throttle.PerHour(2)})
	got := rf(nil, "acme")
	want := []httplimit.Rule{
		{Name: "a", Check: throttle.Check{Key: "http/a/acme", Policy: throttle.PerMinute(1), Cost: 1}},
		{Name: "b", Check: throttle.Check{Key: "http/b/acme", Policy: throttle.PerHour(2), Cost: 1}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rules for acme: %+v, want %+v", got, want)
	}
}

// TestEdges: names that need escaping in a Structured Fields string, a
// nil handler, a client that went away before its decision, and a long
// bad value in a 400's message.
func TestEdges(t *testing.T) {
	t.Parallel()
	one := throttle.Check{Key: "k", Policy: throttle.PerMinute(1), Cost: 1}

	t.Run("quote and backslash in a name", func(t *testing.T) {
		t.Parallel()
		l, _ := newLimiter(t)
		rules := func(*http.Request, string) []httplimit.Rule { return []httplimit.Rule{{Name: `a"b\c`, Check: one}} }
		resp := get(t, serve(t, newMiddleware(t, l, httplimit.Header("X-API-Key"), rules, nil)), "/", "X-API-Key", "k")
		if got, want := resp.header.Get(httplimit.HeaderPolicy), `"a\"b\\c";q=1;w=60`; got != want {
			t.Errorf("RateLimit-Policy %q, want %q", got, want)
		}
		if got, want := resp.header.Get(httplimit.HeaderLimit), `"a\"b\\c";r=0;t=60`; got != want {
			t.Errorf("RateLimit %q, want %q", got, want)
		}
	})

	t.Run("nil handler", func(t *testing.T) {
		t.Parallel()
		l, _ := newLimiter(t)
		m := newMiddleware(t, l, httplimit.Header("X-API-Key"), limits(t, httplimit.Limit{Name: "a", Policy: throttle.PerMinute(5)}), nil)
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-API-Key", "k")
		m.Handler(nil).ServeHTTP(w, r)
		if w.Code != http.StatusInternalServerError {
			t.Errorf("Handler(nil): %d, want 500", w.Code)
		}
	})

	t.Run("client gone", func(t *testing.T) {
		t.Parallel()
		for _, mode := range []throttle.FailureMode{throttle.FailClosed, throttle.FailOpen} {
			m := newMiddleware(t, hang{}, httplimit.Header("X-API-Key"),
				limits(t, httplimit.Limit{Name: "a", Policy: throttle.PerMinute(5)}), &httplimit.Config{FailureMode: mode, DecisionTimeout: time.Hour})
			ctx, cancel := context.WithCancel(context.Background())
			r := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
			r.Header.Set("X-API-Key", "k")
			w := httptest.NewRecorder()
			served := false
			time.AfterFunc(10*time.Millisecond, cancel)
			m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true })).ServeHTTP(w, r)
			if served || w.Code != http.StatusServiceUnavailable {
				t.Errorf("mode %d: served %v, status %d; want not served, 503", mode, served, w.Code)
			}
		}
	})

	t.Run("long bad value", func(t *testing.T) {
		t.Parallel()
		kf, err := httplimit.ClientIP(&httplimit.IPConfig{TrustedProxies: []netipPrefix{mustPrefix(t, "127.0.0.0/8")}})
		if err != nil {
			t.Fatal(err)
		}
		l, _ := newLimiter(t)
		srv := serve(t, newMiddleware(t, l, kf, limits(t, httplimit.Limit{Name: "a", Policy: throttle.PerMinute(5)}), nil))
		resp := get(t, srv, "/", "X-Forwarded-For", strings.Repeat("é", 500))
		p := problem(t, resp)
		if resp.status != http.StatusBadRequest || len(p.Detail) > 300 || !strings.Contains(p.Detail, "... (1000 bytes)") {
			t.Errorf("%d, detail %q (%d bytes); want 400, a short detail with the length", resp.status, p.Detail, len(p.Detail))
		}
	})
}

// hang is a Limiter that waits until its context ends.
type hang struct{}

func (hang) AllowMulti(ctx context.Context, _ []throttle.Check) (throttle.MultiDecision, error) {
	<-ctx.Done()
	return throttle.MultiDecision{}, ctx.Err()
}
