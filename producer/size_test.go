package producer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/producer"
)

// bigEmail is a valid email whose body, within MaxEmailBody, escapes to
// JSON larger than MaxPayload: each control character takes six bytes.
var bigEmail = producer.Email{To: "ada@example.com", Subject: "Hi", Body: strings.Repeat("\x01", 100<<10)}

// bigEmailSize is the size of bigEmail's payload.
const bigEmailSize = len(`{"to":"ada@example.com","subject":"Hi","body":""}`) + 6*100<<10

// assertTooLarge fails t unless err matches ErrInvalid and holds a
// *PayloadSizeError for size whose message names the size and the limit.
func assertTooLarge(t *testing.T, err error, size int) {
	t.Helper()
	assertInvalid(t, err, "")
	pe, ok := errors.AsType[*producer.PayloadSizeError](err)
	if !ok {
		t.Fatalf("error %v holds no *PayloadSizeError", err)
	}
	if got, want := pe.Size, size; got != want {
		t.Errorf("Size = %d, want %d", got, want)
	}
	want := fmt.Sprintf("invalid task: the payload is %d bytes of JSON, more than the limit of %d", size, producer.MaxPayload)
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestCheckPayloadSize(t *testing.T) {
	t.Parallel()
	if err := producer.CheckPayloadSize(make([]byte, producer.MaxPayload)); err != nil {
		t.Errorf("CheckPayloadSize(MaxPayload bytes) = %v, want nil", err)
	}
	assertTooLarge(t, producer.CheckPayloadSize(make([]byte, producer.MaxPayload+1)), producer.MaxPayload+1)
}

// TestNewTaskPayloadSize: the largest email body fits; a body that escapes
// beyond MaxPayload is refused by NewEmailTask and BulkLine.Task.
func TestNewTaskPayloadSize(t *testing.T) {
	t.Parallel()
	largest := producer.Email{To: "ada@example.com", Subject: "Hi", Body: strings.Repeat("a", producer.MaxEmailBody)}
	if _, err := producer.NewEmailTask("acme", largest); err != nil {
		t.Errorf("NewEmailTask with a body of MaxEmailBody bytes: %v", err)
	}
	task, err := producer.NewEmailTask("acme", bigEmail)
	if task != nil {
		t.Errorf("NewEmailTask returned a task with error %v", err)
	}
	assertTooLarge(t, err, bigEmailSize)
	if !strings.HasPrefix(err.Error(), `producer: new email:send task for tenant "acme": `) {
		t.Errorf("error %q does not say what was being done", err)
	}

	_, _, err = producer.BulkLine{Type: "email", Tenant: "acme", To: bigEmail.To, Subject: bigEmail.Subject, Body: bigEmail.Body}.Task()
	assertTooLarge(t, err, bigEmailSize)
	if !strings.HasPrefix(err.Error(), "invalid task: ") {
		t.Errorf("BulkLine.Task error %q: want the *PayloadSizeError alone, as for a *FieldError", err)
	}
}

// TestDecodePayloadSize: a payload larger than MaxPayload is refused
// before it is decoded: the error is about its size, not its JSON.
func TestDecodePayloadSize(t *testing.T) {
	t.Parallel()
	junk := []byte(strings.Repeat("{", producer.MaxPayload+1))
	_, err := producer.DecodeSMS(junk)
	assertTooLarge(t, err, len(junk))
	_, err = producer.DecodeEmail(junk)
	assertTooLarge(t, err, len(junk))
}

// TestEnqueuePayloadSize: an oversized task, built by the Client or by
// hand, reaches no Redis.
func TestEnqueuePayloadSize(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	c := producer.NewClientFromRedisClient(rdb)
	ctx := context.Background()
	headers := map[string]string{producer.HeaderTenant: "acme", producer.HeaderMaxRetry: "3"}
	// A valid SMS padded with spaces, which JSON allows.
	padded := `{"to":"+15551234567","body":"hi"}` + strings.Repeat(" ", producer.MaxPayload)
	cases := []struct {
		name    string
		enqueue func(q asynq.Option) (*asynq.TaskInfo, error)
		size    int
	}{
		{"EnqueueEmail", func(q asynq.Option) (*asynq.TaskInfo, error) { return c.EnqueueEmail(ctx, "acme", bigEmail, q) }, bigEmailSize},
		{"Enqueue by hand", func(q asynq.Option) (*asynq.TaskInfo, error) {
			return c.Enqueue(ctx, asynq.NewTaskWithHeaders(producer.TypeSMS, []byte(padded), headers), q)
		}, len(padded)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := redistest.Queue(t, rdb)
			info, err := tc.enqueue(asynq.Queue(q))
			if info != nil {
				t.Errorf("got TaskInfo %+v with error %v", info, err)
			}
			assertTooLarge(t, err, tc.size)
			assertNothingIn(t, rdb, q)
		})
	}
}
