package producer

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// TypeSMS is the asynq task type of an SMS; its payload is an SMS.
const TypeSMS = "sms:send"

// MaxSMSBody is the longest SMS body, in characters (runes). A provider
// splits a long body into segments, each billed as one message.
const MaxSMSBody = 1600

// SMS is the payload of a TypeSMS task, as JSON:
//
//	{"to": "+15551234567", "body": "Your code is 123456"}
type SMS struct {
	// To is the recipient's phone number in E.164 form: "+", the country
	// code, then the number, 2 to 15 digits in all, the first not 0.
	To string `json:"to"`

	// Body is the text to send: valid UTF-8, not only spaces, at most
	// MaxSMSBody characters.
	Body string `json:"body"`
}

// e164 matches an E.164 phone number.
var e164 = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)

// Validate reports whether m can be sent. The error is a *FieldError for the
// field "to" or "body".
func (m SMS) Validate() error {
	if !e164.MatchString(m.To) {
		return fieldError("to", m.To, "not an E.164 phone number (+ then 2 to 15 digits, no leading 0)")
	}
	switch {
	case !utf8.ValidString(m.Body):
		return fieldError("body", m.Body, "is not valid UTF-8")
	case strings.TrimSpace(m.Body) == "":
		return fieldError("body", m.Body, "is empty or only spaces")
	}
	if n := utf8.RuneCountInString(m.Body); n > MaxSMSBody {
		return fieldError("body", m.Body, "is %d characters, more than %d", n, MaxSMSBody)
	}
	return nil
}

// DecodeSMS parses and validates the payload of a TypeSMS task. A payload
// larger than MaxPayload is refused unread (a *PayloadSizeError). The JSON
// is read strictly: an unknown field, a value of the wrong type or anything
// after the object is an error. Every error matches ErrInvalid; one about a
// field is a *FieldError naming it.
func DecodeSMS(payload []byte) (SMS, error) {
	return decodeMessage[SMS](TypeSMS, payload)
}
