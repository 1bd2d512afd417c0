package provider

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/producer"
)

// Event is what a provider answered to one message: the name the provider
// was observed under ("sms", "email"), the message's task ID and tenant,
// and the error its send returned, nil when the provider took the message.
// It is a struct so that what an observer learns can grow by fields.
type Event struct {
	Provider string
	TaskID   string
	Tenant   string
	Err      error

	// TaskType is the type of the message's task (producer.TypeSMS or
	// TypeEmail); Priority and Enqueued are the message's.
	TaskType string
	Priority int
	Enqueued time.Time
}

// An Answer is told what a provider answered to each message. It runs in
// the task's goroutine, after the send, so it must be quick and safe for
// concurrent use. The worker turns each of its Observers (worker.Observer)
// into one.
type Answer func(Event)

// ObserveSMS returns p wrapped so that each of answers is told, under name,
// what p answered to every message; the error is returned unchanged. With
// no answers it returns p itself.
func ObserveSMS(name string, p SMSProvider, answers ...Answer) SMSProvider {
	if len(answers) == 0 {
		return p
	}
	return observedSMS{observed[producer.SMS]{name, producer.TypeSMS, p.SendSMS, answers}}
}

// ObserveEmail is ObserveSMS for an EmailProvider.
func ObserveEmail(name string, p EmailProvider, answers ...Answer) EmailProvider {
	if len(answers) == 0 {
		return p
	}
	return observedEmail{observed[producer.Email]{name, producer.TypeEmail, p.SendEmail, answers}}
}

// observed tells each of answers what the provider named name answered to
// each message: observedSMS and observedEmail are it for each kind of
// provider.
type observed[P any] struct {
	name     string
	taskType string
	send     func(context.Context, Message[P]) error
	answers  []Answer
}

func (o observed[P]) do(ctx context.Context, m Message[P]) error {
	err := o.send(ctx, m)
	e := Event{Provider: o.name, TaskID: m.ID, Tenant: m.Tenant, Err: err, TaskType: o.taskType, Priority: m.Priority, Enqueued: m.Enqueued}
	for _, a := range o.answers {
		a(e)
	}
	return err
}

type observedSMS struct{ observed[producer.SMS] }

func (s observedSMS) SendSMS(ctx context.Context, m Message[producer.SMS]) error { return s.do(ctx, m) }

type observedEmail struct{ observed[producer.Email] }

func (e observedEmail) SendEmail(ctx context.Context, m Message[producer.Email]) error {
	return e.do(ctx, m)
}
