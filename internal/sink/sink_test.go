package sink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/syncbuf"
)

// testSink is a sink behind an httptest server, logging JSON lines to logs,
// whose clock gives t0 plus each of arrivals in turn.
type testSink struct {
	*Sink
	srv  *httptest.Server
	logs *syncbuf.Buffer
}

func newTestSink(t *testing.T, arrivals ...time.Duration) *testSink {
	t.Helper()
	logs := new(syncbuf.Buffer)
	s := New(time.Second, slog.New(slog.NewJSONHandler(logs, nil)))
	next := 0
	s.now = func() time.Time { // called under s.mu
		if next == len(arrivals) {
			t.Errorf("more arrivals than the %d the test planned", len(arrivals))
			return t0
		}
		next++
		return t0.Add(arrivals[next-1])
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &testSink{Sink: s, srv: srv, logs: logs}
}

// post sends body to POST /sms with Idempotency-Key key (none when "") and
// returns the status and the response body.
func (ts *testSink) post(t *testing.T, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ts.srv.URL+"/sms", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return do(t, req)
}

// sms posts a well-formed message and fails the test unless it gets 200.
func (ts *testSink) sms(t *testing.T, id, tenant string) {
	t.Helper()
	body, _ := json.Marshal(message{ID: id, Tenant: tenant, To: "+15555550100", Body: "hello"})
	if code, reply := ts.post(t, id, string(body)); code != http.StatusOK {
		t.Fatalf("POST /sms %s: %d %s", id, code, reply)
	}
}

// report gets /report with query q ("" for none).
func (ts *testSink) report(t *testing.T, q string) Report {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.srv.URL+"/report"+q, nil)
	if err != nil {
		t.Fatal(err)
	}
	code, body := do(t, req)
	if code != http.StatusOK {
		t.Fatalf("GET /report%s: %d %s", q, code, body)
	}
	var r Report
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("GET /report%s: %v\n%s", q, err, body)
	}
	return r
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

