package producer_test

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/sluicehq/sluice/producer"
)

// bulkResult is what ReadBulk gave for one line.
type bulkResult struct {
	Line     int
	Type     string   // the task's type
	Tenant   string   // its HeaderTenant
	MaxRetry string   // its HeaderMaxRetry
	Payload  string   // its payload
	Opts     []string // the options' String()
	Err      string   // the *LineError's message, "" for a task
	Field    string   // the *FieldError's field, "" for none
}

// readBulk runs ReadBulk on input and returns what it gave for each line.
func readBulk(t *testing.T, input string) []bulkResult {
	t.Helper()
	var got []bulkResult
	err := producer.ReadBulk(strings.NewReader(input), func(line int, task *asynq.Task, opts []asynq.Option, err error) error {
		r := bulkResult{Line: line}
		if err != nil {
			if task != nil || opts != nil {
				t.Errorf("line %d: task %v and options %v with error %v", line, task, opts, err)
			}
			le, ok := errors.AsType[*producer.LineError](err)
			if !ok {
				t.Fatalf("line %d: error %v is not a *LineError", line, err)
			}
			if le.Line != line {
				t.Errorf("LineError.Line = %d, want %d", le.Line, line)
			}
			if !errors.Is(err, producer.ErrInvalid) {
				t.Errorf("line %d: error %v does not match ErrInvalid", line, err)
			}
			if fe, ok := errors.AsType[*producer.FieldError](err); ok {
				r.Field = fe.Field
			}
			r.Err = err.Error()
			got = append(got, r)
			return nil
		}
		r.Type, r.Payload = task.Type(), string(task.Payload())
		r.Tenant, r.MaxRetry = task.Headers()[producer.HeaderTenant], task.Headers()[producer.HeaderMaxRetry]
		for _, o := range opts {
			r.Opts = append(r.Opts, o.String())
		}
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatalf("ReadBulk: %v", err)
	}
	return got
}

const (
	smsLine   = `{"type":"sms","tenant":"acme","to":"+15551234567","body":"Your code is 123456"}`
	smsJSON   = `{"to":"+15551234567","body":"Your code is 123456"}`
	emailLine = `{"type":"email","tenant":"globex","to":"ada@example.com","subject":"Welcome","body":"Hello <b>Ada</b> & co","from":"team@example.com"}`
	emailJSON = `{"to":"ada@example.com","subject":"Welcome","body":"Hello <b>Ada</b> & co","from":"team@example.com"}`
)

var (
	smsResult   = bulkResult{Type: producer.TypeSMS, Tenant: "acme", MaxRetry: "25", Payload: smsJSON}
	emailResult = bulkResult{Type: producer.TypeEmail, Tenant: "globex", MaxRetry: "25", Payload: emailJSON}
)

// at returns r for line n.
func at(n int, r bulkResult) bulkResult {
	r.Line = n
	return r
}

// lineErr is the result of a bad line n.
func lineErr(n int, field, msg string) bulkResult {
	return bulkResult{Line: n, Field: field, Err: msg}
}

// bulkCase is an input for ReadBulk and what it must give for each line.
type bulkCase struct {
	name  string
	input string
	want  []bulkResult
}

// goodBulkCases are inputs whose every line is a good task.
func goodBulkCases() []bulkCase {
	return []bulkCase{
		{"empty", "", nil},
		{"good sms", smsLine + "\n", []bulkResult{at(1, smsResult)}},
		{"good email", emailLine + "\n", []bulkResult{at(1, emailResult)}},
		{"full type names", strings.Replace(smsLine, `"sms"`, `"sms:send"`, 1) + "\n" + strings.Replace(emailLine, `"email"`, `"email:send"`, 1) + "\n",
			[]bulkResult{at(1, smsResult), at(2, emailResult)}},
		{"email without from",
			`{"type":"email","tenant":"globex","to":"ada@example.com","subject":"Hi","body":"Hello"}`,
			[]bulkResult{{Line: 1, Type: producer.TypeEmail, Tenant: "globex", MaxRetry: "25", Payload: `{"to":"ada@example.com","subject":"Hi","body":"Hello"}`}}},
		{"every option",
			`{"type":"sms","tenant":"acme","to":"+15551234567","body":"Your code is 123456","id":"otp-1","queue":"critical","max_retry":3,"process_in":"1m30s"}` + "\n" +
				`{"type":"sms","tenant":"acme","to":"+15551234567","body":"Your code is 123456","max_retry":0,"process_at":"2030-01-02T15:04:05Z"}` + "\n",
			[]bulkResult{
				{Line: 1, Type: producer.TypeSMS, Tenant: "acme", MaxRetry: "3", Payload: smsJSON, Opts: []string{`TaskID("otp-1")`, `Queue("critical")`, "ProcessIn(1m30s)"}},
				{Line: 2, Type: producer.TypeSMS, Tenant: "acme", MaxRetry: "0", Payload: smsJSON, Opts: []string{"ProcessAt(Wed Jan  2 15:04:05 UTC 2030)"}},
			}},
		{"blank lines", "\n" + smsLine + "\n  \t\n\r\n" + emailLine + "\n\n",
			[]bulkResult{at(2, smsResult), at(5, emailResult)}},
		{"CRLF line endings", smsLine + "\r\n\r\n" + emailLine + "\r\n",
			[]bulkResult{at(1, smsResult), at(3, emailResult)}},
		{"no trailing newline", smsLine + "\n" + emailLine,
			[]bulkResult{at(1, smsResult), at(2, emailResult)}},
		{"byte order mark", "\xef\xbb\xbf" + smsLine + "\n", []bulkResult{at(1, smsResult)}},
		{"spaces around", "  " + smsLine + " \t\n", []bulkResult{at(1, smsResult)}},
	}
}

// badBulkCases are inputs with bad lines, each refused alone.
func badBulkCases() []bulkCase {
	return []bulkCase{
		{"unknown field", `{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi","cc":"+15550000000"}`,
			[]bulkResult{lineErr(1, "", `line 1: invalid task: json: unknown field "cc"`)}},
		{"bad JSON", smsLine + "\n{\"type\":\"sms\",\n" + emailLine,
			[]bulkResult{at(1, smsResult), lineErr(2, "", "line 2: invalid task: unexpected EOF"), at(3, emailResult)}},
		{"not JSON", "type=sms\n", []bulkResult{lineErr(1, "", "line 1: invalid task: invalid character 'y' in literal true (expecting 'r')")}},
		{"two objects on a line", smsLine + " " + smsLine + "\n", []bulkResult{lineErr(1, "", "line 1: invalid task: data after the JSON object")}},
		{"array", "[" + smsLine + "]\n", []bulkResult{lineErr(1, "", "line 1: invalid task: json: cannot unmarshal array into Go value of type producer.BulkLine")}},
		{"null", "null\n", []bulkResult{lineErr(1, "type", `line 1: invalid task: type "": is neither sms (sms:send) nor email (email:send)`)}},
		{"wrong JSON type", `{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi","max_retry":"3"}`,
			[]bulkResult{lineErr(1, "max_retry", "line 1: invalid task: max_retry (string): is not a JSON int")}},
		{"unknown type", `{"type":"fax","tenant":"acme","to":"+15551234567","body":"hi"}`,
			[]bulkResult{lineErr(1, "type", `line 1: invalid task: type "fax": is neither sms (sms:send) nor email (email:send)`)}},
		{"empty tenant", `{"type":"sms","tenant":"","to":"+15551234567","body":"hi"}`,
			[]bulkResult{lineErr(1, "tenant", `line 1: invalid task: tenant "": is empty`)}},
		{"no tenant", `{"type":"email","to":"ada@example.com","subject":"Hi","body":"Hello"}`,
			[]bulkResult{lineErr(1, "tenant", `line 1: invalid task: tenant "": is empty`)}},
		{"bad phone", "\n" + `{"type":"sms","tenant":"acme","to":"+1555x","body":"hi"}` + "\n",
			[]bulkResult{lineErr(2, "to", `line 2: invalid task: to "+1555x": not an E.164 phone number (+ then 2 to 15 digits, no leading 0)`)}},
		{"bad email subject", `{"type":"email","tenant":"acme","to":"ada@example.com","subject":"","body":"Hello"}`,
			[]bulkResult{lineErr(1, "subject", `line 1: invalid task: subject "": is empty`)}},
		{"subject on an sms", `{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi","subject":"Hi"}`,
			[]bulkResult{lineErr(1, "subject", `line 1: invalid task: subject "Hi": is for email; an sms has none`)}},
		{"from on an sms", `{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi","from":"a@example.com"}`,
			[]bulkResult{lineErr(1, "from", `line 1: invalid task: from "a@example.com": is for email; an sms has none`)}},
		{"negative max_retry", `{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi","max_retry":-1}`,
			[]bulkResult{lineErr(1, "max_retry", `line 1: invalid task: max_retry "-1": is not from 0 to 2147483646`)}},
		{"huge max_retry", `{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi","max_retry":2147483647}`,
			[]bulkResult{lineErr(1, "max_retry", `line 1: invalid task: max_retry "2147483647": is not from 0 to 2147483646`)}},
		{"blank id", `{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi","id":"  "}`,
			[]bulkResult{lineErr(1, "id", `line 1: invalid task: id "  ": is only spaces`)}},
		{"id with a newline", `{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi","id":"a\nb"}`,
			[]bulkResult{lineErr(1, "id", `line 1: invalid task: id "a\nb": has a control character`)}},
		{"long id", `{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi","id":"` + strings.Repeat("i", 256) + `"}`,
			[]bulkResult{lineErr(1, "id", `line 1: invalid task: id "iiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiii"... (256 bytes): is 256 bytes, more than 255`)}},
		{"queue with braces", `{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi","queue":"{q}"}`,
			[]bulkResult{lineErr(1, "queue", `line 1: invalid task: queue "{q}": is not 1 to 64 letters, digits, '.', '_', ':' and '-', starting with a letter or digit`)}},
		{"bad process_in", `{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi","process_in":"-5s"}`,
			[]bulkResult{lineErr(1, "process_in", `line 1: invalid task: process_in "-5s": is not a duration of 0 or more such as "90s" or "1h30m"`)}},
		{"bad process_at", `{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi","process_at":"tomorrow"}`,
			[]bulkResult{lineErr(1, "process_at", `line 1: invalid task: process_at "tomorrow": is not an RFC 3339 time such as "2030-01-02T15:04:05Z"`)}},
		{"process_in and process_at", `{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi","process_in":"1m","process_at":"2030-01-02T15:04:05Z"}`,
			[]bulkResult{lineErr(1, "process_at", `line 1: invalid task: process_at "2030-01-02T15:04:05Z": is given with process_in; give one of them`)}},
	}
}

// bulkHead starts the email line of jsonOfLen.
const bulkHead = `{"type":"email","tenant":"acme","to":"ada@example.com","subject":"S","body":"`

// jsonOfLen returns an email line of exactly n bytes, its body too long for
// an email.
func jsonOfLen(n int) string { return bulkHead + strings.Repeat("a", n-len(bulkHead)-2) + `"}` }

// longBulkCases are inputs with lines at and past MaxBulkLine.
func longBulkCases() []bulkCase {
	bodyLen := producer.MaxBulkLine - len(bulkHead) - 2
	bodyTooLong := fmt.Sprintf(`line 1: invalid task: body "%s"... (%d bytes): is %[2]d bytes, more than %d`,
		strings.Repeat("a", 40), bodyLen, producer.MaxEmailBody)
	return []bulkCase{
		// A line of MaxBulkLine bytes is read and validated; one byte more
		// is refused unread, and reading goes on at the next line.
		{"line of MaxBulkLine bytes", jsonOfLen(producer.MaxBulkLine) + "\r\n",
			[]bulkResult{lineErr(1, "body", bodyTooLong)}},
		{"oversized line", smsLine + "\n" + jsonOfLen(producer.MaxBulkLine+1) + "\n" + emailLine + "\n",
			[]bulkResult{at(1, smsResult), lineErr(2, "", "line 2: invalid task: the line is longer than 1048576 bytes"), at(3, emailResult)}},
		{"oversized last line", jsonOfLen(4 * producer.MaxBulkLine),
			[]bulkResult{lineErr(1, "", "line 1: invalid task: the line is longer than 1048576 bytes")}},
	}
}

func TestReadBulk(t *testing.T) {
	t.Parallel()
	for _, tc := range slices.Concat(goodBulkCases(), badBulkCases(), longBulkCases()) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := readBulk(t, tc.input)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReadBulk results (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadBulkStops: an error from fn stops the reading and comes back as it
// is; an error of the reader comes back wrapped, with the line it stopped at.
func TestReadBulkStops(t *testing.T) {
	t.Parallel()
	stop := errors.New("stop")
	calls := 0
	err := producer.ReadBulk(strings.NewReader(smsLine+"\nnot JSON\n"+emailLine+"\n"), func(line int, _ *asynq.Task, _ []asynq.Option, err error) error {
		calls++
		return err
	})
	if le, ok := errors.AsType[*producer.LineError](err); !ok || le.Line != 2 {
		t.Errorf("ReadBulk = %v, want the *LineError of line 2", err)
	}
	if got, want := calls, 2; got != want {
		t.Errorf("fn called %d times, want %d", got, want)
	}

	err = producer.ReadBulk(strings.NewReader(smsLine+"\n"), func(int, *asynq.Task, []asynq.Option, error) error { return stop })
	if err != stop {
		t.Errorf("ReadBulk = %v, want fn's error as it is", err)
	}

	broken := errors.New("disk on fire")
	r := io.MultiReader(strings.NewReader(smsLine+"\n"), iotest.ErrReader(broken))
	calls = 0
	err = producer.ReadBulk(r, func(int, *asynq.Task, []asynq.Option, error) error { calls++; return nil })
	if !errors.Is(err, broken) {
		t.Errorf("ReadBulk = %v, want it to wrap %v", err, broken)
	}
	if got, want := err.Error(), "producer: read bulk file at line 2: disk on fire"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	if got, want := calls, 1; got != want {
		t.Errorf("fn called %d times, want %d", got, want)
	}
}

// FuzzReadBulk checks that ReadBulk never panics, calls fn once for each
// line that is not blank and for no other, in order, with the line's number;
// reports every bad line as a *LineError matching ErrInvalid whose message,
// one line of bounded length, starts with the line's number; and gives only
// tasks that the client and the workers accept: a known type, a payload that
// decodes, a valid tenant and retry budget, and options within their bounds.
func FuzzReadBulk(f *testing.F) {
	for _, s := range []string{
		"", "\n", smsLine, emailLine + "\r\n" + smsLine, "null", "[]", "{}", smsLine + smsLine,
		`{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi","max_retry":1e3,"id":"x","queue":"q","process_in":"1s"}`,
		`{"type":"sms:send","tenant":"acme","to":"+15551234567","body":"hi","max_retry":2147483646,"id":"\u00e9","queue":"a:b","process_at":"2030-01-02T15:04:05+01:00"}`,
		`{"type":"email","tenant":"acme","to":"ada@example.com","subject":"Hi","body":"Hello","` + strings.Repeat("k", 300) + `":1}`,
		`{"type":"sms","tenant":"ac{me}","to":"+15551234567","body":"hi"}`,
		"\xef\xbb\xbf{\"type\":\"email\"}\n\r\n",
		"\r\n \t\r\n\xef\xbb\xbf\n\x00\n\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		// The lines fn must be called for, by number: those that are not
		// blank once the byte order mark of the first is dropped.
		var want []int
		for i, line := range strings.Split(input, "\n") {
			if i == 0 {
				line = strings.TrimPrefix(line, "\xef\xbb\xbf")
			}
			if strings.Trim(line, " \t\r") != "" {
				want = append(want, i+1)
			}
		}
		var got []int
		err := producer.ReadBulk(strings.NewReader(input), func(line int, task *asynq.Task, opts []asynq.Option, err error) error {
			got = append(got, line)
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
		if !slices.Equal(got, want) {
			t.Errorf("fn called for lines %v, want %v", got, want)
		}
	})
}

// checkLineError checks what ReadBulk gave fn for a bad line.
func checkLineError(t *testing.T, line int, task *asynq.Task, opts []asynq.Option, err error) {
	t.Helper()
	if task != nil || opts != nil {
		t.Errorf("line %d: task %v and options %v with error %v", line, task, opts, err)
	}
	le, ok := errors.AsType[*producer.LineError](err)
	if !ok || !errors.Is(err, producer.ErrInvalid) || le.Line != line {
		t.Fatalf("line %d: error %v is not a *LineError of that line matching ErrInvalid", line, err)
	}
	msg := err.Error()
	if prefix := fmt.Sprintf("line %d: invalid task: ", line); !strings.HasPrefix(msg, prefix) || len(msg) == len(prefix) {
		t.Errorf("line %d: error %.300q does not start with %q and say what is wrong", line, msg, prefix)
	}
	if strings.ContainsAny(msg, "\r\n") || len(msg) > maxErrorLen {
		t.Errorf("line %d: error of %d bytes, want one line of at most %d: %.300q", line, len(msg), maxErrorLen, msg)
	}
}

// checkBulkTask checks a task and its options that ReadBulk accepted.
func checkBulkTask(t *testing.T, line int, task *asynq.Task, opts []asynq.Option) {
	t.Helper()
	var err error
	switch task.Type() {
	case producer.TypeSMS:
		_, err = producer.DecodeSMS(task.Payload())
	case producer.TypeEmail:
		_, err = producer.DecodeEmail(task.Payload())
	default:
		t.Fatalf("line %d: task type %q", line, task.Type())
	}
	if err != nil {
		t.Errorf("line %d: the payload of the task does not decode: %v", line, err)
	}
	if err := producer.ValidateTenant(task.Headers()[producer.HeaderTenant]); err != nil {
		t.Errorf("line %d: %v", line, err)
	}
	if n, err := strconv.Atoi(task.Headers()[producer.HeaderMaxRetry]); err != nil || n < 0 || n >= math.MaxInt32 {
		t.Errorf("line %d: header %s = %q, want 0 to %d", line, producer.HeaderMaxRetry, task.Headers()[producer.HeaderMaxRetry], math.MaxInt32-1)
	}
	seen := map[asynq.OptionType]bool{}
	for _, o := range opts {
		if seen[o.Type()] {
			t.Errorf("line %d: option %v given twice", line, o)
		}
		seen[o.Type()] = true
		switch v := o.Value(); o.Type() {
		case asynq.TaskIDOpt:
			id := v.(string)
			if id == "" || len(id) > 255 || !utf8.ValidString(id) || strings.IndexFunc(id, unicode.IsControl) >= 0 {
				t.Errorf("line %d: task ID %.300q", line, id)
			}
		case asynq.QueueOpt:
			if q := v.(string); q == "" || len(q) > 64 || strings.ContainsAny(q, "{}, =\x00\n") {
				t.Errorf("line %d: queue %.300q", line, q)
			}
		case asynq.ProcessInOpt:
			if d := v.(time.Duration); d < 0 {
				t.Errorf("line %d: ProcessIn(%v)", line, d)
			}
		case asynq.ProcessAtOpt:
		default:
			t.Errorf("line %d: option %v", line, o)
		}
	}
	if seen[asynq.ProcessInOpt] && seen[asynq.ProcessAtOpt] {
		t.Errorf("line %d: both ProcessIn and ProcessAt", line)
	}
}
