package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/producer"
)

// TestEnqueueStoresTask enqueues each kind of task and reads it back from
// Redis: type, payload, headers, queue and asynq's MaxRetry, the header's
// budget plus one.
func TestEnqueueStoresTask(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	c := producer.NewClientFromRedisClient(rdb)
	ctx := context.Background()
	cases := []struct {
		name         string
		maxRetry     []asynq.Option
		wantHeader   string
		wantMaxRetry int
	}{
		{"default", nil, "25", 26},
		{"MaxRetry(0)", []asynq.Option{asynq.MaxRetry(0)}, "0", 1},
		{"MaxRetry(5)", []asynq.Option{asynq.MaxRetry(5)}, "5", 6},
		{"MaxRetry(-1)", []asynq.Option{asynq.MaxRetry(-1)}, "0", 1},
	}
	kinds := []struct {
		name        string
		typ         string
		enqueue     func(q string, opts []asynq.Option) (*asynq.TaskInfo, error)
		wantPayload map[string]string
	}{
		{"sms", producer.TypeSMS, func(q string, opts []asynq.Option) (*asynq.TaskInfo, error) {
			return c.EnqueueSMS(ctx, "acme", goodSMS, append(opts, asynq.Queue(q))...)
		}, map[string]string{"to": "+15551234567", "body": "Your code is 123456"}},
		{"email", producer.TypeEmail, func(q string, opts []asynq.Option) (*asynq.TaskInfo, error) {
			return c.EnqueueEmail(ctx, "acme", goodEmail, append(opts, asynq.Queue(q))...)
		}, map[string]string{"to": "ada@example.com", "subject": "Welcome", "body": "Hello <b>Ada</b> & co", "from": "team@example.com"}},
	}
	for _, k := range kinds {
		for _, tc := range cases {
			t.Run(k.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				q := redistest.Queue(t, rdb)
				enq, err := k.enqueue(q, tc.maxRetry)
				if err != nil {
					t.Fatalf("enqueue: %v", err)
				}
				if enq.State != asynq.TaskStatePending {
					t.Errorf("state = %v, want pending", enq.State)
				}
				info := taskInfo(t, rdb, q, enq.ID)
				if got, want := info.Type, k.typ; got != want {
					t.Errorf("type = %q, want %q", got, want)
				}
				if got, want := info.Queue, q; got != want {
					t.Errorf("queue = %q, want %q", got, want)
				}
				var payload map[string]string
				if err := json.Unmarshal(info.Payload, &payload); err != nil {
					t.Fatalf("payload %s: %v", info.Payload, err)
				}
				if diff := cmp.Diff(k.wantPayload, payload); diff != "" {
					t.Errorf("payload (-want +got):\n%s", diff)
				}
				wantHeaders := map[string]string{producer.HeaderTenant: "acme", producer.HeaderMaxRetry: tc.wantHeader}
				if diff := cmp.Diff(wantHeaders, stripEnqueued(t, info.Headers)); diff != "" {
					t.Errorf("headers (-want +got):\n%s", diff)
				}
				if got, want := info.MaxRetry, tc.wantMaxRetry; got != want {
					t.Errorf("asynq MaxRetry = %d, want %d", got, want)
				}
				if got, want := enq.MaxRetry, tc.wantMaxRetry; got != want {
					t.Errorf("returned TaskInfo.MaxRetry = %d, want %d", got, want)
				}
			})
		}
	}
}

