package producer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hibiken/asynq"
)

// MaxBulkLine is the longest line of a bulk file that ReadBulk accepts, in
// bytes, not counting its line ending (1 MiB). It holds the largest email
// body, MaxEmailBody, as long as JSON escaping does not make it four times
// longer.
const MaxBulkLine = 1 << 20

// Limits of a BulkLine's asynq fields.
const (
	// maxTaskID is the longest task ID, in bytes: asynq puts it in a Redis
	// key, and in every log line about the task.
	maxTaskID = 255
)

// BulkLine is one line of a bulk file: a task as one JSON object, such as
//
//	{"type": "sms", "tenant": "acme", "to": "+15551234567", "body": "Your code is 1234", "id": "otp-991"}
//	{"type": "email", "tenant": "globex", "to": "ada@example.com", "subject": "Welcome", "body": "Hello", "max_retry": 3}
//
// The fields with omitempty are optional. An error about one field is a
// *FieldError whose Field is the field's JSON name.
type BulkLine struct {
	// Type is "sms" or TypeSMS for an SMS, "email" or TypeEmail for an
	// email.
	Type string `json:"type"`

	// Tenant is the tenant the message is sent for; see ValidateTenant.
	Tenant string `json:"tenant"`

	// To and Body are the fields of the same names of SMS or Email.
	To   string `json:"to"`
	Body string `json:"body"`

	// Subject and From are the fields of the same names of Email. An SMS
	// line must leave them out.
	Subject string `json:"subject,omitempty"`
	From    string `json:"from,omitempty"`

	// ID, when not empty, is the task's asynq.TaskID: 1 to 255 bytes of
	// UTF-8, not only spaces, without control characters. A second task
	// with the same ID in the same queue is refused with
	// asynq.ErrTaskIDConflict, which makes a file with IDs safe to send
	// twice.
	ID string `json:"id,omitempty"`

	// Queue, when not empty, is the task's asynq.Queue: 1 to 64 ASCII
	// letters, digits, '.', '_', ':' and '-', starting with a letter or a
	// digit.
	Queue string `json:"queue,omitempty"`

	// MaxRetry, when not nil, is the task's retry budget, as
	// asynq.MaxRetry(*MaxRetry) given to NewSMSTask: from 0 to
	// math.MaxInt32-1. Nil means DefaultMaxRetry.
	MaxRetry *int `json:"max_retry,omitempty"`

	// Priority, when not nil, is the task's priority, as Priority(*Priority)
	// given to NewSMSTask: 1 (most urgent) to 5. Nil means 3.
	Priority *int `json:"priority,omitempty"`

	// ProcessIn, when not empty, is how long after it is enqueued the task
	// is due, as a Go duration that is not negative, such as "90s" or
	// "1h30m" (asynq.ProcessIn).
	ProcessIn string `json:"process_in,omitempty"`

	// ProcessAt, when not empty, is when the task is due, in RFC 3339 such
	// as "2030-01-02T15:04:05Z" (asynq.ProcessAt); a time past means now.
	// A line gives ProcessIn or ProcessAt, not both.
	ProcessAt string `json:"process_at,omitempty"`
}

// Task validates l and returns its task, built by NewSMSTask or
// NewEmailTask, and the asynq options that l's ID, Queue, ProcessIn and
// ProcessAt give, in that order, for Client.Enqueue. Put your own defaults,
// such as a default queue, before them: with asynq the last option wins.
//
// Every error matches ErrInvalid; one about a field is a *FieldError, and
// one about a task whose payload would be larger than MaxPayload a
// *PayloadSizeError.
func (l BulkLine) Task() (*asynq.Task, []asynq.Option, error) {
	var sms bool
	switch l.Type {
	case "sms", TypeSMS:
		sms = true
	case "email", TypeEmail:
	default:
		return nil, nil, fieldError("type", l.Type, "is neither sms (%s) nor email (%s)", TypeSMS, TypeEmail)
	}
	var build []asynq.Option // options of NewSMSTask and NewEmailTask
	if l.MaxRetry != nil {
		n := *l.MaxRetry
		if n < 0 || n > maxBudget {
			return nil, nil, fieldError("max_retry", strconv.Itoa(n), "is not from 0 to %d", maxBudget)
		}
		build = append(build, asynq.MaxRetry(n))
	}
	if l.Priority != nil {
		if err := checkPriority(*l.Priority); err != nil {
			return nil, nil, fieldError("priority", strconv.Itoa(*l.Priority), "is not from %d (most urgent) to %d (least urgent)",
				MostUrgent, LeastUrgent)
		}
		build = append(build, Priority(*l.Priority))
	}
	var task *asynq.Task
	var err error
	switch {
	case sms && l.Subject != "":
		// Dropping it silently would send something else than what the
		// line says.
		return nil, nil, fieldError("subject", l.Subject, "is for email; an sms has none")
	case sms && l.From != "":
		return nil, nil, fieldError("from", l.From, "is for email; an sms has none")
	case sms:
		task, err = NewSMSTask(l.Tenant, SMS{To: l.To, Body: l.Body}, build...)
	default:
		task, err = NewEmailTask(l.Tenant, Email{To: l.To, Subject: l.Subject, Body: l.Body, From: l.From}, build...)
	}
	if err != nil {
		// The caller knows the line; the *FieldError says what is wrong
		// in it, without "producer: new sms:send task for tenant ...".
		if fe, ok := errors.AsType[*FieldError](err); ok {
			return nil, nil, fe
		}
		if pe, ok := errors.AsType[*PayloadSizeError](err); ok {
			return nil, nil, pe
		}
		return nil, nil, err
	}
	opts, err := l.options()
	if err != nil {
		return nil, nil, err
	}
	return task, opts, nil
}

