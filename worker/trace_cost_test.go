package worker

import (
	"context"
	"testing"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TestUntracedCost holds the cost of a run's spans with traces off to
// the no-op span's: the run's span allocates no more than a bare Start,
// and the child spans (admit, decide, provider) nothing.
func TestUntracedCost(t *testing.T) {
	cases := []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"no-op provider", noop.NewTracerProvider()},
		{"global provider, none set", otel.GetTracerProvider()},
	}
	task := asynq.NewTaskWithHeaders("sms:send", nil, map[string]string{"sluice-tenant": "acme"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			th := &Throttle{tracer: tracerOf(c.tp)}
			ctx := context.Background()
			bare := testing.AllocsPerRun(100, func() {
				_, span := th.tracer.Start(ctx, "bare")
				span.End()
			})
			run := testing.AllocsPerRun(100, func() {
				_, span := th.startProcess(ctx, task)
				endProcess(span, nil)
			})
			if run > bare {
				t.Errorf("a run's span allocates %v times, a bare no-op span %v", run, bare)
			}
			rctx, span := th.startProcess(ctx, task)
			defer span.End()
			children := testing.AllocsPerRun(100, func() {
				_ = traced(rctx, spanAdmit, trace.SpanKindInternal, func(ctx context.Context) error {
					_, s, _ := child(ctx, spanDecide, trace.SpanKindInternal)
					s.End()
					return nil
				})
			})
			if children != 0 {
				t.Errorf("child spans allocate %v times, want 0", children)
			}
		})
	}
}
