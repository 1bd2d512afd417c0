package provider

import (
	"context"
	"log/slog"

	"github.com/sluicehq/sluice/producer"
)

// LogProvider prints what it would send, through its logger, and sends
// nothing. Its zero value logs to slog.Default().
type LogProvider struct {
	Logger *slog.Logger
}

var (
	_ SMSProvider   = LogProvider{}
	_ EmailProvider = LogProvider{}
)

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
