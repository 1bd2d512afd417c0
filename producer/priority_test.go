package producer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/producer"
)

// TestPriority: Priority sets the task's HeaderPriority, which
// TaskPriority reads back; a task without it has the default, 3; a
// priority out of range is refused naming the header, before anything
// reaches Redis.
func TestPriority(t *testing.T) {
	t.Parallel()
	sms := producer.SMS{To: "+15551234567", Body: "Your code is 123456"}
	for _, p := range []int{1, 3, 5} {
		task, err := producer.NewSMSTask("acme", sms, producer.Priority(p), asynq.Queue("q"))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := producer.TaskPriority(task); err != nil || got != p {
			t.Errorf("Priority(%d): TaskPriority = %d, %v", p, got, err)
		}
	}
	task, err := producer.NewSMSTask("acme", sms)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := task.Headers()[producer.HeaderPriority]; ok {
		t.Errorf("a task without Priority has header %s", producer.HeaderPriority)
	}
	if got, err := producer.TaskPriority(task); err != nil || got != 3 {
		t.Errorf("without Priority: TaskPriority = %d, %v, want 3", got, err)
	}
	for _, p := range []int{0, 6, -1} {
		_, err := producer.NewEmailTask("acme", producer.Email{To: "ada@example.com", Subject: "s", Body: "b"}, producer.Priority(p))
		var fe *producer.FieldError
		if !errors.As(err, &fe) || fe.Field != producer.HeaderPriority || !strings.Contains(err.Error(), "1 (most urgent) to 5") {
			t.Errorf("Priority(%d): %v, want a FieldError naming %s and its range", p, err, producer.HeaderPriority)
		}
	}
	for _, h := range []string{"x", "07", "9", ""} {
		bad := asynq.NewTaskWithHeaders(producer.TypeSMS, nil, map[string]string{producer.HeaderPriority: h})
		if _, err := producer.TaskPriority(bad); !errors.Is(err, producer.ErrInvalid) {
			t.Errorf("header %q: %v, want ErrInvalid", h, err)
		}
	}
}

// TestEnqueueRefusesPriority: a built task's priority is in its header, so
// Enqueue refuses a Priority option rather than ignore it.
func TestEnqueueRefusesPriority(t *testing.T) {
	t.Parallel()
	pc := producer.NewClientFromRedisClient(redistest.Client(t))
	task, err := producer.NewSMSTask("acme", producer.SMS{To: "+15551234567", Body: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pc.Enqueue(context.Background(), task, producer.Priority(1))
	if !errors.Is(err, producer.ErrInvalid) || !strings.Contains(err.Error(), "give Priority to NewSMSTask") {
		t.Errorf("Enqueue with Priority: %v", err)
	}
}

// TestBulkPriority: a bulk line's priority becomes the task's, and one out
// of range is refused naming the field.
func TestBulkPriority(t *testing.T) {
	t.Parallel()
	two, nine := 2, 9
	task, _, err := producer.BulkLine{Type: "sms", Tenant: "acme", To: "+15551234567", Body: "hi", Priority: &two}.Task()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := producer.TaskPriority(task); got != 2 {
		t.Errorf("priority 2: TaskPriority = %d", got)
	}
	_, _, err = producer.BulkLine{Type: "sms", Tenant: "acme", To: "+15551234567", Body: "hi", Priority: &nine}.Task()
	var fe *producer.FieldError
	if !errors.As(err, &fe) || fe.Field != "priority" {
		t.Errorf("priority 9: %v, want a FieldError of field priority", err)
	}
}

// TestEnqueuedHeader: a task's HeaderEnqueued is when it was built, or
// when asynq.ProcessIn or ProcessAt makes it due.
func TestEnqueuedHeader(t *testing.T) {
	t.Parallel()
	sms := producer.SMS{To: "+15551234567", Body: "hi"}
	before := time.Now()
	for _, tc := range []struct {
		name string
		opts []asynq.Option
		from time.Time
	}{
		{"now", nil, before},
		{"ProcessIn", []asynq.Option{asynq.ProcessIn(time.Hour)}, before.Add(time.Hour)},
		{"ProcessAt", []asynq.Option{asynq.ProcessAt(before.Add(2 * time.Hour))}, before.Add(2 * time.Hour)},
		{"ProcessAt past", []asynq.Option{asynq.ProcessAt(before.Add(-time.Hour))}, before},
	} {
		task, err := producer.NewSMSTask("acme", sms, tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		at, ok := producer.TaskEnqueued(task)
		if !ok || at.Before(tc.from) || at.After(tc.from.Add(time.Minute)) {
			t.Errorf("%s: TaskEnqueued = %v, %v; want %v or up to a minute after", tc.name, at, ok, tc.from)
		}
	}
	if _, ok := producer.TaskEnqueued(asynq.NewTask(producer.TypeSMS, nil)); ok {
		t.Errorf("a task without the header has a time")
	}
}
