package provider

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/producer"
)

// Message is what a provider is asked to send: the task's ID (use it as the
// idempotency key: a task can reach a provider twice when a worker dies
// mid-send) and tenant, and the payload.
type Message[P any] struct {
	ID      string
	Tenant  string
	Payload P

	// Priority is the task's priority, 1 (most urgent) to 5; 0 when not
	// known.
	Priority int

	// Enqueued is when the task began to wait to be sent (its
	// producer.HeaderEnqueued); zero when not known.
	Enqueued time.Time
}

// SMSProvider sends text messages. Send returns nil when the provider took
// the message; a *ThrottledError when the provider asked to wait (429); an
// error wrapping asynq.SkipRetry (see Permanent) when retrying cannot help
// (a rejected number); any other error to retry with backoff.
// Implementations must be safe for concurrent use: a worker sends several
// messages at once.
type SMSProvider interface {
	SendSMS(ctx context.Context, m Message[producer.SMS]) error
}

// EmailProvider sends email, with the error conventions of SMSProvider.
type EmailProvider interface {
	SendEmail(ctx context.Context, m Message[producer.Email]) error
}
