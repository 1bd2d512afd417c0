package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
)

// Two joiners join every drain, each with joinTasks SMS, and the drain
// measures how long each SMS waited from its enqueue to the provider, and
// how many of the other tasks reached the provider between that enqueue
// and the joiner's last arrival:
//   - the newcomer, a third of the way through the ideal drain: a tenant
//     with nothing waiting. Served first come, first served, it waits
//     behind what is queued; served fairly, for a slot.
//   - the urgent tasks, half way through: SMS of priority 1 of the tenant
//     with the largest backlog. Served by priority, they take the next
//     free slot, ahead of the places of less urgent tasks.
//
// Each is told apart by the prefix of its task IDs.
type joiner struct {
	prefix   string
	tenant   func(p *drainPlan) string
	priority int                              // 0: the default
	at       func(p *drainPlan) time.Duration // its enqueue, from the start
}

const (
	newcomerTenant = "newcomer"
	joinTasks      = 3
)

var joiners = []joiner{{
	prefix: "newcomer-", tenant: func(*drainPlan) string { return newcomerTenant },
	at: func(p *drainPlan) time.Duration { return p.ideal.drain / 3 },
}, {
	prefix: "urgent-", tenant: func(p *drainPlan) string { return p.tenantNames[0] }, priority: throttle.MostUrgent,
	at: func(p *drainPlan) time.Duration { return p.ideal.drain / 2 },
}}

// JoinResult is what a drain measured of a joiner.
type JoinResult struct {
	AtSeconds float64   `json:"at_seconds"` // its enqueue, from the start
	WaitsMs   []float64 `json:"waits_ms"`   // each task's, enqueue to arrival; missing when not delivered
	MaxWaitMs float64   `json:"max_wait_ms"`
	// BacklogAhead counts the other tasks' arrivals between the enqueue
	// and the joiner's last arrival.
	BacklogAhead int `json:"backlog_ahead"`
}

// enqueue enqueues the joiner's tasks of plan on queue and returns when it
// did.
func (j joiner) enqueue(ctx context.Context, rdb *redis.Client, plan *drainPlan, queue string) (time.Time, error) {
	pc := producer.NewClientFromRedisClient(rdb)
	defer pc.Close()
	at := time.Now()
	var opts []asynq.Option
	if j.priority != 0 {
		opts = append(opts, producer.Priority(j.priority))
	}
	for i := range joinTasks {
		task, err := producer.NewSMSTask(j.tenant(plan), producer.SMS{To: fmt.Sprintf("+1666%07d", i), Body: "Your code is 5678"}, opts...)
		if err != nil {
			return at, err
		}
		if _, err := pc.Enqueue(ctx, task, asynq.Queue(queue), asynq.TaskID(fmt.Sprintf("%s%d", j.prefix, i))); err != nil {
			return at, fmt.Errorf("enqueue the joiner's task %s%d: %w", j.prefix, i, err)
		}
	}
	return at, nil
}

// result measures the joiner enqueued at `at` in receipts.
func (j joiner) result(start, at time.Time, receipts []sink.Receipt) *JoinResult {
	jr := &JoinResult{AtSeconds: at.Sub(start).Seconds()}
	var last time.Time
	seen := map[string]bool{}
	for _, r := range receipts {
		if !strings.HasPrefix(r.ID, j.prefix) || seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		jr.WaitsMs = append(jr.WaitsMs, float64(r.At.Sub(at))/float64(time.Millisecond))
		if r.At.After(last) {
			last = r.At
		}
	}
	if len(jr.WaitsMs) > 0 {
		jr.MaxWaitMs = slices.Max(jr.WaitsMs)
	}
	for _, r := range receipts {
		if !strings.HasPrefix(r.ID, j.prefix) && r.At.After(at) && r.At.Before(last) {
			jr.BacklogAhead++
		}
	}
	return jr
}
