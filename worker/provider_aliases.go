package worker

import (
	"time"

	"github.com/sluicehq/sluice/provider"
)

// The providers, their interfaces and their error classes moved to package
// provider. The names below keep code written against package worker
// compiling for one release; they go in the next.

// Message is what a provider is asked to send.
//
// Deprecated: use provider.Message.
type Message[P any] = provider.Message[P]

// SMSProvider sends text messages.
//
// Deprecated: use provider.SMSProvider.
type SMSProvider = provider.SMSProvider

// EmailProvider sends email.
//
// Deprecated: use provider.EmailProvider.
type EmailProvider = provider.EmailProvider

// LogProvider prints what it would send and sends nothing.
//
// Deprecated: use provider.LogProvider.
type LogProvider = provider.LogProvider

// Webhook sends SMS by POSTing JSON to a URL.
//
// Deprecated: use provider.Webhook.
type Webhook = provider.Webhook

// DefaultProviderRetry is how long a task waits after a 429 without a
// usable Retry-After.
//
// Deprecated: use provider.DefaultProviderRetry.
const DefaultProviderRetry = provider.DefaultProviderRetry

// StatusError is a webhook's answer to a message it did not take.
//
// Deprecated: use provider.StatusError.
type StatusError = provider.StatusError

// ParseRetryAfter reads an HTTP Retry-After value as a wait from now.
//
// Deprecated: use provider.ParseRetryAfter.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	return provider.ParseRetryAfter(v, now)
}

// SMTP sends email through an SMTP server.
//
// Deprecated: use provider.SMTP.
type SMTP = provider.SMTP

// DefaultSMTPTimeout is the SMTP provider's Timeout when none is set.
//
// Deprecated: use provider.DefaultSMTPTimeout.
const DefaultSMTPTimeout = provider.DefaultSMTPTimeout

// StartTLSMode says when an SMTP connection is upgraded to TLS.
//
// Deprecated: use provider.StartTLSMode.
type StartTLSMode = provider.StartTLSMode

// STARTTLS modes.
const (
	// StartTLSRequire upgrades every connection.
	//
	// Deprecated: use provider.StartTLSRequire.
	StartTLSRequire = provider.StartTLSRequire

	// StartTLSOpportunistic upgrades when the server offers STARTTLS.
	//
	// Deprecated: use provider.StartTLSOpportunistic.
	StartTLSOpportunistic = provider.StartTLSOpportunistic

	// StartTLSOff never upgrades.
	//
	// Deprecated: use provider.StartTLSOff.
	StartTLSOff = provider.StartTLSOff
)

// ThrottledError is returned by a task handler when the task must wait.
//
// Deprecated: use provider.ThrottledError.
type ThrottledError = provider.ThrottledError

// IsThrottled reports whether err is, or wraps, a ThrottledError.
//
// Deprecated: use provider.IsThrottled.
func IsThrottled(err error) bool { return provider.IsThrottled(err) }

// Permanent marks err as one that retrying cannot fix: the task is archived.
//
// Deprecated: use provider.Permanent.
func Permanent(err error) error { return provider.Permanent(err) }
