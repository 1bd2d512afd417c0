package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/producer"
)

// The late tenant: one SMS of a tenant with nothing waiting, enqueued once
// a third of the others' SMS are sent, while the rest of them wait. The
// fair lines owe it the provider's next slot, so it is sent within about a
// slot of the provider's rule (window ÷ limit) plus the fetch interval,
// not after the others' backlog; the summary says how long it waited.
const (
	lateTenant = "umbrella"
	// lateFrom is the fewest tasks of a run with a late tenant: it takes
	// one of them.
	lateFrom = 10
)

// late is the late tenant of a run, and what became of its SMS.
type late struct {
	tenant  string
	after   int       // it is enqueued once this many of the others' are sent
	id      string    // its task, once enqueued
	at      time.Time // when it was enqueued
	waiting int       // the others' tasks not sent then
}

// newLate returns the late tenant of a run of tasks SMS, nil when it has
// none.
func newLate(tasks int) *late {
	if tasks < lateFrom {
		return nil
	}
	return &late{tenant: lateTenant, after: (tasks - 1) / 3}
}

// due reports whether the late SMS is to be enqueued now: sent of the
// others' are sent.
func (l *late) due(sent int) bool { return l != nil && l.id == "" && sent >= l.after }

// enqueueLate enqueues the late SMS, adds it to want, and notes when and
// behind how many of the others' SMS.
func (r *runner) enqueueLate(ctx context.Context, want map[string]string, sent int) error {
	pc := producer.NewClientFromRedisClient(r.broker.rdb, producer.WithPrefix(r.prefix))
	defer pc.Close()
	m := producer.SMS{To: "+15559999999", Body: "Sluice demo message for " + r.late.tenant + ", a late tenant"}
	info, err := pc.EnqueueSMS(ctx, r.late.tenant, m, asynq.Queue(r.queue))
	if err != nil {
		return fmt.Errorf("enqueue the late tenant's SMS: %w", err)
	}
	r.late.id, r.late.at, r.late.waiting = info.ID, time.Now(), len(want)-sent
	want[info.ID] = r.late.tenant
	return nil
}

// line is the summary's line of the late tenant: how long its SMS waited
// from its enqueue to the provider, and how many of the others' reached the
// provider meanwhile. "" when the run had none, or ended before it was
// enqueued.
func (l *late) line(got []receipt) string {
	if l == nil || l.id == "" {
		return ""
	}
	behind := 0 // the others' sent after it was enqueued, before it
	for _, rc := range got {
		if rc.ID == l.id {
			return fmt.Sprintf("late tenant: %s's SMS, enqueued while %d of the others' waited, was sent %s after it, behind %d of them",
				l.tenant, l.waiting, seconds(rc.At.Sub(l.at)), behind)
		}
		if rc.At.After(l.at) {
			behind++
		}
	}
	return fmt.Sprintf("late tenant: %s's SMS, enqueued while %d of the others' waited, was not sent", l.tenant, l.waiting)
}
