package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/producer"
)

// A newcomer joins every drain: a third of the way through the ideal
// drain, a tenant with nothing waiting enqueues newcomerTasks SMS, and
// the drain measures how long each waited from its enqueue to the
// provider, and how many of the backlog's tasks reached the provider
// between that enqueue and the newcomer's last arrival. Served first come,
// first served, it waits behind what is queued; served fairly, for a slot.
const (
	newcomerTenant = "newcomer"
	newcomerTasks  = 3
)

// newcomerAt is when, from the start, the newcomer enqueues its tasks.
func newcomerAt(p *drainPlan) time.Duration { return p.ideal.drain / 3 }

// NewcomerResult is what a drain measured of the newcomer.
type NewcomerResult struct {
	AtSeconds float64   `json:"at_seconds"` // its enqueue, from the start
	WaitsMs   []float64 `json:"waits_ms"`   // each task's, enqueue to arrival; missing when not delivered
	MaxWaitMs float64   `json:"max_wait_ms"`
	// BacklogAhead counts the backlog's arrivals between the enqueue and
	// the newcomer's last arrival.
	BacklogAhead int `json:"backlog_ahead"`
}

// enqueueNewcomer enqueues the newcomer's tasks on queue and returns when
// it did.
func enqueueNewcomer(ctx context.Context, rdb *redis.Client, queue string) (time.Time, error) {
	pc := producer.NewClientFromRedisClient(rdb)
	defer pc.Close()
	at := time.Now()
	for i := range newcomerTasks {
		task, err := producer.NewSMSTask(newcomerTenant, producer.SMS{To: fmt.Sprintf("+1666%07d", i), Body: "Your code is 5678"})
		if err != nil {
			return at, err
		}
		if _, err := pc.Enqueue(ctx, task, asynq.Queue(queue), asynq.TaskID(fmt.Sprintf("%s-%d", newcomerTenant, i))); err != nil {
			return at, fmt.Errorf("enqueue the newcomer's task %d: %w", i, err)
		}
	}
	return at, nil
}

// newcomerResult measures the newcomer enqueued at `at` in receipts.
func newcomerResult(start, at time.Time, receipts []sink.Receipt) *NewcomerResult {
	nr := &NewcomerResult{AtSeconds: at.Sub(start).Seconds()}
	var last time.Time
	seen := map[string]bool{}
	for _, r := range receipts {
		if r.Tenant != newcomerTenant || seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		nr.WaitsMs = append(nr.WaitsMs, float64(r.At.Sub(at))/float64(time.Millisecond))
		if r.At.After(last) {
			last = r.At
		}
	}
	if len(nr.WaitsMs) > 0 {
		nr.MaxWaitMs = slices.Max(nr.WaitsMs)
	}
	for _, r := range receipts {
		if r.Tenant != newcomerTenant && r.At.After(at) && r.At.Before(last) {
			nr.BacklogAhead++
		}
	}
	return nr
}
