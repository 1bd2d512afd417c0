package producer_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
