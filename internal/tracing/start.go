package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// flushTimeout bounds the flush of the spans still buffered at exit.
const flushTimeout = 5 * time.Second

// Start sets the global TracerProvider to one that exports by OTLP when
// Enabled(os.Getenv), named service unless OTEL_SERVICE_NAME says
// otherwise, and returns the function that flushes and stops it. When
// traces are off it sets nothing (the global provider stays the no-op
// one) and the function does nothing. The exporter reads the other
// OTEL_EXPORTER_OTLP_* variables itself: endpoint, headers, timeout, TLS.
func Start(ctx context.Context, service string) (stop func(), err error) {
	if !Enabled(os.Getenv) {
		return func() {}, nil
	}
	exp, err := exporter(ctx, protocol(os.Getenv))
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// The environment (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) wins.
	if env, eerr := resource.New(ctx, resource.WithFromEnv()); eerr == nil {
		res, _ = resource.Merge(res, env)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "tracing: flush at exit:", err)
		}
	}, nil
}

// protocol returns the OTLP protocol getenv names for traces:
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
// else http/protobuf, the specification's default.
func protocol(getenv func(string) string) string {
	if p := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p != "" {
		return p
	}
	if p := getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" {
		return p
	}
	return "http/protobuf"
}

// exporter returns the OTLP span exporter of protocol.
func exporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	switch protocol {
	case "grpc":
		return otlptracegrpc.New(ctx)
	case "http/protobuf":
		return otlptracehttp.New(ctx)
	}
	return nil, errors.New("OTEL_EXPORTER_OTLP_PROTOCOL " + protocol + " is not grpc nor http/protobuf")
}

// Run runs run between Start and its stop, for a command's main: the
// spans still buffered are flushed before the command exits. A tracing
// setup the environment gets wrong (an unknown protocol) is reported on
// stderr with exit status 2, a usage error.
func Run(ctx context.Context, service string, run func() int) int {
	stop, err := Start(ctx, service)
	if err != nil {
		fmt.Fprintln(os.Stderr, service+":", err)
		return 2
	}
	defer stop()
	return run()
}
