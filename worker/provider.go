package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/producer"
)

// Message is what a provider is asked to send: the task's ID (use it as the
// idempotency key: a task can reach a provider twice when a worker dies
// mid-send) and tenant, and the payload.
type Message[P any] struct {
	ID      string
	Tenant  string
	Payload P
}

// SMSProvider sends text messages. Send returns nil when the provider took
// the message; a *ThrottledError when the provider asked to wait (429); an
// error wrapping asynq.SkipRetry when retrying cannot help (a rejected
// number); any other error to retry with backoff.
type SMSProvider interface {
	SendSMS(ctx context.Context, m Message[producer.SMS]) error
}

// EmailProvider sends email, with the error conventions of SMSProvider.
type EmailProvider interface {
	SendEmail(ctx context.Context, m Message[producer.Email]) error
}

// LogProvider prints what it would send, through its logger, and sends
// nothing. Its zero value logs to slog.Default().
type LogProvider struct {
	Logger *slog.Logger
}

func (p LogProvider) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.Default()
	}
	return p.Logger
}

// SendSMS logs the message.
func (p LogProvider) SendSMS(ctx context.Context, m Message[producer.SMS]) error {
	p.logger().InfoContext(ctx, "sms", "id", m.ID, "tenant", m.Tenant, "to", m.Payload.To, "body", m.Payload.Body)
	return nil
}

// SendEmail logs the message.
func (p LogProvider) SendEmail(ctx context.Context, m Message[producer.Email]) error {
	p.logger().InfoContext(ctx, "email", "id", m.ID, "tenant", m.Tenant, "to", m.Payload.To, "subject", m.Payload.Subject)
	return nil
}

// Handler returns the asynq handler that sends sms:send tasks through sms
// and email:send tasks through email. A malformed payload, a task type it
// does not know, or a type with no provider is archived with a clear error,
// never retried; so is a payload larger than producer.MaxPayload, which is
// not decoded. A nil provider is for a server whose queues never hold that
// type's tasks; NewServer refuses one.
func Handler(sms SMSProvider, email EmailProvider) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		tenant := task.Headers()[producer.HeaderTenant]
		switch task.Type() {
		case producer.TypeSMS:
			if sms == nil {
				return fmt.Errorf("%w: no SMS provider configured", asynq.SkipRetry)
			}
			p, err := producer.DecodeSMS(task.Payload())
			if err != nil {
				return fmt.Errorf("%w: %v", asynq.SkipRetry, err)
			}
			return sms.SendSMS(ctx, Message[producer.SMS]{ID: id, Tenant: tenant, Payload: p})
		case producer.TypeEmail:
			if email == nil {
				return fmt.Errorf("%w: no email provider configured", asynq.SkipRetry)
			}
			p, err := producer.DecodeEmail(task.Payload())
			if err != nil {
				return fmt.Errorf("%w: %v", asynq.SkipRetry, err)
			}
			return email.SendEmail(ctx, Message[producer.Email]{ID: id, Tenant: tenant, Payload: p})
		}
		return fmt.Errorf("%w: unknown task type %q", asynq.SkipRetry, task.Type())
	})
}

// Permanent marks err as one that retrying cannot fix: the task is archived.
func Permanent(err error) error {
	if err == nil || errors.Is(err, asynq.SkipRetry) {
		return err
	}
	return fmt.Errorf("%w: %w", asynq.SkipRetry, err)
}

// observed tells each of answers (the metrics, the status page's
// activity) what the provider named name answered to each message:
// observedSMS and observedEmail are it for each kind of provider.
type observed[P any] struct {
	name    string
	send    func(context.Context, Message[P]) error
	answers []func(provider string, err error)
}

func (o observed[P]) do(ctx context.Context, m Message[P]) error {
	err := o.send(ctx, m)
	for _, a := range o.answers {
		a(o.name, err)
	}
	return err
}

type observedSMS struct{ observed[producer.SMS] }

func (s observedSMS) SendSMS(ctx context.Context, m Message[producer.SMS]) error { return s.do(ctx, m) }

type observedEmail struct{ observed[producer.Email] }

func (e observedEmail) SendEmail(ctx context.Context, m Message[producer.Email]) error {
	return e.do(ctx, m)
}
