package worker_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// TestLateSendRestamped: a worker that stalls between the lines' admission
// of a task and its send (here in the OnDecision hook) for longer than
// half the margin (50 ms by default) moves the task's member in the
// provider's log to the time it leaves: its score is the stall's length
// or more after the admission. A stall longer than the window cannot be
// restamped: the task is not sent then, but comes back through the retry
// set and is sent once, at its next admission.
func TestLateSendRestamped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		stall     time.Duration
		decisions int // the task's arrivals at the lines
	}{{"within the window", 150 * time.Millisecond, 1}, {"past the window", 1200 * time.Millisecond, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb := redistest.Client(t)
			prefix := redistest.Prefix(t)
			t.Cleanup(func() { rdb.Del(context.Background(), redistest.Keys(t, rdb, prefix)...) })
			logKey, err := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)).RedisKey("rule/sms:send/provider")
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var decided []time.Time // the Redis clock as each decision is seen
			onDecision := func(worker.DecisionEvent) {
				now, err := rdb.Time(context.Background()).Result()
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				decided = append(decided, now)
				first := len(decided) == 1
				mu.Unlock()
				if first {
					time.Sleep(tc.stall)
				}
			}
			q, sent := startLateSendServer(t, rdb, prefix, onDecision)
			pc := producer.NewClientFromRedisClient(rdb)
			info, err := pc.EnqueueSMS(context.Background(), "acme", goodSMS, asynq.Queue(q))
			if err != nil {
				t.Fatal(err)
			}
			m := testwait.Receive(t, sent, "the SMS")
			members, err := rdb.ZRangeWithScores(context.Background(), logKey, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			select {
			case m := <-sent:
				t.Errorf("task %s sent twice", m.ID)
			case <-time.After(200 * time.Millisecond):
			}
			mu.Lock()
			defer mu.Unlock()
			if m.ID != info.ID || len(decided) != tc.decisions {
				t.Fatalf("sent %s after %d decisions, want %s after %d", m.ID, len(decided), info.ID, tc.decisions)
			}
			at := lastMemberScore(members, info.ID)
			// The last decision's admission came before the hook saw it.
			last := decided[len(decided)-1].UnixMicro()
			switch {
			case tc.decisions == 1 && at < float64(last+tc.stall.Microseconds()):
				t.Errorf("the task's member at %.0f, want the stall of %v or more after its admission (before %d)", at, tc.stall, last)
			case tc.decisions == 2 && at == 0:
				t.Errorf("no member of the task in the log: %v", members)
			}
		})
	}
}

// startLateSendServer runs a worker with the fair policies on its own queue,
// under prefix, whose decisions go to onDecision, and returns the queue and
// the SMS it sends.
func startLateSendServer(t *testing.T, rdb *redis.Client, prefix string, onDecision func(worker.DecisionEvent)) (q string, sent smsRecorder) {
	t.Helper()
	q = redistest.Queue(t, rdb)
	p, err := policies.Parse(t.Name(), []byte(fairPolicies))
	if err != nil {
		t.Fatal(err)
	}
	sent = make(smsRecorder, 10)
	srv, err := worker.NewServer(rdb, worker.Config{
		ThrottleConfig: worker.ThrottleConfig{DelayedTaskCheckInterval: serverCheckInterval, OnDecision: onDecision},
		Policies:       policies.Static(p), SMS: sent, Email: provider.LogProvider{},
		Queues: map[string]int{q: 1}, Prefix: prefix, ShutdownTimeout: 5 * time.Second, Concurrency: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, stop := testwait.RunServer(t, srv)
	t.Cleanup(stop)
	return q, sent
}

// lastMemberScore returns the latest score of task id's members in a
// provider's log, 0 when it has none.
func lastMemberScore(members []redis.Z, id string) float64 {
	var at float64
	for _, z := range members {
		if strings.HasSuffix(z.Member.(string), "-c"+id+"#1") {
			at = max(at, z.Score)
		}
	}
	return at
}
