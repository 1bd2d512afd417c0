package producer_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/producer"
)

// TestWithHeadersKeepsOptions enqueues, with traces on, a task built with
// options of its own: the stored task carries the enqueue span's
// traceparent and keeps every option, and the caller's task is left
// without one, so that it can be enqueued again.
func TestWithHeadersKeepsOptions(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	c := producer.NewClientFromRedisClient(rdb, producer.WithTracerProvider(tp), producer.WithoutParking())
	q := redistest.Queue(t, rdb)
	id := "traced-" + q
	task, err := producer.NewSMSTask("acme", goodSMS, asynq.Queue(q), asynq.TaskID(id), asynq.MaxRetry(3),
		asynq.Retention(time.Hour), asynq.Timeout(42*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(context.Background(), task); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	got := taskInfo(t, rdb, q, id)
	if got.MaxRetry != 4 || got.Retention != time.Hour || got.Timeout != 42*time.Second || got.Queue != q {
		t.Errorf("stored task: MaxRetry %d, Retention %v, Timeout %v, queue %s; want 4, 1h, 42s, %s",
			got.MaxRetry, got.Retention, got.Timeout, got.Queue, q)
	}
	ended := spans.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	s := ended[0]
	sc := s.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if tp := got.Headers["traceparent"]; tp != want {
		t.Errorf("stored traceparent = %q, want %q (the enqueue span's)", tp, want)
	}
	if got, want := s.SpanKind(), trace.SpanKindProducer; got != want {
		t.Errorf("span kind = %v, want %v", got, want)
	}
	if got, want := s.Name(), "send "+q; got != want {
		t.Errorf("span name = %q, want %q", got, want)
	}
	attrs := map[string]string{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	for k, v := range map[string]string{"messaging.system": "asynq", "messaging.operation.type": "send",
		"messaging.destination.name": q, "messaging.message.id": id, "sluice.tenant": "acme"} {
		if attrs[k] != v {
			t.Errorf("span attribute %s = %q, want %q", k, attrs[k], v)
		}
	}
	if _, ok := task.Headers()["traceparent"]; ok {
		t.Error("the caller's task was given a traceparent")
	}
}

// TestEnqueueUntraced enqueues with traces off (the global no-op
// provider): the task carries no trace context.
func TestEnqueueUntraced(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	c := producer.NewClientFromRedisClient(rdb, producer.WithoutParking())
	q := redistest.Queue(t, rdb)
	info, err := c.EnqueueSMS(context.Background(), "acme", goodSMS, asynq.Queue(q))
	if err != nil {
		t.Fatal(err)
	}
	if h := taskInfo(t, rdb, q, info.ID).Headers; h["traceparent"] != "" || h["tracestate"] != "" {
		t.Errorf("untraced task's headers = %v, want no trace context", h)
	}
}
