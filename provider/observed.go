package provider

import (
	"context"

	"github.com/sluicehq/sluice/producer"
)

// An Answer is told what a provider answered to one message: the name the
// provider was observed under ("sms", "email") and the error its send
// returned, nil when the provider took the message. It runs in the task's
// goroutine, after the send, so it must be quick and safe for concurrent
// use. The worker's metrics and the status page's activity are Answers.
type Answer func(provider string, err error)

// ObserveSMS returns p wrapped so that each of answers is told, under name,
// what p answered to every message; the error is returned unchanged. With
// no answers it returns p itself.
func ObserveSMS(name string, p SMSProvider, answers ...Answer) SMSProvider {
	if len(answers) == 0 {
		return p
	}
	return observedSMS{observed[producer.SMS]{name, p.SendSMS, answers}}
}

// ObserveEmail is ObserveSMS for an EmailProvider.
func ObserveEmail(name string, p EmailProvider, answers ...Answer) EmailProvider {
	if len(answers) == 0 {
		return p
	}
	return observedEmail{observed[producer.Email]{name, p.SendEmail, answers}}
}

// observed tells each of answers what the provider named name answered to
// each message: observedSMS and observedEmail are it for each kind of
// provider.
type observed[P any] struct {
	name    string
	send    func(context.Context, Message[P]) error
	answers []Answer
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
