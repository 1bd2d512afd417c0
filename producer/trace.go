package producer

import (
	"context"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the name of the tracer of the producer's spans.
const TracerName = "github.com/sluicehq/sluice/producer"

// MessagingSystem is the messaging.system of Sluice's spans.
const MessagingSystem = "asynq"

// traceContext is the W3C trace context (traceparent, tracestate) that a
// task carries in its headers from its enqueue to the worker.
var traceContext propagation.TraceContext

// producerKind is the start option of an enqueue's span, made once: an
// untraced enqueue allocates no option.
var producerKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}

// WithTracerProvider sets the TracerProvider of the Client's enqueue
// spans; by default otel.GetTracerProvider(), the no-op one until the
// program sets another. A nil tp keeps the default.
func WithTracerProvider(tp trace.TracerProvider) ClientOption {
	return func(c *Client) {
		if tp != nil {
			c.tracer = tp.Tracer(TracerName)
		}
	}
}

// tracerOf returns the tracer a Client starts its spans with.
func (c *Client) tracerOf() trace.Tracer {
	if c.tracer != nil {
		return c.tracer
	}
	return otel.GetTracerProvider().Tracer(TracerName)
}

// startSend starts the PRODUCER span of task's enqueue and, when it is
// recorded, returns a copy of task carrying its trace context in its
// headers. Unrecorded (traces off), task is returned as it is.
func (c *Client) startSend(ctx context.Context, task *asynq.Task, tenant string) (context.Context, trace.Span, *asynq.Task) {
	ctx, span := c.tracerOf().Start(ctx, "send", producerKind...)
	if !span.IsRecording() {
		return ctx, span, task
	}
	span.SetAttributes(semconv.MessagingSystemKey.String(MessagingSystem),
		semconv.MessagingOperationTypeSend, semconv.MessagingOperationName("send"),
		attribute.String("sluice.task.type", task.Type()), attribute.String("sluice.tenant", tenant))
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	if traced, ok := withHeaders(task, carrier); ok {
		task = traced
	}
	return ctx, span, task
}

// endSend ends span, the enqueue's, with where the task went or err.
func endSend(span trace.Span, info *asynq.TaskInfo, err error) {
	if span.IsRecording() {
		if info != nil {
			span.SetName("send " + info.Queue)
			span.SetAttributes(semconv.MessagingDestinationName(info.Queue), semconv.MessagingMessageID(info.ID))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
