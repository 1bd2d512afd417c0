package provider_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
)

// fakeSMS is an SMSProvider that records what it is asked to send and
// returns err.
type fakeSMS struct {
	got chan provider.Message[producer.SMS]
	err error
}

func (f *fakeSMS) SendSMS(_ context.Context, m provider.Message[producer.SMS]) error {
	f.got <- m
	return f.err
}

// fakeEmail is fakeSMS for email.
type fakeEmail struct {
	got chan provider.Message[producer.Email]
	err error
}

func (f *fakeEmail) SendEmail(_ context.Context, m provider.Message[producer.Email]) error {
	f.got <- m
	return f.err
}

// TestObserve: every answer is told each message's outcome under the name
// given, with its task ID and tenant, the provider gets the message as it
// is, and its error comes back unchanged; with no answers the provider is
// returned itself.
func TestObserve(t *testing.T) {
	t.Parallel()
	errDown := errors.New("provider down")
	throttled := &provider.ThrottledError{By: "provider 429", FromProvider: true}
	cases := []struct {
		name string
		err  error
	}{
		{"sent", nil},
		{"failed", errDown},
		{"throttled", throttled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var first, second []provider.Event
			answers := []provider.Answer{
				func(e provider.Event) { first = append(first, e) },
				func(e provider.Event) { second = append(second, e) },
			}
			sms := &fakeSMS{got: make(chan provider.Message[producer.SMS], 1), err: tc.err}
			email := &fakeEmail{got: make(chan provider.Message[producer.Email], 1), err: tc.err}
			ctx := context.Background()

			enqueued := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
			smsMsg := provider.Message[producer.SMS]{ID: "t1", Tenant: "acme", Payload: goodSMS, Priority: 1, Enqueued: enqueued}
			if err := provider.ObserveSMS("sms", sms, answers...).SendSMS(ctx, smsMsg); err != tc.err {
				t.Errorf("SendSMS = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(smsMsg, testwait.Receive(t, sms.got, "SMS")); diff != "" {
				t.Errorf("SMS message (-want +got):\n%s", diff)
			}
			emailMsg := provider.Message[producer.Email]{ID: "t2", Tenant: "globex", Payload: goodEmail}
			if err := provider.ObserveEmail("email", email, answers...).SendEmail(ctx, emailMsg); err != tc.err {
				t.Errorf("SendEmail = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(emailMsg, testwait.Receive(t, email.got, "email")); diff != "" {
				t.Errorf("email message (-want +got):\n%s", diff)
			}

			want := []provider.Event{
				{Provider: "sms", TaskID: "t1", Tenant: "acme", Err: tc.err, TaskType: producer.TypeSMS, Priority: 1, Enqueued: enqueued},
				{Provider: "email", TaskID: "t2", Tenant: "globex", Err: tc.err, TaskType: producer.TypeEmail},
			}
			for i, got := range [][]provider.Event{first, second} {
				if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
					t.Errorf("answer %d told (-want +got):\n%s", i, diff)
				}
			}
		})
	}

	sms, email := &fakeSMS{}, &fakeEmail{}
	if got := provider.ObserveSMS("sms", sms); got != provider.SMSProvider(sms) {
		t.Errorf("ObserveSMS with no answers = %v, want the provider itself", got)
	}
	if got := provider.ObserveEmail("email", email); got != provider.EmailProvider(email) {
		t.Errorf("ObserveEmail with no answers = %v, want the provider itself", got)
	}
}
