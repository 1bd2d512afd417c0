package producer

import (
	"net/mail"
	"strings"
	"unicode/utf8"
)

// TypeEmail is the asynq task type of an email; its payload is an Email.
const TypeEmail = "email:send"

// Limits of an Email's fields.
const (
	// MaxEmailBody is the largest email body, in bytes (256 KiB).
	MaxEmailBody = 256 << 10

	// MaxSubject is the longest subject, in characters (runes).
	MaxSubject = 255

	// maxAddress is the longest address, in bytes (RFC 5321 paths hold 256
	// octets, two of them the angle brackets).
	maxAddress = 254
)

// Email is the payload of a TypeEmail task, as JSON:
//
//	{"to": "ada@example.com", "subject": "Welcome", "body": "Hello", "from": "team@example.com"}
type Email struct {
	// To is the recipient: a bare address such as ada@example.com, without
	// a display name or angle brackets, at most 254 bytes.
	To string `json:"to"`

	// Subject is the subject line: valid UTF-8, not empty, without CR or LF,
	// at most MaxSubject characters.
	Subject string `json:"subject"`

	// Body is the message: valid UTF-8, not empty, at most MaxEmailBody
	// bytes.
	Body string `json:"body"`

	// From is the sender, a bare address like To; empty means the
	// provider's default sender.
	From string `json:"from,omitempty"`
}

// Validate reports whether m can be sent. The error is a *FieldError for the
// field "to", "from", "subject" or "body".
func (m Email) Validate() error {
	if err := validateAddress("to", m.To); err != nil {
		return err
	}
	if m.From != "" {
		if err := validateAddress("from", m.From); err != nil {
			return err
		}
	}
	switch {
	case m.Subject == "":
		return fieldError("subject", m.Subject, "is empty")
	case !utf8.ValidString(m.Subject):
		return fieldError("subject", m.Subject, "is not valid UTF-8")
	case strings.ContainsAny(m.Subject, "\r\n"):
		// A line break would end the Subject header and start another.
		return fieldError("subject", m.Subject, "contains a line break (CR or LF)")
	}
	if n := utf8.RuneCountInString(m.Subject); n > MaxSubject {
		return fieldError("subject", m.Subject, "is %d characters, more than %d", n, MaxSubject)
	}
	switch {
	case m.Body == "":
		return fieldError("body", m.Body, "is empty")
	case len(m.Body) > MaxEmailBody:
		return fieldError("body", m.Body, "is %d bytes, more than %d", len(m.Body), MaxEmailBody)
	case !utf8.ValidString(m.Body):
		return fieldError("body", m.Body, "is not valid UTF-8")
	}
	return nil
}

// validateAddress reports whether s is a bare email address: one that
// net/mail parses to itself, so no display name, angle brackets, comments,
// quoting that parsing would change, or surrounding spaces.
func validateAddress(field, s string) error {
	if s == "" {
		return fieldError(field, s, "is empty")
	}
	if len(s) > maxAddress {
		return fieldError(field, s, "is %d bytes, more than %d", len(s), maxAddress)
	}
	a, err := mail.ParseAddress(s)
	if err != nil {
		// net/mail's errors quote the rest of the input, uncut: leave
		// them out.
		return fieldError(field, s, "not an email address like name@example.com")
	}
	if a.Address != s {
		return fieldError(field, s, "not a bare email address (want %q, without display name, brackets or spaces)", a.Address)
	}
	return nil
}

// DecodeEmail parses and validates the payload of a TypeEmail task. A
// payload larger than MaxPayload is refused unread (a *PayloadSizeError).
// The JSON is read strictly: an unknown field, a value of the wrong type or
// anything after the object is an error. Every error matches ErrInvalid; one
// about a field is a *FieldError naming it.
func DecodeEmail(payload []byte) (Email, error) {
	return decodeMessage[Email](TypeEmail, payload)
}
