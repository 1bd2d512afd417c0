package integration_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/redistest"
)

// otlpReceiver is an OTLP trace receiver on 127.0.0.1 that keeps every
// span it is sent, over gRPC or http/protobuf.
type otlpReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
}

// Export keeps the spans of req.
func (r *otlpReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// got returns the spans received so far.
func (r *otlpReceiver) got() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// serveGRPC serves r by gRPC on 127.0.0.1 and returns its endpoint.
func (r *otlpReceiver) serveGRPC(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return "http://" + lis.Addr().String()
}

// serveHTTP serves r by http/protobuf at /v1/traces on 127.0.0.1 and
// returns its endpoint.
func (r *otlpReceiver) serveHTTP(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not an OTLP trace export", http.StatusNotFound)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		data, err := io.ReadAll(body)
		var msg collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(data, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, _ := r.Export(req.Context(), &msg)
		out, _ := proto.Marshal(resp)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestTracesFromEnqueueToSend turns traces on in cmd/enqueue and
// cmd/worker by the OTEL_* variables alone, over each OTLP protocol, and
// checks at a real receiver that each task's spans, from its enqueue to
// its send, share one trace: the worker's run a child of the enqueue and
// linked to it, the limiter's decision and the provider call below.
func TestTracesFromEnqueueToSend(t *testing.T) {
	enqueueBin := buildCLIs(t)
	for _, protocol := range []string{"grpc", "http/protobuf"} {
		t.Run(strings.ReplaceAll(protocol, "/", "-"), func(t *testing.T) {
			recv := &otlpReceiver{}
			endpoint := recv.serveHTTP
			if protocol == "grpc" {
				endpoint = recv.serveGRPC
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint(t))
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // ms: spans leave at once
			traceTasks(t, enqueueBin, recv)
		})
	}
}

// traceTasks sends 3 SMS through a worker, 2 a second allowed, and checks
// the spans recv got for them.
func traceTasks(t *testing.T, enqueueBin string, recv *otlpReceiver) {
	url, rdb := redistest.URL(t), redistest.Client(t)
	queue, prefix := redistest.Queue(t, rdb), redistest.Prefix(t)
	sink := newSMSSink(t)
	policies := writePolicies(t, "tasks:\n  sms:send:\n    - { name: tenant, scope: tenant, limit: 2, window: 1s }\n")
	procs := startWorkers(t, 1, "--redis", url, "--policies", policies, "--sms-webhook", sink.srv.URL,
		"--queues", queue+"=1", "--prefix", prefix, "--log-level", "info")
	waitFor(t, 10*time.Second, "the worker's start", nil, func() bool {
		return strings.Contains(procs[0].logs.String(), `"msg":"worker started"`)
	})
	for i := range 3 {
		enqueueSMS(t, enqueueBin, url, queue, "acme", fmt.Sprintf("traced-%d", i), 1, "--prefix", prefix)
	}
	waitFor(t, 30*time.Second, "3 SMS at the provider", sink.notified, func() bool { return len(sink.receipts()) >= 3 })
	stopWorkers(t, procs...) // flushes its spans as it exits
	byID := func() map[string][]*tracepb.Span {
		m := map[string][]*tracepb.Span{}
		for _, s := range recv.got() {
			if id := attr(s, "messaging.message.id"); id != "" {
				m[id] = append(m[id], s)
			}
		}
		return m
	}
	waitFor(t, 10*time.Second, "the spans of 3 enqueues and 3 runs", nil, func() bool {
		n := 0
		for _, spans := range byID() {
			if len(spans) >= 2 {
				n++
			}
		}
		return n >= 3
	})
	all := recv.got()
	for id, spans := range byID() {
		checkTaskTrace(t, id, spans, all)
	}
}

// checkTaskTrace checks the spans of the task id: its enqueue's, and each
// run's with the run's children among all.
func checkTaskTrace(t *testing.T, id string, spans, all []*tracepb.Span) {
	t.Helper()
	var send *tracepb.Span
	var runs []*tracepb.Span
	for _, s := range spans {
		switch s.GetKind() {
		case tracepb.Span_SPAN_KIND_PRODUCER:
			send = s
		case tracepb.Span_SPAN_KIND_CONSUMER:
			runs = append(runs, s)
		}
	}
	if send == nil || len(runs) == 0 {
		t.Fatalf("task %s: enqueue span %v, %d run spans; want both", id, send != nil, len(runs))
	}
	if got, want := attr(send, "messaging.system"), "asynq"; got != want {
		t.Errorf("task %s: enqueue span's messaging.system = %q, want %q", id, got, want)
	}
	trace := hex.EncodeToString(send.GetTraceId())
	for _, run := range runs {
		if got := hex.EncodeToString(run.GetTraceId()); got != trace {
			t.Errorf("task %s: run in trace %s, enqueue in %s", id, got, trace)
		}
		if !bytes.Equal(run.GetParentSpanId(), send.GetSpanId()) {
			t.Errorf("task %s: run's parent %x, want the enqueue span %x", id, run.GetParentSpanId(), send.GetSpanId())
		}
		if l := run.GetLinks(); len(l) != 1 || !bytes.Equal(l[0].GetTraceId(), send.GetTraceId()) || !bytes.Equal(l[0].GetSpanId(), send.GetSpanId()) {
			t.Errorf("task %s: run's links %v, want one to the enqueue span", id, l)
		}
		if got := attr(run, "messaging.operation.type"); got != "process" {
			t.Errorf("task %s: run's messaging.operation.type = %q, want process", id, got)
		}
	}
	names := map[string]int{}
	for _, s := range descendants(all, runs) {
		if got := hex.EncodeToString(s.GetTraceId()); got != trace {
			t.Errorf("task %s: span %s in trace %s, want %s", id, s.GetName(), got, trace)
		}
		names[s.GetName()]++
	}
	for _, name := range []string{"sluice.admit", "sluice.decide", "sluice.provider"} {
		if names[name] == 0 {
			t.Errorf("task %s: no %s span under its runs; got %v", id, name, names)
		}
	}
}

// descendants returns the spans of all below roots, at any depth.
func descendants(all, roots []*tracepb.Span) []*tracepb.Span {
	seen := map[string]bool{}
	for _, r := range roots {
		seen[string(r.GetSpanId())] = true
	}
	var out []*tracepb.Span
	for grew := true; grew; {
		grew = false
		for _, s := range all {
			if !seen[string(s.GetSpanId())] && seen[string(s.GetParentSpanId())] {
				seen[string(s.GetSpanId())] = true
				out = append(out, s)
				grew = true
			}
		}
	}
	return out
}

// attr returns the string attribute key of s, or "".
func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}
