package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/syncbuf"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// TestDamagedKeyShouted: a tenant's log turned into a string (WRONGTYPE)
// refuses that tenant's decisions; another tenant's SMS are sent. The
// refusal is logged at ERROR once, however many tasks it refuses, and
// Ready reports it, naming the error; once the key is repaired (deleted)
// the refused tasks are sent, one INFO line says so and Ready is ready.
func TestDamagedKeyShouted(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() { rdb.Del(context.Background(), redistest.Keys(t, rdb, prefix)...) })
	q := redistest.Queue(t, rdb)
	ctx := context.Background()
	p, err := policies.Parse(t.Name(), []byte(`
tasks:
  sms:send:
    - {name: per-tenant, scope: tenant, limit: 100, window: 1s}
`))
	if err != nil {
		t.Fatal(err)
	}
	key, err := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)).RedisKey("rule/sms:send/per-tenant/acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, key, "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	sent := make(smsRecorder, 10)
	srv, err := worker.NewServer(rdb, worker.Config{
		ThrottleConfig: worker.ThrottleConfig{DelayedTaskCheckInterval: serverCheckInterval,
			Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		Policies: policies.Static(p), SMS: sent, Email: provider.LogProvider{},
		Queues: map[string]int{q: 1}, Prefix: prefix, ShutdownTimeout: 5 * time.Second, Concurrency: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Forgotten after 10 s: a refused task is back within about 1.3 s (the
	// retry set counts whole seconds), so a lasting refusal stays seen.
	worker.SetDamageTimes(srv, 10*time.Second, 300*time.Millisecond)
	_, stop := testwait.RunServer(t, srv)
	t.Cleanup(stop)
	pc := producer.NewClientFromRedisClient(rdb)
	for _, tenant := range []string{"acme", "acme", "acme", "globex", "globex", "globex"} {
		if _, err := pc.EnqueueSMS(ctx, tenant, goodSMS, asynq.Queue(q)); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if m := testwait.Receive(t, sent, "globex's SMS"); m.Tenant != "globex" {
			t.Fatalf("%s's SMS sent with its log damaged", m.Tenant)
		}
	}
	// Refused again and again: three times a task, at least.
	testwait.Eventually(t, func() (bool, string) {
		n := strings.Count(logs.String(), `"msg":"limiter did not decide"`)
		return n >= 9, fmt.Sprintf("acme's tasks refused %d times, want 9", n)
	})
	if err := srv.Ready(ctx); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("Ready with a damaged key: %v, want an error naming WRONGTYPE", err)
	}
	if n := strings.Count(logs.String(), `"level":"ERROR"`); n != 1 {
		t.Errorf("%d ERROR lines for one damaged key refused nine times and more, want 1:\n%s", n, logs)
	}
	if strings.Contains(logs.String(), "limiter unavailable") {
		t.Errorf("a refusal logged as an outage:\n%s", logs)
	}

	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if m := testwait.Receive(t, sent, "acme's SMS, its log repaired"); m.Tenant != "acme" {
			t.Fatalf("%s's SMS sent twice", m.Tenant)
		}
	}
	testwait.Eventually(t, func() (bool, string) {
		err := srv.Ready(ctx)
		return err == nil, fmt.Sprintf("Ready once the refusal is forgotten: %v", err)
	})
	if n := strings.Count(logs.String(), "Redis no longer refuses Sluice's calls"); n != 1 {
		t.Errorf("%d lines that Redis no longer refuses, want 1", n)
	}
}
