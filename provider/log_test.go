package provider_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/syncbuf"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
)

// TestLogProvider sends nothing and logs what it would send.
func TestLogProvider(t *testing.T) {
	t.Parallel()
	var buf syncbuf.Buffer
	p := provider.LogProvider{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}
	ctx := context.Background()
	if err := p.SendSMS(ctx, provider.Message[producer.SMS]{ID: "t1", Tenant: "acme", Payload: goodSMS}); err != nil {
		t.Errorf("SendSMS: %v", err)
	}
	if err := p.SendEmail(ctx, provider.Message[producer.Email]{ID: "t2", Tenant: "globex", Payload: goodEmail}); err != nil {
		t.Errorf("SendEmail: %v", err)
	}
	want := []map[string]any{
		{"level": "INFO", "msg": "sms", "id": "t1", "tenant": "acme", "to": goodSMS.To, "body": goodSMS.Body},
		{"level": "INFO", "msg": "email", "id": "t2", "tenant": "globex", "to": goodEmail.To, "subject": goodEmail.Subject},
	}
	if diff := cmp.Diff(want, buf.JSONLines(t), ignoreTime); diff != "" {
		t.Errorf("logs (-want +got):\n%s", diff)
	}
}