// options validates and returns the asynq options of l's ID, Queue,
// ProcessIn and ProcessAt.
func (l BulkLine) options() ([]asynq.Option, error) {
	var opts []asynq.Option
	if l.ID != "" {
		switch {
		case len(l.ID) > maxTaskID:
			return nil, fieldError("id", l.ID, "is %d bytes, more than %d", len(l.ID), maxTaskID)
		case !utf8.ValidString(l.ID):
			return nil, fieldError("id", l.ID, "is not valid UTF-8")
		case strings.TrimSpace(l.ID) == "":
			return nil, fieldError("id", l.ID, "is only spaces")
		case strings.IndexFunc(l.ID, unicode.IsControl) >= 0:
			return nil, fieldError("id", l.ID, "has a control character")
		}
		opts = append(opts, asynq.TaskID(l.ID))
	}
	if l.Queue != "" {
		if ValidateQueue(l.Queue) != nil {
			return nil, fieldError("queue", l.Queue, queueRule)
		}
		opts = append(opts, asynq.Queue(l.Queue))
	}
	switch {
	case l.ProcessIn != "" && l.ProcessAt != "":
		return nil, fieldError("process_at", l.ProcessAt, "is given with process_in; give one of them")
	case l.ProcessIn != "":
		d, err := time.ParseDuration(l.ProcessIn)
		if err != nil || d < 0 {
			return nil, fieldError("process_in", l.ProcessIn, `is not a duration of 0 or more such as "90s" or "1h30m"`)
		}
		opts = append(opts, asynq.ProcessIn(d))
	case l.ProcessAt != "":
		at, err := time.Parse(time.RFC3339, l.ProcessAt)
		if err != nil {
			return nil, fieldError("process_at", l.ProcessAt, `is not an RFC 3339 time such as "2030-01-02T15:04:05Z"`)
		}
		opts = append(opts, asynq.ProcessAt(at))
	}
	return opts, nil
}

// LineError reports a line of a bulk file that is not a valid task. It
// matches ErrInvalid (errors.Is), and errors.As finds the *FieldError when
// one field is wrong.
type LineError struct {
	// Line is the line's number, from 1. Blank lines count.
	Line int

	// Err says what is wrong with the line; it matches ErrInvalid.
	Err error
}

// Error returns, for example,
//
//	line 7: invalid task: to "+1555x": not an E.164 phone number (+ then 2 to 15 digits, no leading 0)
func (e *LineError) Error() string { return "line " + strconv.Itoa(e.Line) + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *LineError) Unwrap() error { return e.Err }

// ReadBulk reads a bulk file from r: one BulkLine a line, as JSON, read
// strictly (an unknown field, a value of the wrong type, or anything after
// the object is an error). Lines end with LF or CRLF, and the last one may
// have no line ending. Blank lines (nothing but spaces, tabs and a CR) are
// skipped, and a UTF-8 byte order mark at the start of r is ignored.
//
// For each line that is not blank, in order, ReadBulk calls fn with the
// line's number, counted from 1, and either the task and options of
// BulkLine.Task, or a *LineError that says what is wrong with the line; a
// line longer than MaxBulkLine is such an error, and reading goes on at the
// next line. Nothing is sent to Redis.
//
// ReadBulk returns nil at the end of r; fn's error, as it is, if fn returns
// one, which stops the reading; or the error of r's Read, wrapped.
// It holds one line at a time in memory.
func ReadBulk(r io.Reader, fn func(line int, task *asynq.Task, opts []asynq.Option, err error) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for n := 1; ; n++ {
		line, tooLong, rerr := readLine(br, buf[:0])
		buf = line
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("producer: read bulk file at line %d: %w", n, rerr)
		}
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		var err error
		switch {
		case tooLong:
			err = fn(n, nil, nil, &LineError{Line: n, Err: fmt.Errorf("%w: the line is longer than %d bytes", ErrInvalid, MaxBulkLine)})
		case len(bytes.Trim(line, " \t\r")) == 0:
			// A blank line, or the end after the last line ending.
		default:
			task, opts, perr := parseBulkLine(line)
			if perr != nil {
				err = fn(n, nil, nil, &LineError{Line: n, Err: perr})
			} else {
				err = fn(n, task, opts, nil)
			}
		}
		if err != nil {
			return err
		}
		if rerr != nil { // io.EOF
			return nil
		}
	}
}

// readLine appends the next line of br to buf, without its line ending, and
// returns it. A line longer than MaxBulkLine is read to its end but not
// kept: readLine returns tooLong instead. err is io.EOF for the last line,
// which may be empty, or the error of the underlying Read.
func readLine(br *bufio.Reader, buf []byte) (line []byte, tooLong bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if !tooLong {
			buf = append(buf, frag...)
			// Content, CR and LF: past this, the line is too long
			// however it ends.
			if len(buf) > MaxBulkLine+2 {
				tooLong, buf = true, buf[:0]
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			return buf, true, err
		}
		buf = bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r"))
		if len(buf) > MaxBulkLine {
			return buf[:0], true, err
		}
		return buf, false, err
	}
}

// parseBulkLine decodes one line of a bulk file strictly and returns its
// task and options.
func parseBulkLine(b []byte) (*asynq.Task, []asynq.Option, error) {
	var l BulkLine
	if err := decode(b, &l); err != nil {
		return nil, nil, err
	}
	return l.Task()
}