func TestEnqueueProcessInSchedules(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	c := producer.NewClientFromRedisClient(rdb)
	q := redistest.Queue(t, rdb)
	before := time.Now()
	enq, err := c.EnqueueSMS(context.Background(), "acme", goodSMS, asynq.Queue(q), asynq.ProcessIn(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	info := taskInfo(t, rdb, q, enq.ID)
	if info.State != asynq.TaskStateScheduled {
		t.Errorf("state = %v, want scheduled", info.State)
	}
	if at := info.NextProcessAt; at.Before(before.Add(time.Hour-time.Second)) || at.After(time.Now().Add(time.Hour+time.Second)) {
		t.Errorf("NextProcessAt = %v, want an hour after %v", at, before)
	}
}

// TestEnqueueConflicts: asynq's conflict errors stay matchable.
func TestEnqueueConflicts(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	c := producer.NewClientFromRedisClient(rdb)
	ctx := context.Background()
	cases := []struct {
		name string
		opts []asynq.Option
		want error
	}{
		{"TaskID", []asynq.Option{asynq.TaskID("order-42")}, asynq.ErrTaskIDConflict},
		{"Unique", []asynq.Option{asynq.Unique(time.Minute)}, asynq.ErrDuplicateTask},
		{"TaskID scheduled", []asynq.Option{asynq.TaskID("order-43"), asynq.ProcessIn(time.Hour)}, asynq.ErrTaskIDConflict},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := append([]asynq.Option{asynq.Queue(redistest.Queue(t, rdb))}, tc.opts...)
			if _, err := c.EnqueueEmail(ctx, "acme", goodEmail, opts...); err != nil {
				t.Fatalf("first enqueue: %v", err)
			}
			_, err := c.EnqueueEmail(ctx, "acme", goodEmail, opts...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("second enqueue: %v, want %v", err, tc.want)
			}
			if errors.Is(err, producer.ErrInvalid) {
				t.Errorf("conflict %v matches ErrInvalid", err)
			}
			if want := `producer: enqueue email:send for tenant "acme": `; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
		})
	}
}

// TestBadInputReachesNoRedis enqueues bad tasks into fresh queues: each must
// fail with ErrInvalid and leave the queue absent from Redis.
func TestBadInputReachesNoRedis(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	c := producer.NewClientFromRedisClient(rdb)
	ctx := context.Background()
	for _, tc := range slices.Concat(badTypedInputs(ctx, c), badEnqueueInputs(ctx, c)) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := redistest.Queue(t, rdb)
			info, err := tc.enqueue(asynq.Queue(q))
			if info != nil {
				t.Errorf("got TaskInfo %+v with error %v", info, err)
			}
			assertInvalid(t, err, tc.field)
			if !strings.HasPrefix(err.Error(), "producer: ") {
				t.Errorf("error %q does not say where it comes from", err)
			}
			assertNothingIn(t, rdb, q)
		})
	}
}

// badInput enqueues a bad task into the queue q; its error must name field.
type badInput struct {
	name    string
	enqueue func(q asynq.Option) (*asynq.TaskInfo, error)
	field   string
}

// badTypedInputs are bad SMS and emails given to EnqueueSMS and EnqueueEmail.
func badTypedInputs(ctx context.Context, c *producer.Client) []badInput {
	return []badInput{
		{"SMS tenant", func(q asynq.Option) (*asynq.TaskInfo, error) { return c.EnqueueSMS(ctx, "acme:{x}", goodSMS, q) }, "tenant"},
		{"SMS to", func(q asynq.Option) (*asynq.TaskInfo, error) {
			return c.EnqueueSMS(ctx, "acme", producer.SMS{To: "555-1234", Body: "hi"}, q)
		}, "to"},
		{"SMS body 1 MB", func(q asynq.Option) (*asynq.TaskInfo, error) {
			return c.EnqueueSMS(ctx, "acme", producer.SMS{To: "+15551234567", Body: mb}, q)
		}, "body"},
		{"email from", func(q asynq.Option) (*asynq.TaskInfo, error) {
			m := goodEmail
			m.From = "Eve <eve@example.com>"
			return c.EnqueueEmail(ctx, "acme", m, q)
		}, "from"},
		{"email subject", func(q asynq.Option) (*asynq.TaskInfo, error) {
			m := goodEmail
			m.Subject = "Hi\r\nBcc: eve@example.com"
			return c.EnqueueEmail(ctx, "acme", m, q)
		}, "subject"},
	}
}

