package producer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// encode returns the JSON of a message, with <, > and & left as they are
// so that payloads read well in the asynq inspector.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decode reads payload, one JSON object, strictly into v. Its errors match
// ErrInvalid; a value of the wrong type gives a *FieldError.
func decode(payload []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: the payload is empty", ErrInvalid)
		}
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			return &FieldError{Field: te.Field, Value: "(" + te.Value + ")", Problem: "is not a JSON " + te.Type.String()}
		}
		// encoding/json quotes an unknown field's name whole: cut it as
		// FieldError cuts values, so that a 1 MB name does not make a
		// 1 MB message.
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			if name, uerr := strconv.Unquote(name); uerr == nil {
				return fmt.Errorf("%w: json: unknown field %s", ErrInvalid, quote(name))
			}
		}
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: data after the JSON object", ErrInvalid)
	}
	return nil
}

// decodeMessage parses and validates the payload of a task of type typ
// into an M, for DecodeSMS and DecodeEmail: the size first (the payload is
// refused unread when too large), then strict JSON, then M's Validate. Its
// errors say which type of payload failed, and on error the M is zero.
func decodeMessage[M message](typ string, payload []byte) (M, error) {
	var m M
	err := CheckPayloadSize(payload)
	if err == nil {
		err = decode(payload, &m)
	}
	if err == nil {
		err = m.Validate()
	}
	if err != nil {
		var zero M
		return zero, fmt.Errorf("producer: decode %s payload: %w", typ, err)
	}
	return m, nil
}

// MaxPayload is the largest payload a task may have, in bytes of JSON as
// asynq stores it in Redis (512 KiB). The producer refuses a larger task
// before anything reaches Redis, and the worker archives one without
// decoding it, so a payload written by another program cannot make a
// worker parse megabytes or a provider receive them.
//
// It is twice MaxEmailBody: an email body of MaxEmailBody bytes fits with
// its other fields as long as JSON escaping does not double it (a quote,
// backslash or line break takes two bytes, another control character six).
// An SMS, at most MaxSMSBody characters, is always far below it.
const MaxPayload = 512 << 10

// PayloadSizeError reports a payload larger than MaxPayload. It wraps
// ErrInvalid, and errors.As finds it in the errors of this package.
type PayloadSizeError struct {
	// Size is the payload's size, in bytes.
	Size int
}

// Error returns, for example,
//
//	invalid task: the payload is 614462 bytes of JSON, more than the limit of 524288
func (e *PayloadSizeError) Error() string {
	return fmt.Sprintf("%v: the payload is %d bytes of JSON, more than the limit of %d", ErrInvalid, e.Size, MaxPayload)
}

// Unwrap returns ErrInvalid.
func (e *PayloadSizeError) Unwrap() error { return ErrInvalid }

// CheckPayloadSize returns a *PayloadSizeError when payload is larger than
// MaxPayload, and nil otherwise. It reads only the length: call it before
// decoding a payload from elsewhere. DecodeSMS and DecodeEmail call it
// first.
func CheckPayloadSize(payload []byte) error {
	if len(payload) > MaxPayload {
		return &PayloadSizeError{Size: len(payload)}
	}
	return nil
}
