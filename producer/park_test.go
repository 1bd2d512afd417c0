package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
)

// TestParkAtEnqueue: while SMS wait in the fair lines of a prefix, an SMS
// due now is parked at enqueue (scheduled, due a park later, and on the
// lines' entrance with its tenant and priority); an SMS asked for later
// (by its own options or by Enqueue's), an email (whose type does not
// wait), and every task of a Client without parking or of another prefix
// go the usual way. When the entrance refuses the task, it is run now.
func TestParkAtEnqueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	q := redistest.Queue(t, rdb)
	prefix := redistest.Prefix(t)
	entrance := prefix + "{" + throttle.DefaultGroup + "}qe"
	fillLines(t, rdb, prefix, q)

	c := producer.NewClientFromRedisClient(rdb, producer.WithPrefix(prefix))
	checkParkedAtEnqueue(t, rdb, c, q, entrance)
	checkNotParked(t, rdb, c, prefix, q, entrance)

	// A damaged entrance: the task is enqueued and run now.
	if err := rdb.Set(ctx, entrance, "damaged", 0).Err(); err != nil {
		t.Fatal(err)
	}
	info, err := c.EnqueueSMS(ctx, "globex", goodSMS, asynq.Queue(q))
	if err != nil || errors.Is(err, producer.ErrEnqueuedLate) {
		t.Fatalf("SMS with the entrance refused: %v", err)
	}
	if got := taskInfo(t, rdb, q, info.ID); got.State != asynq.TaskStatePending {
		t.Errorf("SMS with the entrance refused: %v, want pending", got.State)
	}
}

// fillLines makes SMS of prefix wait: the provider's hourly rule of 1 is
// full, and a worker's dispatch loop has taken the entrance in (here, once).
func fillLines(t *testing.T, rdb redis.UniversalClient, prefix, q string) {
	t.Helper()
	ctx := context.Background()
	ls := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)).Lines(throttle.LinesConfig{})
	checks := []throttle.LineCheck{{Check: throttle.Check{Key: "provider/sms", Policy: throttle.Policy{Limit: 1, Window: time.Hour}, Cost: 1}, Shared: true}}
	for i, want := range []throttle.Outcome{throttle.Admitted, throttle.Parked} {
		turn, err := ls.Arrive(ctx, throttle.Arrival{Class: producer.TypeSMS, Tenant: "acme", Queue: q, ID: string(rune('a' + i)), Checks: checks})
		if err != nil || turn.Outcome != want {
			t.Fatalf("arrival %d: %v, %v; want %v", i, turn.Outcome, err, want)
		}
	}
	rules := func(string, string) (float64, []throttle.LineCheck) { return 1, checks }
	if _, err := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)).Lines(throttle.LinesConfig{Rules: rules}).Dispatch(ctx); err != nil {
		t.Fatal(err)
	}
}

// checkParkedAtEnqueue enqueues an SMS due now through c: it must be
// scheduled a park later and be the one entry of the lines' entrance.
func checkParkedAtEnqueue(t *testing.T, rdb redis.UniversalClient, c *producer.Client, q, entrance string) {
	t.Helper()
	ctx := context.Background()
	before := time.Now()
	info, err := c.EnqueueSMS(ctx, "globex", goodSMS, asynq.Queue(q), producer.Priority(1))
	if err != nil {
		t.Fatal(err)
	}
	got := taskInfo(t, rdb, q, info.ID)
	if got.State != asynq.TaskStateScheduled || got.NextProcessAt.Before(before.Add(throttle.DefaultPark-time.Second)) {
		t.Errorf("parked SMS: %v, due %v; want scheduled a park (%v) after %v", got.State, got.NextProcessAt, throttle.DefaultPark, before)
	}
	raw, err := rdb.LRange(ctx, entrance, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var e throttle.Entry
	if len(raw) != 1 || json.Unmarshal([]byte(raw[0]), &e) != nil || e.At < before.UnixMilli() ||
		e != (throttle.Entry{Class: producer.TypeSMS, Priority: 1, Tenant: "globex", Queue: q, ID: info.ID, At: e.At}) {
		t.Fatalf("entrance holds %q, want the parked SMS", raw)
	}
}

// checkNotParked enqueues the tasks that go the usual way while SMS wait:
// each takes its usual state and the entrance keeps its one entry.
func checkNotParked(t *testing.T, rdb redis.UniversalClient, c *producer.Client, prefix, q, entrance string) {
	t.Helper()
	ctx := context.Background()
	later, err := producer.NewSMSTask("globex", goodSMS, asynq.ProcessIn(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	noPark := producer.NewClientFromRedisClient(rdb, producer.WithPrefix(prefix), producer.WithoutParking())
	other := producer.NewClientFromRedisClient(rdb, producer.WithPrefix(prefix+"other:"))
	usual := []struct {
		name    string
		enqueue func() (*asynq.TaskInfo, error)
		want    asynq.TaskState
	}{
		{"an SMS asked for in an hour, by Enqueue", func() (*asynq.TaskInfo, error) {
			return c.EnqueueSMS(ctx, "globex", goodSMS, asynq.Queue(q), asynq.ProcessIn(time.Hour))
		}, asynq.TaskStateScheduled},
		{"an SMS asked for in an hour, by its own options", func() (*asynq.TaskInfo, error) {
			return c.Enqueue(ctx, later, asynq.Queue(q))
		}, asynq.TaskStateScheduled},
		{"an email", func() (*asynq.TaskInfo, error) {
			return c.EnqueueEmail(ctx, "globex", goodEmail, asynq.Queue(q))
		}, asynq.TaskStatePending},
		{"an SMS without parking", func() (*asynq.TaskInfo, error) {
			return noPark.EnqueueSMS(ctx, "globex", goodSMS, asynq.Queue(q))
		}, asynq.TaskStatePending},
		{"an SMS of another prefix", func() (*asynq.TaskInfo, error) {
			return other.EnqueueSMS(ctx, "globex", goodSMS, asynq.Queue(q))
		}, asynq.TaskStatePending},
	}
	for _, u := range usual {
		info, err := u.enqueue()
		if err != nil {
			t.Fatalf("%s: %v", u.name, err)
		}
		if got := taskInfo(t, rdb, q, info.ID); got.State != u.want {
			t.Errorf("%s: %v, want %v", u.name, got.State, u.want)
		}
		if n := rdb.LLen(ctx, entrance).Val(); n != 1 {
			t.Errorf("%s: the entrance holds %d, want still 1", u.name, n)
		}
	}
}

// TestParkBadPrefix: a prefix with a brace makes every call fail.
func TestParkBadPrefix(t *testing.T) {
	t.Parallel()
	c := producer.NewClientFromRedisClient(redistest.Client(t), producer.WithPrefix("a{b"))
	if _, err := c.EnqueueSMS(context.Background(), "acme", goodSMS); err == nil || !errors.Is(err, producer.ErrInvalidConfig) {
		t.Fatalf("enqueue with prefix a{b: %v, want ErrInvalidConfig", err)
	}
}
