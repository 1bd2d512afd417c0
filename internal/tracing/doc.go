// Package tracing turns OpenTelemetry traces on for Sluice's commands
// when the standard OTEL_* environment variables ask for them (Enabled),
// exported by OTLP over http/protobuf or gRPC (docs/TRACING.md).
package tracing
