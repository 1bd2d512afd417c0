// Package provider holds what Sluice's workers send through: the SMS and
// email provider interfaces, the providers that ship with Sluice, and the
// errors by which a provider says what became of a message.
//
// The pieces, one file each:
//
//   - message.go: Message, what a provider is asked to send, and the
//     SMSProvider and EmailProvider interfaces.
//   - webhook.go: Webhook, SMS by an HTTP POST; its answers as StatusError,
//     a 429's Retry-After read by ParseRetryAfter.
//   - smtp.go: SMTP, email through an SMTP server, with StartTLSMode.
//   - log.go: LogProvider, which logs what it would send.
//   - errors.go: the error classes a provider returns: ThrottledError (wait,
//     not a failure; IsThrottled), Permanent (archive, never retry); any
//     other error is retried with backoff.
//   - observed.go: ObserveSMS and ObserveEmail, which tell each Answer
//     what a provider answered to a message (an Event): the worker's
//     observers (worker.Observer), such as its metrics and status page.
//
// The worker (package worker) routes each task to its provider and acts
// on these errors; this package does not import it.
//
// Everything is safe for concurrent use unless its documentation says
// otherwise.
package provider
