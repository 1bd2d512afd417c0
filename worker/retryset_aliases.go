package worker

import (
	"context"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/retryset"
)

// What the admin command and the status page read of asynq's retry sets
// moved to package retryset, so that a reader of the backlog does not
// import the worker. These names stay for one release; CHANGELOG.md lists
// what moved where.

// RetryTask is a task waiting in an asynq queue's retry set.
//
// Deprecated: use retryset.Task.
type RetryTask = retryset.Task

// RetryQueue is what one queue's retry set holds.
//
// Deprecated: use retryset.Queue.
type RetryQueue = retryset.Queue

// ThrottledBy reads the last error asynq keeps for a task and says what
// throttled it, if anything did.
//
// Deprecated: use retryset.ThrottledBy.
func ThrottledBy(lastErr string) (by string, ok bool) { return retryset.ThrottledBy(lastErr) }

// RetrySet reads the retry set of queue.
//
// Deprecated: use retryset.Read.
func RetrySet(ctx context.Context, ins *asynq.Inspector, queue string, limit int) (RetryQueue, error) {
	return retryset.Read(ctx, ins, queue, limit)
}

// RetrySetHead reads the head of the retry set of queue.
//
// Deprecated: use retryset.Head.
func RetrySetHead(ctx context.Context, ins *asynq.Inspector, queue string, limit, scan int) (RetryQueue, error) {
	return retryset.Head(ctx, ins, queue, limit, scan)
}

// Queues returns the queues that Redis knows, in name order.
//
// Deprecated: use retryset.Queues.
func Queues(ins *asynq.Inspector) ([]string, error) { return retryset.Queues(ins) }
