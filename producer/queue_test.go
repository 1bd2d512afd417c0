package producer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/producer"
)

// TestDefaultQueue: while Redis names no layout (no worker of this version
// started), a task given no queue goes to default, where older workers
// look; once a worker wrote the layout, to its type's queue. One given a
// queue, when built or when enqueued, keeps it, the last given winning as
// in asynq. On a Redis of its own, as the type queues are shared names.
func TestDefaultQueue(t *testing.T) {
	t.Parallel()
	rdb := redistest.OwnClient(t, 0)
	ctx := context.Background()
	sms := producer.SMS{To: "+15551234567", Body: "hi"}
	if info, err := producer.NewClientFromRedisClient(rdb).EnqueueSMS(ctx, "acme", sms); err != nil || info.Queue != "default" {
		t.Fatalf("enqueue with no layout in Redis: %v, %v; want it on default", info, err)
	}
	if err := rdb.Set(ctx, keyspace.LayoutKey(keyspace.DefaultPrefix), "shards=1", 0).Err(); err != nil {
		t.Fatal(err) // as the first worker of this version does
	}
	c := producer.NewClientFromRedisClient(rdb)
	built, err := producer.NewSMSTask("acme", sms, asynq.Queue("built"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := producer.NewEmailTask("acme", producer.Email{To: "ada@example.com", Subject: "s", Body: "b"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		enqueue func() (*asynq.TaskInfo, error)
		want    string
	}{
		{"sms", func() (*asynq.TaskInfo, error) { return c.EnqueueSMS(ctx, "acme", sms) }, producer.TypeSMS},
		{"email", func() (*asynq.TaskInfo, error) { return c.Enqueue(ctx, plain) }, producer.TypeEmail},
		{"sms with a queue", func() (*asynq.TaskInfo, error) { return c.EnqueueSMS(ctx, "acme", sms, asynq.Queue("mine")) }, "mine"},
		{"built with a queue", func() (*asynq.TaskInfo, error) { return c.Enqueue(ctx, built) }, "built"},
		{"built with one, enqueued with another", func() (*asynq.TaskInfo, error) { return c.Enqueue(ctx, built, asynq.Queue("later")) }, "later"},
		{"email enqueued with a queue", func() (*asynq.TaskInfo, error) { return c.Enqueue(ctx, plain, asynq.Queue("later")) }, "later"},
	}
	if q, err := c.Queue(ctx, producer.TypeEmail, "acme"); err != nil || q != producer.TypeEmail {
		t.Errorf("Queue(email) = %q, %v; want %q", q, err, producer.TypeEmail)
	}
	for _, tc := range cases {
		info, err := tc.enqueue()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if info.Queue != tc.want { // the type's queue is layout.Default's
			t.Errorf("%s: queue %q, want %q", tc.name, info.Queue, tc.want)
		}
	}
	if got, ok := built.Headers()[producer.HeaderQueue]; ok {
		t.Errorf("a task built with asynq.Queue(built) has %s %q, want none", producer.HeaderQueue, got)
	}
	if got := plain.Headers()[producer.HeaderQueue]; got != producer.QueueByLayout {
		t.Errorf("a task built without a queue has %s %q, want %q", producer.HeaderQueue, got, producer.QueueByLayout)
	}
	byHand := asynq.NewTaskWithHeaders(producer.TypeSMS, []byte(`{"to":"+15551234567","body":"hi"}`),
		map[string]string{producer.HeaderTenant: "acme", producer.HeaderMaxRetry: "0"})
	if info, err := c.Enqueue(ctx, byHand); err != nil || info.Queue != "default" {
		t.Errorf("a task built by hand without %s: %v, %v; want it on asynq's default queue, as its options say", producer.HeaderQueue, info, err)
	}
}

// TestShardedQueues: a Client follows the layout Redis names: with four
// shards a task goes to its tenant's shard's queue of its type. A marker
// that is not a layout is an error naming its key, and nothing is
// enqueued, but for a task given its queue, which needs no layout.
func TestShardedQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	if err := rdb.Set(ctx, keyspace.LayoutKey(prefix), "shards=4", 0).Err(); err != nil {
		t.Fatal(err)
	}
	c := producer.NewClientFromRedisClient(rdb, producer.WithPrefix(prefix))
	four := layout.Layout{Shards: 4}
	seen := map[string]bool{}
	for i := range 40 {
		tenant := fmt.Sprintf("tenant-%d", i)
		info, err := c.EnqueueSMS(ctx, tenant, producer.SMS{To: "+15551234567", Body: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		if want := four.Queue(producer.TypeSMS, tenant); info.Queue != want {
			t.Errorf("tenant %s: queue %q, want its shard's %q", tenant, info.Queue, want)
		}
		seen[info.Queue] = true
	}
	if len(seen) != 4 {
		t.Errorf("40 tenants went to %d queues, want the 4 shards': %v", len(seen), seen)
	}
	bad := redistest.Prefix(t)
	if err := rdb.Set(ctx, keyspace.LayoutKey(bad), "shards=lots", 0).Err(); err != nil {
		t.Fatal(err)
	}
	c = producer.NewClientFromRedisClient(rdb, producer.WithPrefix(bad))
	_, err := c.EnqueueSMS(ctx, "acme", producer.SMS{To: "+15551234567", Body: "hi"})
	if err == nil || !strings.Contains(err.Error(), keyspace.LayoutKey(bad)) {
		t.Errorf("enqueue under a damaged marker: %v, want an error naming %s", err, keyspace.LayoutKey(bad))
	}
	q := redistest.Queue(t, rdb)
	if _, err := c.EnqueueSMS(ctx, "acme", producer.SMS{To: "+15551234567", Body: "hi"}, asynq.Queue(q)); err != nil {
		t.Errorf("enqueue on queue %s under a damaged marker: %v", q, err)
	}
}

// TestQueueDuringALayoutChange: while admin layout changes the layout
// (the marker says switching), a producer that has read no layout yet
// sends its tasks to the new layout's queues, where the workers started
// after the change look first.
func TestQueueDuringALayoutChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	one, three := layout.Layout{Shards: 1}, layout.Layout{Shards: 3}
	if err := layout.Ensure(ctx, rdb, prefix, one); err != nil {
		t.Fatal(err)
	}
	if err := layout.Begin(ctx, rdb, prefix, one, three); err != nil {
		t.Fatal(err)
	}
	c := producer.NewClientFromRedisClient(rdb, producer.WithPrefix(prefix))
	info, err := c.EnqueueSMS(ctx, "acme", producer.SMS{To: "+15551234567", Body: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if want := three.Queue(producer.TypeSMS, "acme"); info.Queue != want {
		t.Errorf("queue %q during the change, want the new layout's %q", info.Queue, want)
	}
}
