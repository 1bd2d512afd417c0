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

// Joiners join every drain, and the drain measures how long each of their
// SMS waited from its enqueue to the provider, and how many of the other
// tasks reached the provider between that enqueue and the joiner's first
// arrival:
//   - newcomers, joinCount of them spread over the ideal drain: each a
//     tenant with nothing waiting, with joinTasks SMS. Served first come,
//     first served, it waits behind what is queued; served fairly, its
//     first SMS waits for a slot.
//   - urgent SMS, joinCount of them between the newcomers: one SMS each,
//     of priority 1, of the tenant with the largest backlog. Served by
//     priority, each takes the next free slot, ahead of the places of less
//     urgent tasks.
//
// Each is told apart by the prefix of its task IDs. The bound of the
// fairness issue applies to a newcomer's first SMS and to each urgent one
// (newcomerBoundMs).
type joiner struct {
	kind     string // "newcomer" or "urgent"
	prefix   string
	tasks    int
	tenant   func(p *drainPlan) string
	priority int                              // 0: the default
	at       func(p *drainPlan) time.Duration // its enqueue, from the start
}

const (
	joinTasks = 3
	joinCount = 10 // newcomers, and as many urgent SMS, per drain
)

// joiners are the newcomers at 5%, 15%, ... 95% of the ideal drain, and the
// urgent SMS at 10%, 20%, ... 100%.
var joiners = func() []joiner {
	var js []joiner
	for i := range joinCount {
		tenant := fmt.Sprintf("newcomer%d", i)
		newcomerAt, urgentAt := (2*float64(i)+1)/(2*joinCount), float64(i+1)/joinCount
		js = append(js, joiner{kind: "newcomer", prefix: tenant + "-", tasks: joinTasks,
			tenant: func(*drainPlan) string { return tenant },
			at:     func(p *drainPlan) time.Duration { return time.Duration(float64(p.ideal.drain) * newcomerAt) },
		}, joiner{kind: "urgent", prefix: fmt.Sprintf("urgent%d-", i), tasks: 1, priority: throttle.MostUrgent,
			tenant: func(p *drainPlan) string { return p.tenantNames[0] },
			at:     func(p *drainPlan) time.Duration { return time.Duration(float64(p.ideal.drain) * urgentAt) },
		})
	}
	return js
}()

// JoinResult is what a drain measured of a joiner.
type JoinResult struct {
	Kind      string    `json:"kind"`       // newcomer or urgent
	AtSeconds float64   `json:"at_seconds"` // its enqueue, from the start
	WaitsMs   []float64 `json:"waits_ms"`   // each task's, enqueue to arrival; missing when not delivered
	// FirstMs is the first arrival's wait, which the bound applies to; 0
	// when none arrived.
	FirstMs float64 `json:"first_ms"`
	// BacklogAhead counts the other tasks' arrivals between the enqueue
	// and the joiner's first arrival.
	BacklogAhead int `json:"backlog_ahead"`
}

// enqueue enqueues the joiner's tasks of plan on queue, parked at enqueue
// in the lines of prefix while they wait, and returns when it did.
func (j joiner) enqueue(ctx context.Context, rdb *redis.Client, plan *drainPlan, queue, prefix string) (time.Time, error) {
	pc := producer.NewClientFromRedisClient(rdb, producer.WithPrefix(prefix))
	defer pc.Close()
	at := time.Now()
	var opts []asynq.Option
	if j.priority != 0 {
		opts = append(opts, producer.Priority(j.priority))
	}
	for i := range j.tasks {
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
	jr := &JoinResult{Kind: j.kind, AtSeconds: at.Sub(start).Seconds()}
	var first time.Time
	seen := map[string]bool{}
	for _, r := range receipts {
		if !strings.HasPrefix(r.ID, j.prefix) || seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		jr.WaitsMs = append(jr.WaitsMs, float64(r.At.Sub(at))/float64(time.Millisecond))
		if first.IsZero() || r.At.Before(first) {
			first = r.At
		}
	}
	if len(jr.WaitsMs) > 0 {
		jr.FirstMs = slices.Min(jr.WaitsMs)
	}
	for _, r := range receipts {
		if !isJoiner(r.ID) && r.At.After(at) && r.At.Before(first) {
			jr.BacklogAhead++
		}
	}
	return jr
}

// isJoiner reports whether task id is a joiner's.
func isJoiner(id string) bool {
	return slices.ContainsFunc(joiners, func(j joiner) bool { return strings.HasPrefix(id, j.prefix) })
}
