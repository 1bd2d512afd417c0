package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/worker"
)

// fairPolicies share a provider's 10 a second among tenants.
const fairPolicies = `
tasks:
  sms:send:
    - name: provider
      scope: global
      limit: 10
      window: 1s
`

// runFairServer starts a worker with the fair lines (the default) on a
// queue of its own, running concurrency tasks at once, whose SMS go to
// sent; it returns a producer that parks tasks at enqueue in the worker's
// lines, and the queue.
func runFairServer(t *testing.T, sent smsRecorder, cfg worker.ThrottleConfig, concurrency int) (*producer.Client, string) {
	t.Helper()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() { rdb.Del(context.Background(), redistest.Keys(t, rdb, prefix)...) })
	q := redistest.Queue(t, rdb)
	p, err := policies.Parse(t.Name(), []byte(fairPolicies))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DelayedTaskCheckInterval = serverCheckInterval
	srv, err := worker.NewServer(rdb, worker.Config{
		ThrottleConfig: cfg, Policies: policies.Static(p), SMS: sent, Email: provider.LogProvider{},
		Queues: map[string]int{q: 1}, Prefix: prefix, ShutdownTimeout: 5 * time.Second, Concurrency: concurrency,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, stop := testwait.RunServer(t, srv)
	t.Cleanup(stop)
	return producer.NewClientFromRedisClient(rdb, producer.WithPrefix(prefix)), q
}

// TestFairNewcomer: a tenant that enqueues 3 SMS while another's backlog of
// 60 waits, in the same queue ahead of it, is served at once: its last
// send comes within a few of the backlog's. First come, first served, the
// same run sends the backlog first, which shows that the count can fail.
func TestFairNewcomer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		fairness worker.Fairness
	}{{"fair", worker.FairnessOn}, {"first come first served", worker.FairnessOff}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sent := make(smsRecorder, 100)
			pc, q := runFairServer(t, sent, worker.ThrottleConfig{Fairness: tc.fairness}, 10)
			ctx := context.Background()
			for range 60 {
				if _, err := pc.EnqueueSMS(ctx, "acme", goodSMS, asynq.Queue(q)); err != nil {
					t.Fatal(err)
				}
			}
			// Once acme's first window has been sent, the newcomer comes.
			rec := &sendOrder{t: t, sent: sent, ids: map[string]bool{}}
			receive := rec.receive
			for range 12 {
				receive("an SMS of the backlog")
			}
			for range 3 {
				if _, err := pc.EnqueueSMS(ctx, "initech", goodSMS, asynq.Queue(q)); err != nil {
					t.Fatal(err)
				}
			}
			before := len(rec.order)
			for len(rec.order) < 63 {
				receive("the next SMS")
			}
			last := before
			for i := before; i < len(rec.order); i++ {
				if rec.order[i] == "initech" {
					last = i
				}
			}
			ahead := 0 // the backlog's sends before the newcomer's last
			for _, tenant := range rec.order[before:last] {
				if tenant == "acme" {
					ahead++
				}
			}
			t.Logf("%d of acme's sends before initech's last", ahead)
			switch {
			case tc.fairness == worker.FairnessOn && ahead > 6:
				t.Errorf("fair: %d of the backlog's sends came before the newcomer's last, want at most 6 (order %v)", ahead, rec.order[before:])
			case tc.fairness == worker.FairnessOff && ahead < 20:
				t.Errorf("first come first served: only %d of the backlog's sends before the newcomer's last", ahead)
			}
		})
	}
}

