package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/producer"
)

// countRun is one run of "enqueue sms|email --count N": the same task
// enqueued N times, each under an ID of its own.
type countRun struct {
	task   *asynq.Task
	count  int
	queue  string // --queue, "" for the layout's
	named  string // the queue the tasks go to, for messages
	id     string // --id: the task's ID, or with count > 1 the start of each ID
	stdout io.Writer
	stderr io.Writer
}

// enqueue enqueues the task count times, one at a time, and returns how
// many were enqueued. Memory stays that of one task whatever count is:
// asynq gives each enqueue an ID of its own, so one task is built, not
// count. A task ID already taken is reported and skipped; any other error
// stops the run at once, as a failed Redis or ctx's end would fail every
// task after it too: one line says why, one where it stopped.
func (c countRun) enqueue(ctx context.Context, pc *producer.Client) (enqueued, notEnqueued int) {
	for i := 1; i <= c.count; i++ {
		var opts []asynq.Option
		if c.queue != "" {
			opts = append(opts, asynq.Queue(c.queue))
		}
		id := c.taskID(i)
		if id != "" {
			opts = append(opts, asynq.TaskID(id))
		}
		info, err := pc.Enqueue(ctx, c.task, opts...)
		switch {
		case err == nil:
			enqueued++
			if c.count == 1 {
				fmt.Fprintln(c.stdout, info.ID)
			}
			continue
		case errors.Is(err, asynq.ErrTaskIDConflict):
			fmt.Fprintf(c.stderr, "enqueue: task %d: id %q is taken: queue %s already has a task with this id\n", i, id, c.named)
			notEnqueued++
			continue
		}
		stopped := "stopped"
		if ctx.Err() != nil {
			stopped = "interrupted"
		} else {
			fmt.Fprintf(c.stderr, "enqueue: task %d: %v\n", i, err)
		}
		if c.count > 1 {
			fmt.Fprintf(c.stderr, "enqueue: %s at task %d: it and %s after it not enqueued\n", stopped, i, count(c.count-i, "task"))
		}
		return enqueued, notEnqueued + c.count - i + 1
	}
	return enqueued, notEnqueued
}

// taskID returns the ID of task i (from 1): --id for one task, --id-i
// for more, "" without --id (asynq draws one).
func (c countRun) taskID(i int) string {
	switch {
	case c.id == "":
		return ""
	case c.count == 1:
		return c.id
	}
	return fmt.Sprintf("%s-%d", c.id, i)
}
