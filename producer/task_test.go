package producer_test

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/sluicehq/sluice/producer"
)

func TestNewTaskHeadersAndPayload(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		opts     []asynq.Option
		maxRetry string // the HeaderMaxRetry header
	}{
		{"no MaxRetry", nil, "25"},
		{"MaxRetry(0)", []asynq.Option{asynq.MaxRetry(0)}, "0"},
		{"MaxRetry(3)", []asynq.Option{asynq.Queue("q"), asynq.MaxRetry(3)}, "3"},
		{"negative", []asynq.Option{asynq.MaxRetry(-7)}, "0"},
		{"last wins", []asynq.Option{asynq.MaxRetry(9), asynq.Queue("q"), asynq.MaxRetry(4)}, "4"},
		{"nil option", []asynq.Option{nil, asynq.MaxRetry(2), nil}, "2"},
		{"largest", []asynq.Option{asynq.MaxRetry(math.MaxInt32 - 1)}, "2147483646"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := map[string]string{producer.HeaderTenant: "acme", producer.HeaderMaxRetry: tc.maxRetry}
			if !slices.ContainsFunc(tc.opts, func(o asynq.Option) bool { return o != nil && o.Type() == asynq.QueueOpt }) {
				want[producer.HeaderQueue] = producer.QueueByLayout
			}

			sms, err := producer.NewSMSTask("acme", goodSMS, tc.opts...)
			if err != nil {
				t.Fatalf("NewSMSTask: %v", err)
			}
			if got := sms.Type(); got != producer.TypeSMS {
				t.Errorf("SMS task type = %q, want %q", got, producer.TypeSMS)
			}
			if diff := cmp.Diff(want, stripEnqueued(t, sms.Headers())); diff != "" {
				t.Errorf("SMS task headers (-want +got):\n%s", diff)
			}
			if got, want := string(sms.Payload()), `{"to":"+15551234567","body":"Your code is 123456"}`; got != want {
				t.Errorf("SMS payload = %s, want %s", got, want)
			}

			email, err := producer.NewEmailTask("acme", goodEmail, tc.opts...)
			if err != nil {
				t.Fatalf("NewEmailTask: %v", err)
			}
			if got := email.Type(); got != producer.TypeEmail {
				t.Errorf("email task type = %q, want %q", got, producer.TypeEmail)
			}
			if diff := cmp.Diff(want, stripEnqueued(t, email.Headers())); diff != "" {
				t.Errorf("email task headers (-want +got):\n%s", diff)
			}
			var got map[string]string
			if err := json.Unmarshal(email.Payload(), &got); err != nil {
				t.Fatalf("email payload %s: %v", email.Payload(), err)
			}
			wantPayload := map[string]string{"to": "ada@example.com", "subject": "Welcome", "body": "Hello <b>Ada</b> & co", "from": "team@example.com"}
			if diff := cmp.Diff(wantPayload, got); diff != "" {
				t.Errorf("email payload (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewTaskOmitsEmptyFrom(t *testing.T) {
	t.Parallel()
	task, err := producer.NewEmailTask("acme", producer.Email{To: "ada@example.com", Subject: "Hi", Body: "Hello"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(task.Payload()), `{"to":"ada@example.com","subject":"Hi","body":"Hello"}`; got != want {
		t.Errorf("payload = %s, want %s", got, want)
	}
}

func TestNewTaskRejectsBadInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		build func() (*asynq.Task, error)
		field string
		want  string
	}{
		{"SMS tenant", func() (*asynq.Task, error) { return producer.NewSMSTask("{acme}", goodSMS) },
			"tenant", `producer: new sms:send task: invalid task: tenant "{acme}": does not start with a letter or digit`},
		{"SMS to", func() (*asynq.Task, error) {
			return producer.NewSMSTask("acme", producer.SMS{To: "+1555x", Body: "hi"})
		},
			"to", `producer: new sms:send task for tenant "acme": invalid task: to "+1555x": not an E.164 phone number (+ then 2 to 15 digits, no leading 0)`},
		{"email tenant", func() (*asynq.Task, error) { return producer.NewEmailTask("", goodEmail) },
			"tenant", `producer: new email:send task: invalid task: tenant "": is empty`},
		{"email subject", func() (*asynq.Task, error) {
			return producer.NewEmailTask("acme", producer.Email{To: "ada@example.com", Subject: "a\nb", Body: "b"})
		}, "subject", `producer: new email:send task for tenant "acme": invalid task: subject "a\nb": contains a line break (CR or LF)`},
		{"budget too large", func() (*asynq.Task, error) {
			return producer.NewSMSTask("acme", goodSMS, asynq.MaxRetry(math.MaxInt32))
		},
			producer.HeaderMaxRetry, `invalid task: sluice-max-retry "2147483647": is more than 2147483646, the most asynq can store`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task, err := tc.build()
			if task != nil {
				t.Errorf("got a task with the error %v", err)
			}
			assertInvalid(t, err, tc.field)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

// TestTaskTypes: the types of the tasks this package makes, in name order,
// in a slice of the caller's own.
func TestTaskTypes(t *testing.T) {
	t.Parallel()
	if diff := cmp.Diff([]string{producer.TypeEmail, producer.TypeSMS}, producer.TaskTypes()); diff != "" {
		t.Errorf("TaskTypes() (-want +got):\n%s", diff)
	}
	producer.TaskTypes()[0] = "changed"
	if got := producer.TaskTypes()[0]; got != producer.TypeEmail {
		t.Errorf("TaskTypes()[0] = %q after a caller changed its copy, want %q", got, producer.TypeEmail)
	}
}
