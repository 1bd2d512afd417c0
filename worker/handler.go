package worker

import (
	"context"
	"fmt"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
)

// Handler returns the asynq handler that sends sms:send tasks through sms
// and email:send tasks through email. A malformed payload, a task type it
// does not know, or a type with no provider is archived with a clear error,
// never retried; so is a payload larger than producer.MaxPayload, which is
// not decoded. A nil provider is for a server whose queues never hold
// that type's tasks; NewServer refuses one. The provider call is a span
// (docs/TRACING.md) when the task's run is traced.
func Handler(sms provider.SMSProvider, email provider.EmailProvider) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		tenant := task.Headers()[producer.HeaderTenant]
		priority, _ := producer.TaskPriority(task) // checked by the Throttle; 0 when bad
		enqueued, _ := producer.TaskEnqueued(task)
		switch task.Type() {
		case producer.TypeSMS:
			if sms == nil {
				return fmt.Errorf("%w: no SMS provider configured", asynq.SkipRetry)
			}
			p, err := producer.DecodeSMS(task.Payload())
			if err != nil {
				return fmt.Errorf("%w: %v", asynq.SkipRetry, err)
			}
			m := provider.Message[producer.SMS]{ID: id, Tenant: tenant, Payload: p, Priority: priority, Enqueued: enqueued}
			return traced(ctx, spanProvider, trace.SpanKindClient, func(ctx context.Context) error { return sms.SendSMS(ctx, m) })
		case producer.TypeEmail:
			if email == nil {
				return fmt.Errorf("%w: no email provider configured", asynq.SkipRetry)
			}
			p, err := producer.DecodeEmail(task.Payload())
			if err != nil {
				return fmt.Errorf("%w: %v", asynq.SkipRetry, err)
			}
			m := provider.Message[producer.Email]{ID: id, Tenant: tenant, Payload: p, Priority: priority, Enqueued: enqueued}
			return traced(ctx, spanProvider, trace.SpanKindClient, func(ctx context.Context) error { return email.SendEmail(ctx, m) })
		}
		return fmt.Errorf("%w: unknown task type %q", asynq.SkipRetry, task.Type())
	})
}
