package worker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/worker"
)

// eventLog is what the observers of a test server were told, in order,
// one line an event.
type eventLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *eventLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// namedObserver is a worker.Observer that writes what it is told to log.
type namedObserver struct {
	name string
	log  *eventLog
}

func (o namedObserver) ObserveDecision(e worker.DecisionEvent) {
	o.log.add("%s: decision %s %s allowed=%v", o.name, e.TaskType, e.Tenant, e.Decision.Allowed)
}

func (o namedObserver) ObserveProvider(e worker.ProviderEvent) {
	o.log.add("%s: provider %s %s id=%v err=%v", o.name, e.Provider, e.Tenant, e.TaskID != "", e.Err)
}

func (o namedObserver) ObserveThrottled(e worker.ThrottledEvent) {
	o.log.add("%s: throttled %s id=%v throttled=%v", o.name, e.TaskType, e.TaskID != "", provider.IsThrottled(e.Err))
}

// TestServerObservers: each of Config.Observers is told, in order, of
// each decision, each provider's answer and each throttled return, before
// Config.OnDecision and Config.ErrorHandler.
func TestServerObservers(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() { rdb.Del(context.Background(), redistest.Keys(t, rdb, prefix)...) })
	q := redistest.Queue(t, rdb)
	p, err := policies.Parse(t.Name(), []byte(perHour))
	if err != nil {
		t.Fatal(err)
	}
	var log eventLog
	srv, err := worker.NewServer(rdb, worker.Config{
		ThrottleConfig: worker.ThrottleConfig{
			MaxHold:                  -1,
			DelayedTaskCheckInterval: serverCheckInterval,
			OnDecision:               func(e worker.DecisionEvent) { log.add("OnDecision") },
		},
		Policies:        policies.Static(p),
		SMS:             make(smsRecorder, 10),
		Email:           provider.LogProvider{},
		Queues:          map[string]int{q: 1},
		Prefix:          prefix,
		Concurrency:     1, // one task at a time: the events come in one order
		ShutdownTimeout: 5 * time.Second,
		ErrorHandler: asynq.ErrorHandlerFunc(func(context.Context, *asynq.Task, error) {
			log.add("ErrorHandler")
		}),
		Observers: []worker.Observer{namedObserver{"first", &log}, namedObserver{"second", &log}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := testwait.RunServer(t, srv)
	defer stop()
	pc := producer.NewClientFromRedisClient(rdb)
	for range 2 { // per-hour allows one: the second is throttled
		if _, err := pc.EnqueueSMS(ctx, "acme", goodSMS, asynq.Queue(q)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"first: decision sms:send acme allowed=true",
		"second: decision sms:send acme allowed=true",
		"OnDecision",
		"first: provider sms acme id=true err=<nil>",
		"second: provider sms acme id=true err=<nil>",
		"first: decision sms:send acme allowed=false",
		"second: decision sms:send acme allowed=false",
		"OnDecision",
		"first: throttled sms:send id=true throttled=true",
		"second: throttled sms:send id=true throttled=true",
		"ErrorHandler",
	}
	testwait.Eventually(t, func() (bool, string) {
		got := log.get()
		return len(got) >= len(want), fmt.Sprintf("%d events, want %d", len(got), len(want))
	})
	if diff := cmp.Diff(want, log.get()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
