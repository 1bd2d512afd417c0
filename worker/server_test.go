package worker_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/syncbuf"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/worker"
)

// smsRecorder is an SMSProvider that passes each message to a channel.
type smsRecorder chan provider.Message[producer.SMS]

func (r smsRecorder) SendSMS(_ context.Context, m provider.Message[producer.SMS]) error {
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
	p, err := policies.Parse(t.Name(), []byte(perHour))
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
		ThrottleConfig: worker.ThrottleConfig{
			MaxHold:                  -1,
			DelayedTaskCheckInterval: serverCheckInterval,
			Logger:                   logger,
		},
		Policies:        policies.Static(p),
		SMS:             sent,
		Email:           provider.LogProvider{},
		Queues:          map[string]int{q: 1},
		Prefix:          prefix,
		ShutdownTimeout: 5 * time.Second,
		ErrorHandler: asynq.ErrorHandlerFunc(func(_ context.Context, task *asynq.Task, err error) {
			calls <- handled{task.Headers()[producer.HeaderTenant], err, strings.Count(logs.String(), "\n")}
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := testwait.RunServer(t, srv)
	defer stop()

	enqueueThrottledAndArchived(t, ctx, rdb, q)

	if m := testwait.Receive(t, sent, "SMS"); m.Tenant != "acme" {
		t.Errorf("SMS for tenant %q, want acme", m.Tenant)
	}
	var throttled, archived int
	for i := range 2 {
		h := testwait.Receive(t, calls, "ErrorHandler call")
		if h.logged <= i {
			t.Errorf("Config.ErrorHandler called for %v before the worker logged it", h.err)
		}
		switch {
		case provider.IsThrottled(h.err) && h.tenant == "acme":
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
	if more := testwait.Drain(calls); len(more) > 0 {
		t.Errorf("%d more ErrorHandler calls, the first %v", len(more), more[0].err)
	}
	for _, want := range []string{`"msg":"task throttled"`, `"msg":"task archived"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the worker's own log has no %s:\n%s", want, logs.String())
		}
	}
}

// enqueueThrottledAndArchived enqueues on q two SMS for acme, of which
// perHour throttles the second, and a task of an unknown type for globex,
// which the worker archives.
func enqueueThrottledAndArchived(t *testing.T, ctx context.Context, rdb *redis.Client, q string) {
	t.Helper()
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
}

// TestNewServerRefuses: a server that could only archive a task type's
// tasks, or has nothing to enforce, is refused with an error that names
// what is missing.
func TestNewServerRefuses(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	p, err := policies.Parse(t.Name(), []byte(perHour))
	if err != nil {
		t.Fatal(err)
	}
	good := worker.Config{Policies: policies.Static(p), SMS: provider.LogProvider{}, Email: provider.LogProvider{}}
	cases := []struct {
		name   string
		change func(*worker.Config)
		want   string
	}{
		{"no provider", func(c *worker.Config) { c.SMS, c.Email = nil, nil }, "worker: no provider (Config.SMS, Config.Email): the worker would have nothing to send"},
		{"no SMS provider, queues named", func(c *worker.Config) { c.SMS, c.Queues = nil, map[string]int{"q": 1} },
			"worker: no SMS provider (Config.SMS), and Config.Queues names the queues: they may hold sms:send tasks, which the worker would archive unsent; leave Queues nil to serve only the queues of email:send"},
		{"no email provider, queues named", func(c *worker.Config) { c.Email, c.Queues = nil, map[string]int{"q": 1} },
			"worker: no email provider (Config.Email), and Config.Queues names the queues: they may hold email:send tasks, which the worker would archive unsent; leave Queues nil to serve only the queues of sms:send"},
		{"no policies", func(c *worker.Config) { c.Policies = nil }, "worker: no policies"},
		{"too many shards", func(c *worker.Config) { c.Shards = 300 },
			`worker: Config.Shards: layout "shards=300" is not shards=<N> with N a whole number from 1 to 256`},
		{"queues without every shard", func(c *worker.Config) {
			c.Shards, c.Queues = 2, map[string]int{layout.ShardName("sms:send", 0, 2): 1, "default": 1}
		},
			"worker: the queues leave out " + strings.Join(slices.Sorted(slices.Values([]string{layout.ShardName("email:send", 0, 2),
				layout.ShardName("email:send", 1, 2), layout.ShardName("sms:send", 1, 2)})), ", ") +
				", where producers put the tasks of layout shards=2: serve them too, or leave the queues to the worker"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := good
			tc.change(&cfg)
			srv, err := worker.NewServer(rdb, cfg)
			if err == nil || err.Error() != tc.want {
				t.Errorf("NewServer = %v, %v; want the error %q", srv, err, tc.want)
			}
		})
	}
}

// TestServerQueues: a Server given no queues serves those of the types it
// has a provider for, and default (Sluice 0.x's) with both.
func TestServerQueues(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	p, err := policies.Parse(t.Name(), []byte(perHour))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		sms   provider.SMSProvider
		email provider.EmailProvider
		want  []string
	}{
		{provider.LogProvider{}, provider.LogProvider{}, []string{"default", "email:send", "sms:send"}},
		{provider.LogProvider{}, nil, []string{"sms:send"}},
		{nil, provider.LogProvider{}, []string{"email:send"}},
	}
	for _, tc := range cases {
		srv, err := worker.NewServer(rdb, worker.Config{Policies: policies.Static(p), SMS: tc.sms, Email: tc.email})
		if err != nil {
			t.Fatal(err)
		}
		if got := srv.Queues(); !slices.Equal(got, tc.want) {
			t.Errorf("queues %v, want %v", got, tc.want)
		}
	}
	// Sluice 0.1's queues, default alone: a warning for each type's queue.
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	_, err = worker.NewServer(rdb, worker.Config{Policies: policies.Static(p), SMS: provider.LogProvider{}, Email: provider.LogProvider{},
		Queues: map[string]int{"default": 1}, ThrottleConfig: worker.ThrottleConfig{Logger: logger}})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "the queues name default but not a task type's queue"); n != 2 ||
		!strings.Contains(logs.String(), "queue=sms:send") || !strings.Contains(logs.String(), "queue=email:send") {
		t.Errorf("logs %q: want a warning for sms:send and one for email:send", logs.String())
	}
}

// TestServerUnthrottled: Unthrottled lists the task types the server
// handles that the policies in force leave unthrottled, after a reload too.
func TestServerUnthrottled(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	both := perHour + "  email:send:\n    - {name: per-day, scope: tenant, limit: 1, window: 24h}\n"
	path := filepath.Join(t.TempDir(), "policies.yaml")
	steps := []struct {
		name     string
		policies string
		want     []string
	}{
		{"email unthrottled", perHour, []string{"email:send"}},
		{"both throttled", both, nil},
		{"nothing throttled", "tasks: {}\n", []string{"email:send", "sms:send"}},
		{"email in shadow mode only", perHour + "  email:send:\n    - {name: per-day, scope: tenant, mode: shadow, limit: 1, window: 24h}\n", []string{"email:send"}},
		{"email with a shadow rule and an enforced one", both + "    - {name: trial, scope: tenant, mode: shadow, limit: 1, window: 1h}\n", nil},
	}
	if err := os.WriteFile(path, []byte(steps[0].policies), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := policies.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := worker.NewServer(rdb, worker.Config{Policies: f, SMS: provider.LogProvider{}, Email: provider.LogProvider{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range steps {
		if err := os.WriteFile(path, []byte(step.policies), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := f.Reload(); err != nil {
			t.Fatal(err)
		}
		if got := srv.Unthrottled(); !slices.Equal(got, step.want) {
			t.Errorf("%s: Unthrottled() = %q, want %q", step.name, got, step.want)
		}
	}
}