// logLines returns the JSON log lines written to b so far, decoded.
func logLines(t *testing.T, b *syncbuf.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(b.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestWebhook: the worker's webhook request is answered 200 and recorded.
func TestWebhook(t *testing.T) {
	t.Parallel()
	ts := newTestSink(t, 0)
	code, body := ts.post(t, "otp-1", `{"id": "otp-1", "tenant": "acme", "to": "+15555550100", "body": "Your code is 1234"}`)
	if got, want := code, http.StatusOK; got != want {
		t.Errorf("status = %d, want %d", got, want)
	}
	if got, want := body, `{"id":"otp-1"}`+"\n"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
	want := Report{
		Window:  "1s",
		Counts:  Counts{Received: 1, Unique: 1, MaxInWindow: 1, First: t0, Last: t0},
		Tenants: map[string]Counts{"acme": {Received: 1, Unique: 1, MaxInWindow: 1, First: t0, Last: t0}},
	}
	if diff := cmp.Diff(want, ts.report(t, "")); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

// TestRefused: a request outside the contract is answered 400 (or 405 for
// a method other than POST), saying why, and not recorded.
func TestRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		method string
		key    string
		body   string
		code   int
		reply  string // the start of the response body
	}{
		{"not JSON", "POST", "x", `id=x`, 400, "body: invalid character"},
		{"empty body", "POST", "x", ``, 400, "body: EOF"},
		{"no id", "POST", "x", `{"tenant": "acme", "to": "+15555550100", "body": "hi"}`, 400, "no id"},
		{"no tenant", "POST", "x", `{"id": "x", "to": "+15555550100", "body": "hi"}`, 400, "no tenant"},
		{"no Idempotency-Key", "POST", "", `{"id": "x", "tenant": "acme"}`, 400, `Idempotency-Key "" is not the id "x"`},
		{"Idempotency-Key of another", "POST", "y", `{"id": "x", "tenant": "acme"}`, 400, `Idempotency-Key "y" is not the id "x"`},
		{"too large", "POST", "x", `{"id": "x", "tenant": "acme", "body": "` + strings.Repeat("a", maxBody) + `"}`, 400, "body: http: request body too large"},
		{"GET", "GET", "x", ``, 405, "Method Not Allowed"},
		{"PUT", "PUT", "x", `{"id": "x", "tenant": "acme"}`, 405, "Method Not Allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := newTestSink(t)
			req, err := http.NewRequest(tc.method, ts.srv.URL+"/sms", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.key != "" {
				req.Header.Set("Idempotency-Key", tc.key)
			}
			code, reply := do(t, req)
			if got, want := code, tc.code; got != want {
				t.Errorf("status = %d, want %d", got, want)
			}
			if !strings.HasPrefix(reply, tc.reply) {
				t.Errorf("reply = %q, want it to start with %q", reply, tc.reply)
			}
			if got := ts.report(t, "").Received; got != 0 {
				t.Errorf("report: received %d, want 0", got)
			}
		})
	}
}

// TestReport: the report over HTTP counts duplicates and the most received
// in a window, for the sink's window and for one the query gives, and
// reports a window exceeded.
func TestReport(t *testing.T) {
	t.Parallel()
	ms := func(m int) time.Duration { return time.Duration(m) * time.Millisecond }
	ts := newTestSink(t, ms(0), ms(100), ms(200), ms(300), ms(400), ms(900), ms(1100), ms(2500))
	ts.sms(t, "a1", "acme")
	ts.sms(t, "a2", "acme")
	ts.sms(t, "b1", "big")
	ts.sms(t, "a3", "acme")
	ts.sms(t, "a4", "acme") // acme's fourth in 400 ms
	ts.sms(t, "a5", "acme") // and its fifth in a second: a limit of 4 exceeded
	ts.sms(t, "a2", "acme") // a duplicate
	ts.sms(t, "b2", "big")

	at := func(m int) time.Time { return t0.Add(ms(m)) }
	got := ts.report(t, "")
	want := Report{
		Window: "1s",
		Counts: Counts{Received: 8, Unique: 7, Duplicates: 1, DuplicateIDs: []string{"a2"}, MaxInWindow: 6, First: at(0), Last: at(2500)},
		Tenants: map[string]Counts{
			"acme": {Received: 6, Unique: 5, Duplicates: 1, DuplicateIDs: []string{"a2"}, MaxInWindow: 5, First: at(0), Last: at(1100)},
			"big":  {Received: 2, Unique: 2, MaxInWindow: 1, First: at(200), Last: at(2500)},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if limit := 4; got.Tenants["acme"].MaxInWindow <= limit {
		t.Errorf("acme: max in window %d, want above its limit %d", got.Tenants["acme"].MaxInWindow, limit)
	}

	short := ts.report(t, "?window=250ms")
	if got, want := short.Window, "250ms"; got != want {
		t.Errorf("?window=250ms: window %q, want %q", got, want)
	}
	if got, want := short.MaxInWindow, 3; got != want {
		t.Errorf("?window=250ms: max in window %d, want %d", got, want)
	}
	if got, want := short.Tenants["acme"].MaxInWindow, 2; got != want {
		t.Errorf("?window=250ms: acme max in window %d, want %d", got, want)
	}
}

func TestReportBadWindow(t *testing.T) {
	t.Parallel()
	ts := newTestSink(t)
	for _, q := range []string{"?window=soon", "?window=0s", "?window=-1s", "?window=10"} {
		req, err := http.NewRequest(http.MethodGet, ts.srv.URL+"/report"+q, nil)
		if err != nil {
			t.Fatal(err)
		}
		code, body := do(t, req)
		if got, want := code, http.StatusBadRequest; got != want {
			t.Errorf("GET /report%s: status %d, want %d", q, got, want)
		}
		if !strings.Contains(body, "want a positive Go duration") {
			t.Errorf("GET /report%s: body %q, want it to say what a window is", q, body)
		}
	}
}

// TestLogLines: one line a message, with the counts of the last window; a
// duplicate is a warning; a refused request is a warning saying why.
func TestLogLines(t *testing.T) {
	t.Parallel()
	ms := func(m int) time.Duration { return time.Duration(m) * time.Millisecond }
	ts := newTestSink(t, ms(0), ms(300), ms(600), ms(1200))
	ts.sms(t, "a1", "acme")
	ts.sms(t, "b1", "big")
	ts.sms(t, "a1", "acme")
	if code, _ := ts.post(t, "x", `{"id": "x"}`); code != http.StatusBadRequest {
		t.Errorf("POST without tenant: status %d, want 400", code)
	}
	ts.sms(t, "a2", "acme")

	type line struct {
		Level, Msg, ID, Tenant, Window string
		TenantInWindow, InWindow       float64
		Times                          float64
		Err                            string
	}
	var got []line
	for _, m := range logLines(t, ts.logs) {
		l := line{Level: m["level"].(string), Msg: m["msg"].(string)}
		l.ID, _ = m["id"].(string)
		l.Tenant, _ = m["tenant"].(string)
		l.Window, _ = m["window"].(string)
		l.TenantInWindow, _ = m["tenant_in_window"].(float64)
		l.InWindow, _ = m["in_window"].(float64)
		l.Times, _ = m["times"].(float64)
		l.Err, _ = m["err"].(string)
		got = append(got, l)
	}
	want := []line{
		{Level: "INFO", Msg: "sms received", ID: "a1", Tenant: "acme", Window: "1s", TenantInWindow: 1, InWindow: 1},
		{Level: "INFO", Msg: "sms received", ID: "b1", Tenant: "big", Window: "1s", TenantInWindow: 1, InWindow: 2},
		{Level: "WARN", Msg: "sms received again", ID: "a1", Tenant: "acme", Window: "1s", TenantInWindow: 2, InWindow: 3, Times: 2},
		{Level: "WARN", Msg: "sms refused", Err: "no tenant"},
		{Level: "INFO", Msg: "sms received", ID: "a2", Tenant: "acme", Window: "1s", TenantInWindow: 2, InWindow: 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
}

// TestConcurrentReceipts: messages posted at once are all recorded, once
// each (run with -race).
func TestConcurrentReceipts(t *testing.T) {
	t.Parallel()
	logs := new(syncbuf.Buffer)
	s := New(time.Second, slog.New(slog.NewTextHandler(logs, nil)))
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	ts := &testSink{Sink: s, srv: srv, logs: logs}
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("id-%d", i)
			body, _ := json.Marshal(message{ID: id, Tenant: []string{"acme", "big"}[i%2], To: "+15555550100", Body: "hi"})
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/sms", bytes.NewReader(body))
			req.Header.Set("Idempotency-Key", id)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("POST /sms %s: %v", id, err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("POST /sms %s: status %d", id, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	r := ts.report(t, "?window=1h")
	if r.Received != n || r.Unique != n || r.Duplicates != 0 || r.MaxInWindow != n {
		t.Errorf("report: %+v; want %d received, unique and in the window, no duplicates", r.Counts, n)
	}
	if got, want := r.Tenants["acme"].Received+r.Tenants["big"].Received, n; got != want {
		t.Errorf("tenants received %d in all, want %d", got, want)
	}
}

// TestReceipts: Receipts gives every accepted message in order of arrival,
// duplicates included, with the sink's clock; Unique counts distinct ids;
// refused messages are in neither.
func TestReceipts(t *testing.T) {
	t.Parallel()
	ts := newTestSink(t, 0, 300*time.Millisecond, 1200*time.Millisecond)
	if got := ts.Receipts(); len(got) != 0 || ts.Unique() != 0 {
		t.Errorf("before any message: %d receipts, %d unique", len(got), ts.Unique())
	}
	ts.sms(t, "a1", "acme")
	ts.sms(t, "b1", "big")
	if code, _ := ts.post(t, "", `{"id":"x","tenant":"acme"}`); code != http.StatusBadRequest {
		t.Errorf("message without Idempotency-Key: status %d, want 400", code)
	}
	ts.sms(t, "a1", "acme")
	want := []Receipt{
		{ID: "a1", Tenant: "acme", At: t0},
		{ID: "b1", Tenant: "big", At: t0.Add(300 * time.Millisecond)},
		{ID: "a1", Tenant: "acme", At: t0.Add(1200 * time.Millisecond)},
	}
	got := ts.Receipts()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Receipts (-want +got):\n%s", diff)
	}
	if got, want := ts.Unique(), 2; got != want {
		t.Errorf("Unique = %d, want %d", got, want)
	}
	got[0].ID = "changed"
	if ts.Receipts()[0].ID != "a1" {
		t.Error("Receipts returned the sink's own slice")
	}
}
