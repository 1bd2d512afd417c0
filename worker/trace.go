package worker

import (
	"context"
	"errors"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
)

// TracerName is the name of the tracer of the worker's spans
// (docs/TRACING.md).
const TracerName = "github.com/sluicehq/sluice/worker"

// traceContext reads the W3C trace context the producer put in a task's
// headers; a task without the traceparent header has none.
var traceContext propagation.TraceContext

// traceparent is the W3C header a traced enqueue writes.
const traceparent = "traceparent"

// consumer is the start option of a run's span, made once: the hot path
// of an untraced run allocates no option.
var consumer = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}

// tracerOf returns the tracer of tp, or of otel.GetTracerProvider() when
// tp is nil: the no-op one until the program sets another.
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(TracerName)
}

// startProcess starts the CONSUMER span of one run of task: a child of
// the span of the task's enqueue, which it also links to, as the
// messaging conventions ask, so that the task's spans from its enqueue to
// its send share one trace. A task without trace context starts a trace.
func (t *Throttle) startProcess(ctx context.Context, task *asynq.Task) (context.Context, trace.Span) {
	var span trace.Span
	if _, ok := task.Headers()[traceparent]; !ok {
		ctx, span = t.tracer.Start(ctx, "process", consumer...)
	} else {
		ctx = traceContext.Extract(ctx, propagation.MapCarrier(task.Headers()))
		link := trace.WithLinks(trace.Link{SpanContext: trace.SpanContextFromContext(ctx)})
		ctx, span = t.tracer.Start(ctx, "process", consumer[0], link)
	}
	if !span.IsRecording() {
		return ctx, span
	}
	queue, _ := asynq.GetQueueName(ctx)
	span.SetName("process " + queue)
	id, _ := asynq.GetTaskID(ctx)
	retried, _ := asynq.GetRetryCount(ctx)
	span.SetAttributes(semconv.MessagingSystemKey.String(producer.MessagingSystem),
		semconv.MessagingOperationTypeProcess, semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(queue), semconv.MessagingMessageID(id),
		attribute.String("sluice.task.type", task.Type()),
		attribute.String("sluice.tenant", task.Headers()[producer.HeaderTenant]),
		attribute.Int("sluice.retried", retried))
	return ctx, span
}

// endProcess ends span, a run's, with its outcome: a return to the queue
// (throttled) is an event, not an error; a failure is an error.
func endProcess(span trace.Span, err error) {
	if span.IsRecording() && err != nil {
		var te *provider.ThrottledError
		if errors.As(err, &te) && !te.FromProvider {
			span.AddEvent("sluice.returned", trace.WithAttributes(
				attribute.String("sluice.by", te.By), attribute.Float64("sluice.retry_after_seconds", te.RetryAfter.Seconds())))
		} else {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// child starts an INTERNAL span named name under the span of ctx when that
// one is recorded; otherwise it returns ctx and the span of ctx as they
// are, so that an untraced task pays nothing for it.
func child(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span, bool) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent, false
	}
	ctx, span := parent.TracerProvider().Tracer(TracerName).Start(ctx, name, trace.WithSpanKind(kind))
	return ctx, span, true
}

// traced runs f within a span named name, a child of the span of ctx,
// and ends it with f's outcome: ok, returned (throttled) or error.
func traced(ctx context.Context, name string, kind trace.SpanKind, f func(context.Context) error) error {
	ctx, span, ok := child(ctx, name, kind)
	if !ok {
		return f(ctx)
	}
	start := time.Now()
	err := f(ctx)
	span.SetAttributes(attribute.Float64("sluice.seconds", time.Since(start).Seconds()))
	var te *provider.ThrottledError
	switch {
	case err == nil:
		span.SetAttributes(attribute.String("sluice.outcome", "ok"))
	case errors.As(err, &te) && !te.FromProvider:
		span.SetAttributes(attribute.String("sluice.outcome", "returned"), attribute.String("sluice.by", te.By))
	default:
		span.SetAttributes(attribute.String("sluice.outcome", "error"))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return err
}

// Names of the worker's child spans.
const (
	spanAdmit    = "sluice.admit"    // provider hold, limiter, wait for the place in line
	spanDecide   = "sluice.decide"   // one limiter call
	spanProvider = "sluice.provider" // the provider call
)

// endDecide ends span, a limiter call's, with its answer: allowed, or how
// long until the task's place; or the call's error.
func endDecide(span trace.Span, allowed bool, wait time.Duration, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attribute.Bool("sluice.allowed", allowed))
		if !allowed {
			span.SetAttributes(attribute.Float64("sluice.retry_after_seconds", wait.Seconds()))
		}
	}
	span.End()
}

// endTurn ends span, an arrival's in the fair lines, with its turn.
func endTurn(span trace.Span, turn throttle.Turn, err error) {
	span.SetAttributes(attribute.String("sluice.turn", turn.Outcome.String()))
	endDecide(span, turn.Outcome == throttle.Admitted, turn.Wait, err)
}
