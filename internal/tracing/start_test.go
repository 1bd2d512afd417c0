package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
)

// TestStartOff starts tracing with no OTEL_* variable set: nothing is set
// up, the global provider's spans are not recorded, and stop does
// nothing.
func TestStartOff(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(k, "")
	}
	stop, err := Start(context.Background(), "sluice-test")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	_, span := otel.Tracer("test").Start(context.Background(), "span")
	defer span.End()
	if span.IsRecording() {
		t.Error("with no OTEL_* variable, a span is recorded; want the no-op provider")
	}
}

// TestStartBadProtocol refuses a protocol that is neither grpc nor
// http/protobuf, before anything is sent.
func TestStartBadProtocol(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, err := Start(context.Background(), "sluice-test"); err == nil {
		t.Error("Start with protocol http/json: no error")
	}
}
