package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/syncbuf"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/worker"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// serverCheckInterval is the DelayedTaskCheckInterval of the test servers.
const serverCheckInterval = 100 * time.Millisecond

// call is one task that reached a recorder, with what its asynq context
// said.
type call struct {
	ID       string
	Retried  int
	MaxRetry int
	Type     string
	Tenant   string
	Payload  string
	At       time.Time
}

// recorder is an asynq handler that records every task it runs and returns
// what result says (nil when result is nil).
type recorder struct {
	calls  chan call
	result func(call) error
}

func newRecorder(result func(call) error) *recorder {
	return &recorder{calls: make(chan call, 100), result: result}
}

func (r *recorder) ProcessTask(ctx context.Context, task *asynq.Task) error {
	id, _ := asynq.GetTaskID(ctx)
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	c := call{
		ID: id, Retried: retried, MaxRetry: maxRetry, Type: task.Type(),
		Tenant: task.Headers()[producer.HeaderTenant], Payload: string(task.Payload()), At: time.Now(),
	}
	r.calls <- c
	if r.result == nil {
		return nil
	}
	return r.result(c)
}

// failure is one call of a server's ErrorHandler.
type failure struct {
	ID      string
	Retried int
	Type    string
	Err     error
}

// server is a real asynq server on the test Redis, configured as the README
// tells users of the middleware to configure theirs, that fetches only from
// a queue of its own.
type server struct {
	rdb       *redis.Client
	queue     string
	client    *asynq.Client
	inspector *asynq.Inspector
	failures  chan failure    // every ErrorHandler call
	logs      *syncbuf.Buffer // what worker.ErrorHandler logged, as JSON lines
	asynqLogs *syncbuf.Buffer // what asynq itself logged, shown when the test fails
	srv       *asynq.Server
	stopOnce  sync.Once
}

// startServer starts a server that runs h, and shuts it down when the test
// ends.
func startServer(t *testing.T, rdb *redis.Client, h asynq.Handler) *server {
	t.Helper()
	s := &server{
		rdb:       rdb,
		queue:     redistest.Queue(t, rdb),
		client:    asynq.NewClientFromRedisClient(rdb),
		inspector: asynq.NewInspectorFromRedisClient(rdb),
		failures:  make(chan failure, 100),
		logs:      &syncbuf.Buffer{},
		asynqLogs: &syncbuf.Buffer{},
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker.ErrorHandler logs:\n%s\nasynq logs:\n%s", s.logs, s.asynqLogs)
		}
	})
	logger := slog.New(slog.NewJSONHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	errorHandler := worker.ErrorHandler(logger)
	s.srv = asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:              4,
		Queues:                   map[string]int{s.queue: 1},
		TaskCheckInterval:        50 * time.Millisecond,
		DelayedTaskCheckInterval: serverCheckInterval,
		ShutdownTimeout:          5 * time.Second,
		IsFailure:                worker.IsFailure,
		RetryDelayFunc:           worker.RetryDelay(nil),
		ErrorHandler: asynq.ErrorHandlerFunc(func(ctx context.Context, task *asynq.Task, err error) {
			id, _ := asynq.GetTaskID(ctx)
			retried, _ := asynq.GetRetryCount(ctx)
			s.failures <- failure{ID: id, Retried: retried, Type: task.Type(), Err: err}
			errorHandler.HandleError(ctx, task, err)
		}),
		Logger:   bufferLogger{s.asynqLogs},
		LogLevel: asynq.InfoLevel,
	})
	if err := s.srv.Start(h); err != nil {
		t.Fatalf("start asynq server: %v", err)
	}
	t.Cleanup(s.stop)
	return s
}

// stop shuts the server down and waits for it: afterwards no handler runs,
// and the state of every task in Redis is final. It may be called more than
// once.
func (s *server) stop() { s.stopOnce.Do(s.srv.Shutdown) }

// enqueue enqueues task on the server's queue.
func (s *server) enqueue(t *testing.T, task *asynq.Task, opts ...asynq.Option) *asynq.TaskInfo {
	t.Helper()
	info, err := s.client.Enqueue(task, append(opts, asynq.Queue(s.queue))...)
	if err != nil {
		t.Fatalf("enqueue %s: %v", task.Type(), err)
	}
	return info
}

// info reads a task back from Redis.
func (s *server) info(t *testing.T, id string) *asynq.TaskInfo {
	t.Helper()
	info, err := s.inspector.GetTaskInfo(s.queue, id)
	if err != nil {
		t.Fatalf("GetTaskInfo(%s, %s): %v", s.queue, id, err)
	}
	return info
}

// archived returns the archived tasks of the server's queue.
func (s *server) archived(t *testing.T) []*asynq.TaskInfo {
	t.Helper()
	tasks, err := s.inspector.ListArchivedTasks(s.queue)
	if err != nil {
		t.Fatalf("ListArchivedTasks(%s): %v", s.queue, err)
	}
	return tasks
}

// queueInfo returns the statistics of the server's queue.
func (s *server) queueInfo(t *testing.T) *asynq.QueueInfo {
	t.Helper()
	qi, err := s.inspector.GetQueueInfo(s.queue)
	if err != nil {
		t.Fatalf("GetQueueInfo(%s): %v", s.queue, err)
	}
	return qi
}

// retries returns the tasks in the retry set of the server's queue.
func (s *server) retries(t *testing.T) []*asynq.TaskInfo {
	t.Helper()
	tasks, err := s.inspector.ListRetryTasks(s.queue)
	if err != nil {
		t.Fatalf("ListRetryTasks(%s): %v", s.queue, err)
	}
	return tasks
}

// smsTask returns an sms:send task for tenant built by the producer.
func smsTask(t *testing.T, tenant string, opts ...asynq.Option) *asynq.Task {
	t.Helper()
	task, err := producer.NewSMSTask(tenant, goodSMS, opts...)
	if err != nil {
		t.Fatalf("NewSMSTask(%q): %v", tenant, err)
	}
	return task
}

var (
	goodSMS   = producer.SMS{To: "+15551234567", Body: "Your code is 123456"}
	goodEmail = producer.Email{To: "ada@example.com", Subject: "Welcome", Body: "Hello Ada", From: "team@example.com"}
)

// bufferLogger is an asynq.Logger that writes to a buffer.
type bufferLogger struct{ b *syncbuf.Buffer }

func (l bufferLogger) log(level string, args ...any) {
	fmt.Fprintf(l.b, "%s %s: %s\n", time.Now().Format("15:04:05.000"), level, fmt.Sprint(args...))
}
func (l bufferLogger) Debug(args ...any) { l.log("DEBUG", args...) }
func (l bufferLogger) Info(args ...any)  { l.log("INFO", args...) }
func (l bufferLogger) Warn(args ...any)  { l.log("WARN", args...) }
func (l bufferLogger) Error(args ...any) { l.log("ERROR", args...) }
func (l bufferLogger) Fatal(args ...any) { l.log("FATAL", args...) }
