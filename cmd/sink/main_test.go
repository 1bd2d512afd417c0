package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sink"
)

// TestUsageErrors: each is one line on stderr and exit status 2, and
// nothing listens.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string // the whole of stderr
	}{
		{"bad flag", []string{"--nope"}, nil, "sink: flag provided but not defined: -nope\n"},
		{"bad window", []string{"--window", "soon"}, nil, `sink: invalid value "soon" for flag -window: parse error` + "\n"},
		{"zero window", []string{"--window", "0s"}, nil, "sink: --window 0s: must be positive\n"},
		{"bad log format", []string{"--log-format", "xml"}, nil, `sink: --log-format "xml": use text or json` + "\n"},
		{"bad window from the environment", nil, map[string]string{"SLUICE_SINK_WINDOW": "soon"},
			`sink: environment variable SLUICE_SINK_WINDOW: parse error` + "\n"},
		{"bad log format from the environment", nil, map[string]string{"SLUICE_SINK_LOG_FORMAT": "xml"},
			`sink: --log-format "xml": use text or json` + "\n"},
		{"argument", []string{"--window", "1s", "now"}, nil, `sink: unexpected argument "now": only flags are taken (see --help)` + "\n"},
		{"flag after an argument", []string{"--window", "2s", "now", "--log-format", "json"}, nil,
			`sink: unexpected argument "now" (then "--log-format", "json"): flags go before arguments` + "\n"},
		{"address without a port", []string{"--addr", "localhost"}, nil,
			`sink: --addr "localhost": missing port in address: give host:port, such as 127.0.0.1:8080` + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { // not parallel: t.Setenv
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stderr strings.Builder
			// A free port should the sink start, unless the case gives an
			// address: the last --addr wins.
			args := append([]string{"--addr", "127.0.0.1:0"}, tc.args...)
			if got, want := run(t.Context(), args, &stderr), 2; got != want {
				t.Errorf("exit status = %d, want %d", got, want)
			}
			if got, want := stderr.String(), tc.want; got != want {
				t.Errorf("stderr\n got %q\nwant %q", got, want)
			}
		})
	}
}

// TestHelpExitStatus: --help gives the exit statuses, usage errors' 2
// among them, and says where the sink listens.
func TestHelpExitStatus(t *testing.T) {
	for _, want := range []string{"Exit status: 0 when stopped by SIGINT or SIGTERM; 1 when it cannot listen\nor serve; 2 for a usage error", "loopback only"} {
		if !strings.Contains(synopsis, want) {
			t.Errorf("the help does not say %q:\n%s", want, synopsis)
		}
	}
}

func TestAddressInUse(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	first, addr := startSink(t, ctx)
	var stderr strings.Builder
	if got, want := run(t.Context(), []string{"--addr", addr}, &stderr), 1; got != want {
		t.Errorf("second sink on %s: exit status %d, want %d", addr, got, want)
	}
	if !strings.Contains(stderr.String(), "address already in use") {
		t.Errorf("second sink on %s: stderr %q, want it to say the address is in use", addr, stderr.String())
	}
	cancel()
	<-first
}

// TestDefaultAddress: without --addr the sink listens on loopback port
// 8080 only. Should the port be taken, the error names the address it
// tried. Not parallel: it unsets SLUICE_SINK_ADDR.
func TestDefaultAddress(t *testing.T) {
	t.Setenv("SLUICE_SINK_ADDR", "") // restored after the test
	os.Unsetenv("SLUICE_SINK_ADDR")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, w := io.Pipe()
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"--log-format", "json"}, w)
		w.Close()
	}()
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		t.Fatalf("sink wrote nothing (exit status %d)", <-code)
	}
	first := lines.Text()
	go func() { // keep the pipe flowing
		for lines.Scan() {
		}
	}()
	var log struct{ Msg, Addr string }
	if json.Unmarshal([]byte(first), &log) == nil && log.Msg == "sink listening" {
		if got, want := log.Addr, "127.0.0.1:8080"; got != want {
			t.Errorf("listening on %s, want %s", got, want)
		}
		cancel()
		if c := <-code; c != 0 {
			t.Errorf("exit status after the context ended = %d, want 0", c)
		}
		return
	}
	// Port 8080 is taken on this machine.
	if c, want := <-code, "sink: listen tcp 127.0.0.1:8080: "; c != 1 || !strings.HasPrefix(first, want) {
		t.Errorf("exit status %d, first line %q; want it listening on 127.0.0.1:8080, or exit status 1 and a line starting %q", c, first, want)
	}
}

// startSink runs the sink on a loopback port with JSON logs until ctx is
// done; it returns the channel of its exit status and its address, read
// from its first log line.
func startSink(t *testing.T, ctx context.Context, args ...string) (<-chan int, string) {
	t.Helper()
	logs, w := io.Pipe()
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, append([]string{"--addr", "127.0.0.1:0", "--log-format", "json"}, args...), w)
		w.Close()
	}()
	lines := bufio.NewScanner(logs)
	if !lines.Scan() {
		t.Fatalf("sink wrote no log line (exit status %d)", <-code)
	}
	var first struct{ Msg, Addr, Window string }
	if err := json.Unmarshal(lines.Bytes(), &first); err != nil || first.Msg != "sink listening" {
		t.Fatalf("first log line %q: want sink listening with its address (%v)", lines.Text(), err)
	}
	go func() { // keep the pipe flowing
		for lines.Scan() {
		}
	}()
	return code, first.Addr
}

// TestRun: the command serves the webhook and the report, takes its window
// from the environment, and exits 0 when its context ends (SIGTERM in main).
func TestRun(t *testing.T) {
	t.Setenv("SLUICE_SINK_WINDOW", "2s")
	ctx, cancel := context.WithCancel(t.Context())
	code, addr := startSink(t, ctx)

	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/sms", strings.NewReader(`{"id": "t1", "tenant": "acme", "to": "+15555550100", "body": "hi"}`))
	req.Header.Set("Idempotency-Key", "t1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, want := resp.StatusCode, http.StatusOK; got != want {
		t.Errorf("POST /sms: status %d, want %d", got, want)
	}
	resp, err = http.Get("http://" + addr + "/report")
	if err != nil {
		t.Fatal(err)
	}
	var r sink.Report
	err = json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if r.Window != "2s" || r.Received != 1 || r.Tenants["acme"].Received != 1 {
		t.Errorf("report = %+v, want window 2s and one message of acme", r)
	}

	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("exit status after the context ended = %d, want 0", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sink did not stop within 10 s of its context ending")
	}
}