// badEnqueueInputs are bad tasks given to Enqueue, most of them built by
// hand.
func badEnqueueInputs(ctx context.Context, c *producer.Client) []badInput {
	byHand := func(typ, payload string, headers map[string]string) *asynq.Task {
		return asynq.NewTaskWithHeaders(typ, []byte(payload), headers)
	}
	okHeaders := map[string]string{producer.HeaderTenant: "acme", producer.HeaderMaxRetry: "3"}
	okPayload := `{"to":"+15551234567","body":"hi"}`
	return []badInput{
		{"Enqueue nil task", func(q asynq.Option) (*asynq.TaskInfo, error) { return c.Enqueue(ctx, nil, q) }, ""},
		{"Enqueue other type", func(q asynq.Option) (*asynq.TaskInfo, error) {
			return c.Enqueue(ctx, byHand("push:send", okPayload, okHeaders), q)
		}, ""},
		{"Enqueue bad payload", func(q asynq.Option) (*asynq.TaskInfo, error) {
			return c.Enqueue(ctx, byHand(producer.TypeSMS, `{"to":"+15551234567","body":""}`, okHeaders), q)
		}, "body"},
		{"Enqueue unknown field", func(q asynq.Option) (*asynq.TaskInfo, error) {
			return c.Enqueue(ctx, byHand(producer.TypeSMS, `{"to":"+15551234567","body":"hi","x":1}`, okHeaders), q)
		}, ""},
		{"Enqueue no headers", func(q asynq.Option) (*asynq.TaskInfo, error) {
			return c.Enqueue(ctx, asynq.NewTask(producer.TypeSMS, []byte(okPayload)), q)
		}, "tenant"},
		{"Enqueue bad tenant header", func(q asynq.Option) (*asynq.TaskInfo, error) {
			return c.Enqueue(ctx, byHand(producer.TypeSMS, okPayload, map[string]string{producer.HeaderTenant: "a b", producer.HeaderMaxRetry: "3"}), q)
		}, "tenant"},
		{"Enqueue no max retry header", func(q asynq.Option) (*asynq.TaskInfo, error) {
			return c.Enqueue(ctx, byHand(producer.TypeSMS, okPayload, map[string]string{producer.HeaderTenant: "acme"}), q)
		}, producer.HeaderMaxRetry},
		{"Enqueue negative max retry header", func(q asynq.Option) (*asynq.TaskInfo, error) {
			return c.Enqueue(ctx, byHand(producer.TypeSMS, okPayload, map[string]string{producer.HeaderTenant: "acme", producer.HeaderMaxRetry: "-1"}), q)
		}, producer.HeaderMaxRetry},
		{"Enqueue non-decimal max retry header", func(q asynq.Option) (*asynq.TaskInfo, error) {
			return c.Enqueue(ctx, byHand(producer.TypeSMS, okPayload, map[string]string{producer.HeaderTenant: "acme", producer.HeaderMaxRetry: "+3"}), q)
		}, producer.HeaderMaxRetry},
		{"Enqueue huge max retry header", func(q asynq.Option) (*asynq.TaskInfo, error) {
			return c.Enqueue(ctx, byHand(producer.TypeSMS, okPayload, map[string]string{producer.HeaderTenant: "acme", producer.HeaderMaxRetry: "2147483647"}), q)
		}, producer.HeaderMaxRetry},
		{"Enqueue with MaxRetry", func(q asynq.Option) (*asynq.TaskInfo, error) {
			task, err := producer.NewSMSTask("acme", goodSMS)
			if err != nil {
				return nil, err
			}
			return c.Enqueue(ctx, task, q, asynq.MaxRetry(3))
		}, ""},
	}
}

