package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/syncbuf"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/worker"
)

// smsRecorder is an SMSProvider that passes each message to a channel.
type smsRecorder chan worker.Message[producer.SMS]

func (r smsRecorder) SendSMS(_ context.Context, m worker.Message[producer.SMS]) error {
	r <- m
	return nil
}

// TestServerErrorHandler: Config.ErrorHandler sees every task run that
// returned an error, after the worker's own logging: here a throttled return
// and an archived task.
func TestServerErrorHandler(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() { rdb.Del(context.Background(), redistest.Keys(t, rdb, prefix)...) })
	q := redistest.Queue(t, rdb)
	p, err := worker.ParsePolicies(t.Name(), []byte(perHour))
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	type handled struct {
		tenant string
		err    error
		logged int // lines the worker had logged when it was called
	}
	calls := make(chan handled, 10)
	sent := make(smsRecorder, 10)
	srv, err := worker.NewServer(rdb, worker.Config{
		Policies:                 worker.StaticPolicies(p),
		SMS:                      sent,
		Queues:                   map[string]int{q: 1},
		Prefix:                   prefix,
		MaxHold:                  -1,
		DelayedTaskCheckInterval: serverCheckInterval,
		ShutdownTimeout:          5 * time.Second,
		Logger:                   logger,
		ErrorHandler: asynq.ErrorHandlerFunc(func(_ context.Context, task *asynq.Task, err error) {
			calls <- handled{task.Headers()[producer.HeaderTenant], err, strings.Count(logs.String(), "\n")}
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := runServer(t, srv)
	defer stop()

	pc := producer.NewClientFromRedisClient(rdb)
	for range 2 { // per-hour allows one: the second is throttled
		if _, err := pc.EnqueueSMS(ctx, "acme", goodSMS, asynq.Queue(q)); err != nil {
			t.Fatal(err)
		}
	}
	// An unknown task type is archived.
	if _, err := asynq.NewClientFromRedisClient(rdb).Enqueue(
		asynq.NewTaskWithHeaders("fax:send", nil, map[string]string{producer.HeaderTenant: "globex"}), asynq.Queue(q)); err != nil {
		t.Fatal(err)
	}

	if m := receive(t, sent, "SMS"); m.Tenant != "acme" {
		t.Errorf("SMS for tenant %q, want acme", m.Tenant)
	}
	var throttled, archived int
	for i := range 2 {
		h := receive(t, calls, "ErrorHandler call")
		if h.logged <= i {
			t.Errorf("Config.ErrorHandler called for %v before the worker logged it", h.err)
		}
		switch {
		case worker.IsThrottled(h.err) && h.tenant == "acme":
			throttled++
		case errors.Is(h.err, asynq.SkipRetry) && h.tenant == "globex":
			archived++
		default:
			t.Errorf("unexpected ErrorHandler call: tenant %q, %v", h.tenant, h.err)
		}
	}
	if throttled != 1 || archived != 1 {
		t.Errorf("%d throttled and %d archived, want 1 and 1", throttled, archived)
	}
	if more := drain(calls); len(more) > 0 {
		t.Errorf("%d more ErrorHandler calls, the first %v", len(more), more[0].err)
	}
	for _, want := range []string{`"msg":"task throttled"`, `"msg":"task archived"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the worker's own log has no %s:\n%s", want, logs.String())
		}
	}
}
