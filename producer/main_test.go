package producer_test

import (
	"errors"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/producer"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// taskInfo reads a task back from Redis.
func taskInfo(t *testing.T, rdb redis.UniversalClient, q, id string) *asynq.TaskInfo {
	t.Helper()
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(q, id)
	if err != nil {
		t.Fatalf("GetTaskInfo(%s, %s): %v", q, id, err)
	}
	return info
}

// assertNothingIn fails t if queue q holds anything in Redis.
func assertNothingIn(t *testing.T, rdb redis.UniversalClient, q string) {
	t.Helper()
	queues, err := asynq.NewInspectorFromRedisClient(rdb).Queues()
	if err != nil {
		t.Fatalf("list queues: %v", err)
	}
	if slices.Contains(queues, q) {
		t.Errorf("queue %s exists", q)
	}
	if keys := redistest.QueueKeys(t, rdb, q); len(keys) > 0 {
		t.Errorf("queue %s has keys in Redis: %q", q, keys)
	}
}

// assertInvalid fails t unless err matches ErrInvalid and, when field is
// not empty, holds a *FieldError for field.
func assertInvalid(t *testing.T, err error, field string) {
	t.Helper()
	if !errors.Is(err, producer.ErrInvalid) {
		t.Fatalf("error %v does not match ErrInvalid", err)
	}
	if field == "" {
		return
	}
	fe, ok := errors.AsType[*producer.FieldError](err)
	if !ok {
		t.Fatalf("error %v holds no *FieldError", err)
	}
	if fe.Field != field {
		t.Errorf("FieldError.Field = %q, want %q (error %v)", fe.Field, field, err)
	}
}

var (
	goodSMS   = producer.SMS{To: "+15551234567", Body: "Your code is 123456"}
	goodEmail = producer.Email{To: "ada@example.com", Subject: "Welcome", Body: "Hello <b>Ada</b> & co", From: "team@example.com"}
)

// stripEnqueued returns a copy of h without HeaderEnqueued, and fails t
// unless that header holds a time of the last minute: when the task was
// built.
func stripEnqueued(t *testing.T, h map[string]string) map[string]string {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, h[producer.HeaderEnqueued])
	if err != nil || time.Since(at) > time.Minute || time.Since(at) < 0 {
		t.Errorf("header %s = %q: want the time the task was built", producer.HeaderEnqueued, h[producer.HeaderEnqueued])
	}
	out := maps.Clone(h)
	delete(out, producer.HeaderEnqueued)
	return out
}