// TestFairResetWakesTheLines: a tenant's SMS parked behind its own rule of
// 1 an hour is sent once an admin reset, from another client, empties the
// tenant's window, although the worker's dispatch loop sleeps an hour
// between looks: the reset wakes it (Lines.Wakeups).
func TestFairResetWakesTheLines(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() { rdb.Del(context.Background(), redistest.Keys(t, rdb, prefix)...) })
	q := redistest.Queue(t, rdb)
	p, err := policies.Parse(t.Name(), []byte(`
tasks:
  sms:send:
    - {name: hourly, scope: tenant, limit: 1, window: 1h}
`))
	if err != nil {
		t.Fatal(err)
	}
	sent := make(smsRecorder, 10)
	srv, err := worker.NewServer(rdb, worker.Config{
		ThrottleConfig: worker.ThrottleConfig{DelayedTaskCheckInterval: serverCheckInterval},
		Policies:       policies.Static(p), SMS: sent, Email: provider.LogProvider{},
		Queues: map[string]int{q: 1}, Prefix: prefix, ShutdownTimeout: 5 * time.Second, Concurrency: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	worker.SetLineIdle(srv, time.Hour)
	ctx, stop := testwait.RunServer(t, srv)
	t.Cleanup(stop)
	pc := producer.NewClientFromRedisClient(rdb)
	for range 2 {
		if _, err := pc.EnqueueSMS(ctx, "acme", goodSMS, asynq.Queue(q)); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Receive(t, sent, "the first SMS")
	testwait.Eventually(t, func() (bool, string) {
		flows, err := srv.Lines().Waiting(ctx, 10)
		return err == nil && len(flows) == 1 && flows[0].InLine == 1, fmt.Sprintf("waiting %+v (%v)", flows, err)
	})
	admin := redistest.Client(t) // another client, as the admin CLI is
	if _, _, err := policies.ResetTenant(ctx, admin, prefix, p, "sms:send", "", "acme"); err != nil {
		t.Fatal(err)
	}
	testwait.Receive(t, sent, "the second SMS, after the reset")
	if extra := testwait.Drain(sent); len(extra) > 0 {
		t.Errorf("%d more SMS sent than enqueued", len(extra))
	}
}

// TestParkedAtEnqueue: while acme's SMS wait in the lines, 2,000 more of
// them are put on the pending list by a producer that does not park, and
// then a newcomer enqueues one. Parked at enqueue, the newcomer's SMS
// overtakes that list: it is sent while the worker (one task at a time)
// still has most of it to take in. Put on the pending list too, the same
// run sends it only once the list ahead of it is taken in, after many of
// the backlog's sends, which shows that the checks can fail.
func TestParkedAtEnqueue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		park bool
	}{{"parked at enqueue", true}, {"on the pending list", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const backlog = 2000
			sent := make(smsRecorder, backlog+20)
			pc, q := runFairServer(t, sent, worker.ThrottleConfig{}, 1)
			ctx := context.Background()
			rdb := redistest.Client(t)
			plain := producer.NewClientFromRedisClient(rdb, producer.WithoutParking())
			for range 12 {
				if _, err := plain.EnqueueSMS(ctx, "acme", goodSMS, asynq.Queue(q)); err != nil {
					t.Fatal(err)
				}
			}
			rec := &sendOrder{t: t, sent: sent, ids: map[string]bool{}}
			receive := rec.receive
			// Once acme's first window is sent, the rest wait in its line.
			for range 10 {
				receive("an SMS of acme's first window")
			}
			for range backlog {
				if _, err := plain.EnqueueSMS(ctx, "acme", goodSMS, asynq.Queue(q)); err != nil {
					t.Fatal(err)
				}
			}
			newcomer := plain
			if tc.park {
				newcomer = pc
			}
			// The list as the newcomer comes: the worker takes it in
			// meanwhile, as fast as the backlog is enqueued.
			pending := "asynq:{" + q + "}:pending"
			then := rdb.LLen(ctx, pending).Val()
			if _, err := newcomer.EnqueueSMS(ctx, "initech", goodSMS, asynq.Queue(q)); err != nil {
				t.Fatal(err)
			}
			before := len(rec.order)
			for rec.order[len(rec.order)-1] != "initech" {
				receive("the newcomer's SMS, or the backlog's before it")
			}
			// Read as the newcomer's SMS is received: the list only shrinks,
			// but for a task granted and moved to its front.
			left := rdb.LLen(ctx, pending).Val()
			ahead := len(rec.order) - 1 - before
			t.Logf("%d of acme's sends before initech's; %d tasks on the pending list as it came, %d as it was sent", ahead, then, left)
			switch {
			case then < backlog/10:
				t.Fatalf("only %d of the %d tasks were on the pending list as the newcomer came: the test shows nothing", then, backlog)
			case tc.park && left < then/2:
				t.Errorf("parked at enqueue: %d of the %d tasks on the pending list as the newcomer came were left when its SMS was sent, want at least half: it waited for the list", left, then)
			case !tc.park && (left > 10 || ahead < 10):
				t.Errorf("on the pending list: the newcomer's SMS was sent with %d tasks left on the list and %d of the backlog's sends before it", left, ahead)
			}
		})
	}
}

// sendOrder records the tenants of the SMS sent, in order of arrival, and
// fails t on a task sent twice.
type sendOrder struct {
	t     *testing.T
	sent  smsRecorder
	ids   map[string]bool
	order []string
}

// receive waits for the next SMS sent, what naming it in a timeout.
func (o *sendOrder) receive(what string) {
	o.t.Helper()
	m := testwait.Receive(o.t, o.sent, what)
	if o.ids[m.ID] {
		o.t.Errorf("task %s sent twice", m.ID)
	}
	o.ids[m.ID] = true
	o.order = append(o.order, m.Tenant)
}
