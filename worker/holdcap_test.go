package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

// TestProviderHoldCapped: a webhook that answers 429 with a Retry-After of
// 30,000,000 s (347 days), or of more than a year, holds the type's sends
// for MaxProviderHold (the default, 10 minutes), not for the year nor for
// the 1 s of a Retry-After it could not read: the hold's time to live and
// the task's return are both within it. One WARN line gives the provider's
// value (cut to a year) and the cap.
func TestProviderHoldCapped(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, retryAfter, logged string
	}{
		{"347 days", "30000000", "8333h20m0s"},
		{"more than a year", "40000000", "8760h0m0s"},
		{"beyond int64", "99999999999999999999", "8760h0m0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testProviderHoldCapped(t, tc.retryAfter, tc.logged)
		})
	}
}

// testProviderHoldCapped runs one case of TestProviderHoldCapped: the
// provider answers Retry-After: retryAfter, and the WARN line gives logged.
func testProviderHoldCapped(t *testing.T, retryAfter, logged string) {
	var calls atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", retryAfter)
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(hook.Close)
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() { rdb.Del(context.Background(), redistest.Keys(t, rdb, prefix)...) })
	q := redistest.Queue(t, rdb)
	p, err := policies.Parse(t.Name(), []byte(fairPolicies))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	srv, err := worker.NewServer(rdb, worker.Config{
		ThrottleConfig: worker.ThrottleConfig{DelayedTaskCheckInterval: serverCheckInterval, Logger: slog.New(slog.NewJSONHandler(logs, nil))},
		Policies:       policies.Static(p), SMS: &provider.Webhook{URL: hook.URL}, Email: provider.LogProvider{},
		Queues: map[string]int{q: 1}, Prefix: prefix, ShutdownTimeout: 5 * time.Second, Concurrency: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, stop := testwait.RunServer(t, srv)
	t.Cleanup(stop)
	ctx := context.Background()
	info, err := producer.NewClientFromRedisClient(rdb).EnqueueSMS(ctx, "acme", goodSMS, asynq.Queue(q))
	if err != nil {
		t.Fatal(err)
	}
	enqueued := time.Now()
	ins := asynq.NewInspectorFromRedisClient(rdb)
	var back time.Time
	testwait.Eventually(t, func() (bool, string) {
		ti, err := ins.GetTaskInfo(q, info.ID)
		if err != nil {
			return false, err.Error()
		}
		back = ti.NextProcessAt
		return ti.State == asynq.TaskStateRetry, fmt.Sprintf("task %s, want it in the retry set", ti.State)
	})
	held, err := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix)).HeldFor(ctx, "provider/"+producer.TypeSMS)
	if err != nil {
		t.Fatal(err)
	}
	if held <= 9*time.Minute || held > worker.DefaultMaxProviderHold {
		t.Errorf("held for %v after a Retry-After of %s s, want about %v", held, retryAfter, worker.DefaultMaxProviderHold)
	}
	if most := enqueued.Add(worker.DefaultMaxProviderHold + 2*time.Second); back.After(most) {
		t.Errorf("the task comes back at %v, later than the cap allows (%v)", back, most)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d calls to the provider, want 1", n)
	}
	warn := `"level":"WARN","msg":"a provider asked to hold sends longer than --max-provider-hold; holding them that long"`
	if !strings.Contains(logs.String(), warn) || !strings.Contains(logs.String(), `"retry_after":"`+logged+`"`) ||
		!strings.Contains(logs.String(), `"max_provider_hold":"10m0s"`) {
		t.Errorf("no WARN line with the provider's value and the cap:\n%s", logs)
	}
}
