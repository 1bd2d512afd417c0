package producer_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/sluicehq/sluice/producer"
)

func TestDecodeSMS(t *testing.T) {
	t.Parallel()
	got, err := producer.DecodeSMS([]byte(` {"to": "+15551234567", "body": "Your code is 123456"} ` + "\n"))
	if err != nil {
		t.Fatalf("DecodeSMS: %v", err)
	}
	if diff := cmp.Diff(goodSMS, got); diff != "" {
		t.Errorf("DecodeSMS (-want +got):\n%s", diff)
	}
	cases := []struct {
		name    string
		payload string
		field   string // the *FieldError's field, "" for none
		want    string // in the message
	}{
		{"empty", ``, "", "producer: decode sms:send payload: invalid task: the payload is empty"},
		{"spaces", "  \n", "", "the payload is empty"},
		{"unknown field", `{"to":"+15551234567","body":"hi","cc":"+15550000000"}`, "", `json: unknown field "cc"`},
		{"unknown field of 100 KB", `{"to":"+15551234567","body":"hi","` + mb[:100<<10] + `":1}`, "", `json: unknown field "` + mb[:40] + `"... (102400 bytes)`},
		{"1 MB", `{"to":"+15551234567","body":"hi","` + mb + `":1}`, "", "producer: decode sms:send payload: invalid task: the payload is 1048614 bytes of JSON, more than the limit of 524288"},
		{"trailing object", `{"to":"+15551234567","body":"hi"}{}`, "", "data after the JSON object"},
		{"trailing garbage", `{"to":"+15551234567","body":"hi"}xyz`, "", "data after the JSON object"},
		{"two objects", `{"to":"+15551234567","body":"hi"} {"to":"+15551234567","body":"hi"}`, "", "data after the JSON object"},
		{"to number", `{"to":15551234567,"body":"hi"}`, "to", "invalid task: to (number): is not a JSON string"},
		{"body array", `{"to":"+15551234567","body":["hi"]}`, "body", "invalid task: body (array): is not a JSON string"},
		{"array", `[]`, "", "cannot unmarshal array"},
		{"string", `"hi"`, "", "cannot unmarshal string"},
		{"truncated", `{"to":"+15551234567","body":"hi"`, "", "unexpected EOF"},
		{"not JSON", `to=+15551234567`, "", "invalid character"},
		{"null", `null`, "to", `invalid task: to "": not an E.164 phone number`},
		{"missing body", `{"to":"+15551234567"}`, "body", `invalid task: body "": is empty or only spaces`},
		{"bad to", `{"to":"+1555x","body":"hi"}`, "to", `producer: decode sms:send payload: invalid task: to "+1555x": not an E.164 phone number`},
		{"escaped newline", `{"to":"+15551234567\n","body":"hi"}`, "to", `invalid task: to "+15551234567\n": not an E.164 phone number`},
		{"long body", `{"to":"+15551234567","body":"` + strings.Repeat("x", producer.MaxSMSBody+1) + `"}`, "body", "is 1601 characters, more than 1600"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := producer.DecodeSMS([]byte(tc.payload))
			assertInvalid(t, err, tc.field)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if m != (producer.SMS{}) {
				t.Errorf("DecodeSMS returned %+v with an error, want the zero SMS", m)
			}
		})
	}
}

