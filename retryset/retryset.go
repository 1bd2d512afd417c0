package retryset

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/producer"
)

// throttledPrefix starts the message of every provider.ThrottledError
// (see provider.ThrottledError.Error), and so the last error that asynq
// keeps for a task that was throttled back to its retry set.
const throttledPrefix = "throttled by "

// ThrottledBy reads the last error that asynq keeps for a task
// (asynq.TaskInfo.LastErr). When the task came back through the retry set
// because it was throttled, the message is that of a
// provider.ThrottledError, "throttled by rule tenant-per-second; back in
// 2.4s", and ThrottledBy returns what held it back, "rule
// tenant-per-second" (or "provider hold", "limiter unavailable", ...), and
// true. For any other message (a real failure) it returns "" and false. It
// is provider.IsThrottled for an error that has been through Redis and is
// only text: it knows the message of a ThrottledError returned as it is,
// as the Throttle middleware returns it.
func ThrottledBy(lastErr string) (by string, ok bool) {
	rest, ok := strings.CutPrefix(lastErr, throttledPrefix)
	if !ok {
		return "", false
	}
	by, _, _ = strings.Cut(rest, "; back in ")
	return by, true
}

// Task is a task waiting in an asynq queue's retry set. In JSON its
// time is RFC 3339.
type Task struct {
	// ID is the task's asynq ID.
	ID string `json:"id"`

	// Queue is the queue it waits in.
	Queue string `json:"queue"`

	// Type is its task type, such as "sms:send".
	Type string `json:"type"`

	// Tenant is its producer.HeaderTenant header, as it is (unchecked); ""
	// when it has none.
	Tenant string `json:"tenant"`

	// NextProcessAt is when asynq moves it back to its queue: a whole
	// second (asynq keeps no finer time).
	NextProcessAt time.Time `json:"next_process_at"`

	// LastErr is the error it last returned, as asynq keeps it.
	LastErr string `json:"last_error"`

	// Throttled reports that it waits because it was throttled
	// (ThrottledBy), not because it failed.
	Throttled bool `json:"throttled"`

	// By is what throttled it, as ThrottledBy returns it: "rule <name>",
	// "provider hold", ...; "" for a failure.
	By string `json:"by"`

	// Rule is the rule that throttled it when By is "rule <name>"; else "".
	Rule string `json:"rule"`

	// Retried is how many times it failed: throttling does not count.
	Retried int `json:"retried"`
}

// Queue is what one queue's retry set holds, from Read.
type Queue struct {
	// Queue names the queue.
	Queue string `json:"queue"`

	// Throttled is the number of tasks in the retry set that were
	// throttled; Failed the number that failed and will be retried.
	Throttled int `json:"throttled"`
	Failed    int `json:"failed"`

	// Tasks holds the first of the throttled tasks, soonest back first, up
	// to the limit given to Read.
	Tasks []Task `json:"tasks"`

	// Unread is how many tasks of the retry set were not read, and so are
	// in neither Throttled nor Failed: 0 from Read, which reads them
	// all; from Head, those beyond the tasks it reads.
	Unread int `json:"unread"`
}

// retryPage is how many tasks Read reads from Redis at once.
const retryPage = 500

// Read reads the retry set of queue through ins: it counts the tasks
// that were throttled (ThrottledBy) and those that failed, and returns the
// first limit throttled tasks (soonest back first; limit 0 lists none).
// It reads the whole set, 500 tasks at a time, so it takes time in
// proportion to the set's size; tasks that come and go while it reads may
// be counted twice or not at all. A queue that Redis does not know is an
// error matching asynq.ErrQueueNotFound.
func Read(ctx context.Context, ins *asynq.Inspector, queue string, limit int) (Queue, error) {
	return retrySet(ctx, ins, queue, limit, 0)
}

// Head is Read for a set that may be large: it reads only the
// first scan tasks of the set (soonest back first; over 500, rounded up
// to whole pages of 500), counts those, and reports how many it left (Unread, from
// asynq's count of the set), so that its time does not grow with the
// set. The status page reads the retry sets so at every load.
func Head(ctx context.Context, ins *asynq.Inspector, queue string, limit, scan int) (Queue, error) {
	return retrySet(ctx, ins, queue, limit, max(scan, 1))
}

// retrySet is Read, reading at least scan tasks and then no further
// page (0: the whole set).
func retrySet(ctx context.Context, ins *asynq.Inspector, queue string, limit, scan int) (Queue, error) {
	rq := Queue{Queue: queue, Tasks: []Task{}}
	read, size := 0, retryPage
	if scan > 0 && scan < size {
		size = scan
	}
	for page := 1; ; page++ {
		if err := ctx.Err(); err != nil {
			return rq, fmt.Errorf("retry set of queue %s: %w", queue, err)
		}
		infos, err := ins.ListRetryTasks(queue, asynq.Page(page), asynq.PageSize(size))
		if err != nil {
			return rq, fmt.Errorf("retry set of queue %s: %w", queue, err)
		}
		for _, info := range infos {
			by, throttled := ThrottledBy(info.LastErr)
			if !throttled {
				rq.Failed++
				continue
			}
			rq.Throttled++
			if len(rq.Tasks) < limit {
				rule := ""
				if r, ok := strings.CutPrefix(by, "rule "); ok {
					rule = r
				}
				rq.Tasks = append(rq.Tasks, Task{
					ID: info.ID, Queue: info.Queue, Type: info.Type, Tenant: info.Headers[producer.HeaderTenant],
					NextProcessAt: info.NextProcessAt, LastErr: info.LastErr,
					Throttled: true, By: by, Rule: rule, Retried: info.Retried,
				})
			}
		}
		read += len(infos)
		if len(infos) < size {
			return rq, nil
		}
		if scan > 0 && read >= scan {
			qi, err := ins.GetQueueInfo(queue)
			if err != nil {
				return rq, fmt.Errorf("retry set of queue %s: %w", queue, err)
			}
			rq.Unread = max(qi.Retry-read, 0)
			return rq, nil
		}
	}
}

// Queues returns the queues that Redis knows, through ins (asynq's
// Inspector.Queues), in name order.
func Queues(ins *asynq.Inspector) ([]string, error) {
	qs, err := ins.Queues()
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	slices.Sort(qs)
	return qs, nil
}
