package producer

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/layout"
)

// ErrInvalid is matched (errors.Is) by every error that reports bad input:
// a bad tenant, message field, payload or task. A call that returns it has
// sent nothing to Redis.
var ErrInvalid = errors.New("invalid task")

// ErrInvalidConfig is matched by the error of every call of a Client made
// with a bad option, such as a prefix with a brace (WithPrefix).
var ErrInvalidConfig = errors.New("invalid client configuration")

// ErrLayout is matched by the error of a worker's start when Redis names
// a layout (docs/SCALING.md) other than the one it was asked to run: the
// error names both. A Client follows whatever layout Redis names.
var ErrLayout = layout.ErrOther

// FieldError reports one field of a task that is wrong. It wraps ErrInvalid,
// and errors.As finds it in the errors of this package.
type FieldError struct {
	// Field names the field: "tenant", "to", "body", "subject" or "from",
	// or HeaderMaxRetry for the retry budget.
	Field string

	// Value is the field's value quoted with %q and, beyond its first 40
	// bytes, cut short, so that a 1 MB value does not make a 1 MB message.
	Value string

	// Problem says what is wrong, for a person to read.
	Problem string
}

// Error returns, for example,
//
//	invalid task: to "+1555x": not an E.164 phone number (+ then 2 to 15 digits, no leading 0)
func (e *FieldError) Error() string {
	return ErrInvalid.Error() + ": " + e.Field + " " + e.Value + ": " + e.Problem
}

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// fieldError returns a *FieldError for field with the value s.
func fieldError(field, s, format string, args ...any) error {
	return &FieldError{Field: field, Value: quote(s), Problem: fmt.Sprintf(format, args...)}
}

// maxQuoted is the number of bytes of a value that error messages show.
const maxQuoted = 40

// quote quotes s for an error message, cut after maxQuoted bytes (on a
// character boundary when s is valid UTF-8).
func quote(s string) string {
	if len(s) <= maxQuoted {
		return fmt.Sprintf("%q", s)
	}
	cut := maxQuoted
	for i := 0; i < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:cut], len(s))
}
