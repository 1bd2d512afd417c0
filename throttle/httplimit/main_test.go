package httplimit_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/throttle/httplimit"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// newLimiter returns a limiter on the test Redis whose keys start with a
// prefix of the test's own, and the prefix.
func newLimiter(t *testing.T) (*throttle.Limiter, string) {
	t.Helper()
	prefix := redistest.Prefix(t)
	return throttle.NewLimiter(redistest.Client(t), throttle.WithPrefix(prefix)), prefix
}

// ok is the handler behind the middleware: it answers 200 "served".
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.WriteString(w, "served\n")
})

// serve starts an HTTP server on loopback that runs m in front of ok, and
// closes it when the test ends.
func serve(t *testing.T, m *httplimit.Middleware) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(m.Handler(ok))
	srv.Config.MaxHeaderBytes = 4 << 20 // room for a 1 MB key
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// newMiddleware builds a middleware or fails the test.
func newMiddleware(t *testing.T, l httplimit.Limiter, key httplimit.KeyFunc, rules httplimit.RuleFunc, cfg *httplimit.Config) *httplimit.Middleware {
	t.Helper()
	if cfg == nil {
		cfg = &httplimit.Config{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := httplimit.New(l, key, rules, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// limits builds a RuleFunc from limits or fails the test.
func limits(t *testing.T, ls ...httplimit.Limit) httplimit.RuleFunc {
	t.Helper()
	rf, err := httplimit.Limits(ls...)
	if err != nil {
		t.Fatalf("Limits: %v", err)
	}
	return rf
}

// response is what a test reads of a response.
type response struct {
	status int
	header http.Header
	body   string
	dump   string // the response as it arrived, without its Date field
}

// get sends a GET to url with the given header fields (name, value pairs;
// a name given twice is sent twice).
func get(t *testing.T, srv *httptest.Server, path string, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	c := srv.Client()
	c.Timeout = 30 * time.Second
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	resp.Header.Del("Date")
	dump, err := httputil.DumpResponse(resp, true) // reads the body, and leaves a copy
	if err != nil {
		t.Fatalf("GET %s: read the response: %v", path, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(body), dump: string(dump)}
}

// limitField is a parsed RateLimit field: "name";r=R;t=T.
type limitField struct {
	name string
	r, t int
}

var limitFieldRE = regexp.MustCompile(`^"([^"\\]*)";r=([0-9]+);t=([0-9]+)$`)

// rateLimit parses the RateLimit field of h, failing the test when it is
// missing or malformed.
func rateLimit(t *testing.T, h http.Header) limitField {
	t.Helper()
	v := h.Values(httplimit.HeaderLimit)
	if len(v) != 1 {
		t.Fatalf("RateLimit fields: %q, want one", v)
	}
	m := limitFieldRE.FindStringSubmatch(v[0])
	if m == nil {
		t.Fatalf("RateLimit: %q is not \"name\";r=R;t=T", v[0])
	}
	r, _ := strconv.Atoi(m[2])
	ts, _ := strconv.Atoi(m[3])
	return limitField{name: m[1], r: r, t: ts}
}

// problemBody is the JSON of a problem response.
type problemBody struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
}

// problem decodes a problem response, failing the test when it is not one.
func problem(t *testing.T, resp response) problemBody {
	t.Helper()
	if got, want := resp.header.Get("Content-Type"), "application/problem+json"; got != want {
		t.Fatalf("Content-Type %q, want %q (body %q)", got, want, resp.body)
	}
	var p problemBody
	if err := json.Unmarshal([]byte(resp.body), &p); err != nil {
		t.Fatalf("problem body %q: %v", resp.body, err)
	}
	if p.Status != resp.status {
		t.Errorf("problem status %d, response status %d", p.Status, resp.status)
	}
	return p
}