func TestDecodeEmail(t *testing.T) {
	t.Parallel()
	got, err := producer.DecodeEmail([]byte(`{"to":"ada@example.com","subject":"Welcome","body":"Hello <b>Ada</b> & co","from":"team@example.com"}`))
	if err != nil {
		t.Fatalf("DecodeEmail: %v", err)
	}
	if diff := cmp.Diff(goodEmail, got); diff != "" {
		t.Errorf("DecodeEmail (-want +got):\n%s", diff)
	}
	noFrom, err := producer.DecodeEmail([]byte(`{"to":"ada@example.com","subject":"Hi","body":"Hello"}`))
	if err != nil || noFrom.From != "" {
		t.Errorf("DecodeEmail without from = %+v, %v; want an empty From and no error", noFrom, err)
	}
	cases := []struct {
		name    string
		payload string
		field   string
		want    string
	}{
		{"empty", ``, "", "producer: decode email:send payload: invalid task: the payload is empty"},
		{"unknown field", `{"to":"ada@example.com","subject":"Hi","body":"Hello","bcc":"eve@example.com"}`, "", `json: unknown field "bcc"`},
		{"trailing garbage", `{"to":"ada@example.com","subject":"Hi","body":"Hello"},`, "", "data after the JSON object"},
		{"subject number", `{"to":"ada@example.com","subject":1,"body":"Hello"}`, "subject", "invalid task: subject (number): is not a JSON string"},
		{"from object", `{"to":"ada@example.com","subject":"Hi","body":"Hello","from":{}}`, "from", "invalid task: from (object): is not a JSON string"},
		{"null", `null`, "to", `invalid task: to "": is empty`},
		{"subject injection", `{"to":"ada@example.com","subject":"Hi\r\nBcc: eve@example.com","body":"Hello"}`, "subject", "contains a line break (CR or LF)"},
		{"display name", `{"to":"Ada <ada@example.com>","subject":"Hi","body":"Hello"}`, "to", "not a bare email address"},
		{"missing body", `{"to":"ada@example.com","subject":"Hi"}`, "body", `invalid task: body "": is empty`},
		{"SMS payload", `{"to":"+15551234567","body":"hi"}`, "to", `invalid task: to "+15551234567": not an email address`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := producer.DecodeEmail([]byte(tc.payload))
			assertInvalid(t, err, tc.field)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if m != (producer.Email{}) {
				t.Errorf("DecodeEmail returned %+v with an error, want the zero Email", m)
			}
		})
	}
}

// maxErrorLen bounds the message of an error about bad input, whatever its
// size: values are quoted cut short (FieldError), so a 1 MB field does not
// make a 1 MB log line.
const maxErrorLen = 1024

