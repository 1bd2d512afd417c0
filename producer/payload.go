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

// wrapDecode says which payload failed to decode.
func wrapDecode(typ string, err error) error {
	return fmt.Errorf("producer: decode %s payload: %w", typ, err)
}