// TestEnqueueBuiltTask enqueues tasks built beforehand: the options given
// to NewSMSTask hold, Enqueue's options override them, and a task built by
// hand gets asynq's MaxRetry from its header whatever it says itself.
func TestEnqueueBuiltTask(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	c := producer.NewClientFromRedisClient(rdb)
	ctx := context.Background()

	t.Run("options of NewSMSTask", func(t *testing.T) {
		t.Parallel()
		q := redistest.Queue(t, rdb)
		task, err := producer.NewSMSTask("acme", goodSMS, asynq.Queue(q), asynq.MaxRetry(2), asynq.TaskID("a"))
		if err != nil {
			t.Fatal(err)
		}
		enq, err := c.Enqueue(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		info := taskInfo(t, rdb, q, "a")
		if enq.ID != "a" || info.MaxRetry != 3 || info.Headers[producer.HeaderMaxRetry] != "2" {
			t.Errorf("ID %q, MaxRetry %d, header %q; want a, 3, 2", enq.ID, info.MaxRetry, info.Headers[producer.HeaderMaxRetry])
		}
	})
	t.Run("Enqueue overrides", func(t *testing.T) {
		t.Parallel()
		q1, q2 := redistest.Queue(t, rdb), redistest.Queue(t, rdb)
		task, err := producer.NewEmailTask("acme", goodEmail, asynq.Queue(q1), asynq.MaxRetry(7))
		if err != nil {
			t.Fatal(err)
		}
		enq, err := c.Enqueue(ctx, task, asynq.Queue(q2), asynq.ProcessIn(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		info := taskInfo(t, rdb, q2, enq.ID)
		if info.State != asynq.TaskStateScheduled || info.MaxRetry != 8 {
			t.Errorf("state %v, MaxRetry %d; want scheduled, 8", info.State, info.MaxRetry)
		}
		assertNothingIn(t, rdb, q1)
	})
	t.Run("by hand", func(t *testing.T) {
		t.Parallel()
		q := redistest.Queue(t, rdb)
		headers := map[string]string{producer.HeaderTenant: "acme", producer.HeaderMaxRetry: "0", "trace": "abc"}
		task := asynq.NewTaskWithHeaders(producer.TypeSMS, []byte(`{"to":"+15551234567","body":"hi"}`), headers, asynq.MaxRetry(99), asynq.Queue(q))
		enq, err := c.Enqueue(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		info := taskInfo(t, rdb, q, enq.ID)
		if info.MaxRetry != 1 {
			t.Errorf("asynq MaxRetry = %d, want 1, the header's 0 plus one", info.MaxRetry)
		}
		if diff := cmp.Diff(headers, info.Headers); diff != "" {
			t.Errorf("headers (-want +got):\n%s", diff)
		}
	})
}

// TestEnqueueConcurrently shares one Client between goroutines (run with
// -race).
func TestEnqueueConcurrently(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	c := producer.NewClientFromRedisClient(rdb)
	q := redistest.Queue(t, rdb)
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			tenant := fmt.Sprintf("tenant-%d", i%5)
			if _, err := c.EnqueueSMS(context.Background(), tenant, goodSMS, asynq.Queue(q)); err != nil {
				t.Errorf("EnqueueSMS: %v", err)
			}
		})
	}
	wg.Wait()
	qi, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(q)
	if err != nil {
		t.Fatal(err)
	}
	if qi.Pending != n {
		t.Errorf("%d pending tasks, want %d", qi.Pending, n)
	}
}

func TestEnqueueHonoursContext(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	c := producer.NewClientFromRedisClient(rdb)
	q := redistest.Queue(t, rdb)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.EnqueueSMS(ctx, "acme", goodSMS, asynq.Queue(q))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("EnqueueSMS with a canceled context = %v, want context.Canceled", err)
	}
}

// TestClose: NewClient owns its connection, NewClientFromRedisClient does
// not.
func TestClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("owned", func(t *testing.T) {
		t.Parallel()
		rdb := redistest.Client(t)
		opt, err := asynq.ParseRedisURI(redistest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		c := producer.NewClient(opt)
		q := redistest.Queue(t, rdb)
		if _, err := c.EnqueueSMS(ctx, "acme", goodSMS, asynq.Queue(q)); err != nil {
			t.Fatalf("EnqueueSMS: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if _, err := c.EnqueueSMS(ctx, "acme", goodSMS, asynq.Queue(q)); err == nil {
			t.Errorf("EnqueueSMS after Close succeeded; the connection was not closed")
		}
	})
	t.Run("shared", func(t *testing.T) {
		t.Parallel()
		rdb := redistest.Client(t)
		c := producer.NewClientFromRedisClient(rdb)
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := rdb.Ping(ctx).Err(); err != nil {
			t.Errorf("the caller's client was closed: %v", err)
		}
	})
}

// TestNilConnection: a Client built without a connection returns an error
// from every call instead of panicking.
func TestNilConnection(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		c    *producer.Client
	}{
		{"NewClient", producer.NewClient(nil)},
		{"NewClientFromRedisClient", producer.NewClientFromRedisClient(nil)},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task, err := producer.NewSMSTask("acme", goodSMS)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tc.c.EnqueueSMS(ctx, "acme", goodSMS); err == nil || !strings.Contains(err.Error(), "nil") {
				t.Errorf("EnqueueSMS = %v, want an error about the nil connection", err)
			}
			if _, err := tc.c.EnqueueEmail(ctx, "acme", goodEmail); err == nil {
				t.Errorf("EnqueueEmail succeeded")
			}
			if _, err := tc.c.Enqueue(ctx, task); err == nil {
				t.Errorf("Enqueue succeeded")
			}
			if err := tc.c.Close(); err != nil {
				t.Errorf("Close = %v, want nil", err)
			}
		})
	}
}