// FuzzDecodePayload gives the same bytes to DecodeSMS and DecodeEmail, as a
// worker does with a task's payload. Neither may panic; each either returns
// a message that validates and survives a round trip through JSON, or the
// zero message and one line of error, of bounded length, that matches
// ErrInvalid and names the task type.
func FuzzDecodePayload(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `"hi"`, `0`,
		`{"to":"+15551234567","body":"Your code is 123456"}`,
		`{"to":"ada@example.com","subject":"Welcome","body":"Hello <b>Ada</b> & co","from":"team@example.com"}`,
		`{"to":"+15551234567","body":"hi"}{}`,
		`{"to":"+15551234567","body":"hi","cc":"x"}`,
		`{"to":15551234567,"body":["hi"]}`,
		`{"to":"ada@example.com","subject":"Hi\r\nBcc: eve@example.com","body":"Hello"}`,
		`{"to":"Ada <ada@example.com>","subject":"Hi","body":"Hello"}`,
		`{"to":"+15551234567","body":"\ud800\u0000"}`,
		"{\"to\":\"+15551234567\",\"body\":\"\xff\"}",
		`{"TO":"+15551234567","Body":"case"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		sms, err := producer.DecodeSMS(payload)
		checkDecoded(t, producer.TypeSMS, sms, err, producer.DecodeSMS)
		email, err := producer.DecodeEmail(payload)
		checkDecoded(t, producer.TypeEmail, email, err, producer.DecodeEmail)
	})
}

// checkDecoded checks what a decoder of task type typ returned (see
// FuzzDecodePayload); decode is the decoder, for the round trip.
func checkDecoded[M interface {
	comparable
	Validate() error
}](t *testing.T, typ string, m M, err error, decode func([]byte) (M, error)) {
	t.Helper()
	var zero M
	if err != nil {
		msg := err.Error()
		if !errors.Is(err, producer.ErrInvalid) {
			t.Errorf("%s: error %q does not match ErrInvalid", typ, msg)
		}
		if prefix := "producer: decode " + typ + " payload: invalid task: "; !strings.HasPrefix(msg, prefix) || len(msg) == len(prefix) {
			t.Errorf("%s: error %q does not start with %q and say what is wrong", typ, msg, prefix)
		}
		if strings.ContainsAny(msg, "\r\n") || len(msg) > maxErrorLen {
			t.Errorf("%s: error of %d bytes, want one line of at most %d: %.300q", typ, len(msg), maxErrorLen, msg)
		}
		if m != zero {
			t.Errorf("%s: %+v returned with an error, want the zero value", typ, m)
		}
		return
	}
	if err := m.Validate(); err != nil {
		t.Errorf("%s: decoded %+v, which does not validate: %v", typ, m, err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("%s: encode %+v: %v", typ, m, err)
	}
	if again, err := decode(b); err != nil || again != m {
		t.Errorf("%s: %+v encodes to %s, which decodes to %+v, %v", typ, m, b, again, err)
	}
}

// hostileStrings are values that have broken parsers and key schemes:
// braces, colons and slashes that mean something in Redis keys, line
// breaks, NUL and other control bytes, invalid UTF-8, escapes, and 1 MB.
func hostileStrings() map[string]string {
	return map[string]string{
		"braces":        "{acme}",
		"close brace":   "acme}",
		"colon":         "acme:eu",
		"slash":         "acme/eu",
		"newline":       "acme\nBcc: eve@example.com",
		"CRLF":          "\r\n",
		"NUL":           "a\x00b",
		"invalid UTF-8": "\xff\xfe\xc3",
		"percent":       "%7B%25",
		"quote":         `"},"to":"+15550000000`,
		"1 MB":          mb,
		"1 MB of {":     strings.Repeat("{", 1<<20),
		"1 MB of NUL":   strings.Repeat("\x00", 1<<20),
	}
}

// jsonString returns s as a JSON string, its bytes as they are but for
// quotes, backslashes and control bytes, which JSON requires escaped: unlike
// json.Marshal, it keeps invalid UTF-8 for the decoder to meet.
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// TestHostilePayloads puts each hostile string in each field of an SMS and
// an email payload, as the name of a field, and in each field of a bulk
// line: every one is rejected or accepted, never a panic, and a rejection is
// one line of bounded length that says what is wrong (see
// FuzzDecodePayload and FuzzReadBulk for the properties checked).
func TestHostilePayloads(t *testing.T) {
	t.Parallel()
	for name, h := range hostileStrings() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			v := jsonString(h)
			payloads := []string{
				`{"to":` + v + `,"body":"hi"}`,
				`{"to":"+15551234567","body":` + v + `}`,
				`{"to":` + v + `,"subject":"Hi","body":"Hello"}`,
				`{"to":"ada@example.com","subject":` + v + `,"body":"Hello"}`,
				`{"to":"ada@example.com","subject":"Hi","body":` + v + `}`,
				`{"to":"ada@example.com","subject":"Hi","body":"Hello","from":` + v + `}`,
				`{"to":"+15551234567","body":"hi",` + v + `:1}`,
				`{"to":"ada@example.com","subject":"Hi","body":"Hello",` + v + `:1}`,
			}
			for _, p := range payloads {
				sms, err := producer.DecodeSMS([]byte(p))
				checkDecoded(t, producer.TypeSMS, sms, err, producer.DecodeSMS)
				email, err := producer.DecodeEmail([]byte(p))
				checkDecoded(t, producer.TypeEmail, email, err, producer.DecodeEmail)
			}
			if _, err := producer.NewSMSTask(h, goodSMS); err == nil {
				t.Errorf("NewSMSTask accepted the tenant %.80q", h)
			}
			var bulk strings.Builder
			for _, field := range []string{"type", "tenant", "to", "body", "id", "queue", "process_in", "process_at"} {
				bulk.WriteString(`{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi","` + field + `":` + v + "}\n")
			}
			bulk.WriteString(`{"type":"email","tenant":"acme","to":"ada@example.com","subject":` + v + `,"body":"Hello"}` + "\n")
			bulk.WriteString(`{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi",` + v + ":1}\n")
			err := producer.ReadBulk(strings.NewReader(bulk.String()), func(line int, task *asynq.Task, opts []asynq.Option, err error) error {
				if err != nil {
					checkLineError(t, line, task, opts, err)
				} else {
					checkBulkTask(t, line, task, opts)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("ReadBulk: %v", err)
			}
		})
	}
}
