package producer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/producer"
)

// TestRetention: a task with an ID is kept a day once it has run
// (asynq's Retention), or as long as WithRetention says, or as its own
// Retention says; a task without an ID is never kept; a retention out of
// bounds is refused.
func TestRetention(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	ctx := context.Background()
	queue := redistest.Queue(t, rdb)
	sms := producer.SMS{To: "+15551234567", Body: "hi"}
	cases := []struct {
		name   string
		client []producer.ClientOption
		opts   []asynq.Option
		want   time.Duration
	}{
		{"an ID, the default", nil, []asynq.Option{asynq.TaskID("a")}, producer.DefaultRetention},
		{"no ID", nil, nil, 0},
		{"an ID, WithRetention(1h)", []producer.ClientOption{producer.WithRetention(time.Hour)}, []asynq.Option{asynq.TaskID("b")}, time.Hour},
		{"an ID, WithRetention(0)", []producer.ClientOption{producer.WithRetention(0)}, []asynq.Option{asynq.TaskID("c")}, 0},
		{"an ID and its own", nil, []asynq.Option{asynq.TaskID("d"), asynq.Retention(time.Minute)}, time.Minute},
	}
	for _, tc := range cases {
		c := producer.NewClientFromRedisClient(rdb, append(tc.client, producer.WithoutParking())...)
		info, err := c.EnqueueSMS(ctx, "acme", sms, append(tc.opts, asynq.Queue(queue))...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if info.Retention != tc.want {
			t.Errorf("%s: retention %v, want %v", tc.name, info.Retention, tc.want)
		}
	}
	for _, d := range []time.Duration{-time.Second, producer.MaxRetention + time.Second} {
		c := producer.NewClientFromRedisClient(rdb, producer.WithRetention(d))
		if _, err := c.EnqueueSMS(ctx, "acme", sms); !errors.Is(err, producer.ErrInvalidConfig) {
			t.Errorf("WithRetention(%v): %v, want ErrInvalidConfig", d, err)
		}
	}
}
