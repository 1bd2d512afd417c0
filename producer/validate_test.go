package producer_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/producer"
)

// mb is a 1 MB string.
var mb = strings.Repeat("a", 1<<20)

// invalidCase is a bad value and the error it must give.
type invalidCase struct {
	name  string
	value string
	want  string // the whole error message
}

func TestValidateTenant(t *testing.T) {
	t.Parallel()
	good := []string{
		"a", "A", "0", "acme", "acme-corp", "acme_corp", "acme.corp", "9lives", "a-", "a.",
		"Acme.EU-west_2", strings.Repeat("t", producer.MaxTenantLen),
	}
	for _, tenant := range good {
		if err := producer.ValidateTenant(tenant); err != nil {
			t.Errorf("ValidateTenant(%q) = %v, want nil", tenant, err)
		}
	}
	cases := []invalidCase{
		{"empty", "", `invalid task: tenant "": is empty`},
		{"too long", strings.Repeat("t", producer.MaxTenantLen+1), `invalid task: tenant "tttttttttttttttttttttttttttttttttttttttt"... (65 bytes): is 65 bytes, more than 64`},
		{"1 MB", mb, `invalid task: tenant "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"... (1048576 bytes): is 1048576 bytes, more than 64`},
		{"starts with dash", "-acme", `invalid task: tenant "-acme": does not start with a letter or digit`},
		{"starts with dot", ".acme", `invalid task: tenant ".acme": does not start with a letter or digit`},
		{"starts with underscore", "_acme", `invalid task: tenant "_acme": does not start with a letter or digit`},
		{"open brace", "acme{x", `invalid task: tenant "acme{x": has '{' at byte 4; only letters, digits, '.', '_' and '-' are allowed`},
		{"hash tag", "{acme}", `invalid task: tenant "{acme}": does not start with a letter or digit`},
		{"close brace", "acme}", `invalid task: tenant "acme}": has '}' at byte 4; only letters, digits, '.', '_' and '-' are allowed`},
		{"colon", "acme:eu", `invalid task: tenant "acme:eu": has ':' at byte 4; only letters, digits, '.', '_' and '-' are allowed`},
		{"space", "acme corp", `invalid task: tenant "acme corp": has ' ' at byte 4; only letters, digits, '.', '_' and '-' are allowed`},
		{"trailing newline", "acme\n", `invalid task: tenant "acme\n": has '\n' at byte 4; only letters, digits, '.', '_' and '-' are allowed`},
		{"NUL", "acme\x00", `invalid task: tenant "acme\x00": has '\x00' at byte 4; only letters, digits, '.', '_' and '-' are allowed`},
		{"slash", "acme/eu", `invalid task: tenant "acme/eu": has '/' at byte 4; only letters, digits, '.', '_' and '-' are allowed`},
		{"non-ASCII", "acmé", `invalid task: tenant "acmé": has 'Ã' at byte 3; only letters, digits, '.', '_' and '-' are allowed`},
		{"invalid UTF-8", "acme\xff", `invalid task: tenant "acme\xff": has 'ÿ' at byte 4; only letters, digits, '.', '_' and '-' are allowed`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := producer.ValidateTenant(tc.value)
			assertInvalid(t, err, "tenant")
			if got := err.Error(); got != tc.want {
				t.Errorf("error\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestSMSValidate(t *testing.T) {
	t.Parallel()
	good := []producer.SMS{
		goodSMS,
		{To: "+12", Body: "x"},
		{To: "+123456789012345", Body: "x"},
		{To: "+447911123456", Body: "Grüße 👋 日本語"},
		{To: "+15551234567", Body: strings.Repeat("é", producer.MaxSMSBody)},
		{To: "+15551234567", Body: " padded\n"},
	}
	for _, m := range good {
		if err := m.Validate(); err != nil {
			t.Errorf("%+.60v.Validate() = %v, want nil", m, err)
		}
	}
	const e164 = "not an E.164 phone number (+ then 2 to 15 digits, no leading 0)"
	cases := []struct {
		name  string
		m     producer.SMS
		field string
		want  string
	}{
		{"to letter", producer.SMS{To: "+1555x", Body: "hi"}, "to", `invalid task: to "+1555x": ` + e164},
		{"to empty", producer.SMS{To: "", Body: "hi"}, "to", `invalid task: to "": ` + e164},
		{"to no plus", producer.SMS{To: "15551234567", Body: "hi"}, "to", `invalid task: to "15551234567": ` + e164},
		{"to leading 0", producer.SMS{To: "+05551234567", Body: "hi"}, "to", `invalid task: to "+05551234567": ` + e164},
		{"to one digit", producer.SMS{To: "+1", Body: "hi"}, "to", `invalid task: to "+1": ` + e164},
		{"to 16 digits", producer.SMS{To: "+1234567890123456", Body: "hi"}, "to", `invalid task: to "+1234567890123456": ` + e164},
		{"to spaces", producer.SMS{To: "+1 555 123 4567", Body: "hi"}, "to", `invalid task: to "+1 555 123 4567": ` + e164},
		{"to trailing newline", producer.SMS{To: "+15551234567\n", Body: "hi"}, "to", `invalid task: to "+15551234567\n": ` + e164},
		{"to Arabic-Indic digits", producer.SMS{To: "+١٢٣", Body: "hi"}, "to", `invalid task: to "+١٢٣": ` + e164},
		{"to 1 MB", producer.SMS{To: "+1" + mb, Body: "hi"}, "to", `invalid task: to "+1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"... (1048578 bytes): ` + e164},
		{"body empty", producer.SMS{To: "+15551234567", Body: ""}, "body", `invalid task: body "": is empty or only spaces`},
		{"body spaces", producer.SMS{To: "+15551234567", Body: " \t\r\n "}, "body", `invalid task: body " \t\r\n ": is empty or only spaces`},
		{"body invalid UTF-8", producer.SMS{To: "+15551234567", Body: "hi \xff"}, "body", `invalid task: body "hi \xff": is not valid UTF-8`},
		{"body too long", producer.SMS{To: "+15551234567", Body: strings.Repeat("é", producer.MaxSMSBody+1)}, "body", `invalid task: body "éééééééééééééééééééé"... (3202 bytes): is 1601 characters, more than 1600`},
		{"body 1 MB", producer.SMS{To: "+15551234567", Body: mb}, "body", `invalid task: body "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"... (1048576 bytes): is 1048576 characters, more than 1600`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.m.Validate()
			assertInvalid(t, err, tc.field)
			if got := err.Error(); got != tc.want {
				t.Errorf("error\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestEmailValidate(t *testing.T) {
	t.Parallel()
	good := []producer.Email{
		goodEmail,
		{To: "a@b", Subject: "s", Body: "b"},
		{To: "first.last+tag@sub.example.co.uk", Subject: "Grüße 👋", Body: "日本語"},
		{To: "ada@example.com", Subject: strings.Repeat("é", producer.MaxSubject), Body: strings.Repeat("b", producer.MaxEmailBody)},
		{To: strings.Repeat("a", 64) + "@" + strings.Repeat("d", 189), Subject: "254 bytes", Body: "b"},
		{To: "ada@example.com", Subject: "tab\tis fine", Body: "multi\r\nline\nbody"},
	}
	for _, m := range good {
		if err := m.Validate(); err != nil {
			t.Errorf("%+.60v.Validate() = %v, want nil", m, err)
		}
	}
	ok := producer.Email{To: "ada@example.com", Subject: "Hi", Body: "Hello"}
	with := func(f func(m *producer.Email)) producer.Email { m := ok; f(&m); return m }
	long := strings.Repeat("a", 64) + "@" + strings.Repeat("d", 190)
	cases := []struct {
		name  string
		m     producer.Email
		field string
		want  string
	}{
		{"to empty", with(func(m *producer.Email) { m.To = "" }), "to", `invalid task: to "": is empty`},
		{"to no at", with(func(m *producer.Email) { m.To = "ada.example.com" }), "to", `invalid task: to "ada.example.com": not an email address like name@example.com`},
		{"to display name", with(func(m *producer.Email) { m.To = "Ada <ada@example.com>" }), "to", `invalid task: to "Ada <ada@example.com>": not a bare email address (want "ada@example.com", without display name, brackets or spaces)`},
		{"to brackets", with(func(m *producer.Email) { m.To = "<ada@example.com>" }), "to", `invalid task: to "<ada@example.com>": not a bare email address (want "ada@example.com", without display name, brackets or spaces)`},
		{"to spaces", with(func(m *producer.Email) { m.To = " ada@example.com " }), "to", `invalid task: to " ada@example.com ": not a bare email address (want "ada@example.com", without display name, brackets or spaces)`},
		{"to two addresses", with(func(m *producer.Email) { m.To = "ada@example.com, bob@example.com" }), "to", `invalid task: to "ada@example.com, bob@example.com": not an email address like name@example.com`},
		{"to header injection", with(func(m *producer.Email) { m.To = "ada@example.com\r\nBcc: eve@example.com" }), "to", `invalid task: to "ada@example.com\r\nBcc: eve@example.com": not an email address like name@example.com`},
		{"to invalid UTF-8", with(func(m *producer.Email) { m.To = "ad\xffa@example.com" }), "to", `invalid task: to "ad\xffa@example.com": not an email address like name@example.com`},
		{"to 255 bytes", with(func(m *producer.Email) { m.To = long }), "to", `invalid task: to "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"... (255 bytes): is 255 bytes, more than 254`},
		{"to 1 MB", with(func(m *producer.Email) { m.To = mb + "@example.com" }), "to", `invalid task: to "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"... (1048588 bytes): is 1048588 bytes, more than 254`},
		{"from display name", with(func(m *producer.Email) { m.From = "Team <team@example.com>" }), "from", `invalid task: from "Team <team@example.com>": not a bare email address (want "team@example.com", without display name, brackets or spaces)`},
		{"from not an address", with(func(m *producer.Email) { m.From = "team" }), "from", `invalid task: from "team": not an email address like name@example.com`},
		{"from newline", with(func(m *producer.Email) { m.From = "team@example.com\n" }), "from", `invalid task: from "team@example.com\n": not an email address like name@example.com`},
		{"subject empty", with(func(m *producer.Email) { m.Subject = "" }), "subject", `invalid task: subject "": is empty`},
		{"subject LF", with(func(m *producer.Email) { m.Subject = "Hi\nBcc: eve@example.com" }), "subject", `invalid task: subject "Hi\nBcc: eve@example.com": contains a line break (CR or LF)`},
		{"subject CR", with(func(m *producer.Email) { m.Subject = "Hi\r" }), "subject", `invalid task: subject "Hi\r": contains a line break (CR or LF)`},
		{"subject invalid UTF-8", with(func(m *producer.Email) { m.Subject = "\xc3(" }), "subject", `invalid task: subject "\xc3(": is not valid UTF-8`},
		{"subject too long", with(func(m *producer.Email) { m.Subject = strings.Repeat("é", producer.MaxSubject+1) }), "subject", `invalid task: subject "éééééééééééééééééééé"... (512 bytes): is 256 characters, more than 255`},
		{"subject 1 MB", with(func(m *producer.Email) { m.Subject = mb }), "subject", `invalid task: subject "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"... (1048576 bytes): is 1048576 characters, more than 255`},
		{"body empty", with(func(m *producer.Email) { m.Body = "" }), "body", `invalid task: body "": is empty`},
		{"body invalid UTF-8", with(func(m *producer.Email) { m.Body = "Hello \xed\xa0\x80" }), "body", `invalid task: body "Hello \xed\xa0\x80": is not valid UTF-8`},
		{"body too long", with(func(m *producer.Email) { m.Body = strings.Repeat("b", producer.MaxEmailBody+1) }), "body", `invalid task: body "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"... (262145 bytes): is 262145 bytes, more than 262144`},
		{"body 1 MB", with(func(m *producer.Email) { m.Body = mb }), "body", `invalid task: body "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"... (1048576 bytes): is 1048576 bytes, more than 262144`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.m.Validate()
			assertInvalid(t, err, tc.field)
			if got := err.Error(); got != tc.want {
				t.Errorf("error\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestFieldErrorUnwrapsToErrInvalid checks the contract the worker relies
// on, on a FieldError built by hand.
func TestFieldErrorUnwrapsToErrInvalid(t *testing.T) {
	t.Parallel()
	fe := &producer.FieldError{Field: "to", Value: `"+1555x"`, Problem: "not an E.164 phone number"}
	if got, want := fe.Error(), `invalid task: to "+1555x": not an E.164 phone number`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(fe, producer.ErrInvalid) || fe.Unwrap() != producer.ErrInvalid {
		t.Errorf("FieldError does not unwrap to ErrInvalid")
	}
}
