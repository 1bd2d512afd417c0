package producer

import (
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// DefaultRetention is how long asynq keeps a task that has an ID once it
// has run: while it is kept its ID stays taken, so that the same task
// enqueued again is refused (asynq.ErrTaskIDConflict), not sent twice. A
// day, the window of most idempotency keys (docs/WORKERS.md, "Idempotent
// enqueue").
const DefaultRetention = 24 * time.Hour

// MaxRetention bounds WithRetention: a retained task costs Redis its
// payload and record for as long as it is kept.
const MaxRetention = 30 * 24 * time.Hour

// WithRetention sets how long a task with an ID is kept once it has run
// (asynq.Retention), DefaultRetention by default; 0 keeps none, and an
// enqueue of the same ID after a task ran sends it again. A task given
// its own asynq.Retention keeps it. Tasks without an ID are never kept:
// nothing could refuse them again.
func WithRetention(d time.Duration) ClientOption {
	return func(c *Client) {
		if d < 0 || d > MaxRetention {
			c.err = fmt.Errorf("producer: %w: retention %v is not 0 to %v", ErrInvalidConfig, d, MaxRetention)
			return
		}
		c.retention = d
	}
}

// retainOf says what opts make of a task's retention: "id" when they
// give it an ID and no asynq.Retention, "own" when they give a retention,
// else "". NewSMSTask and NewEmailTask record it in HeaderRetain: asynq
// keeps a task's own options out of reach.
func retainOf(opts []asynq.Option) string {
	id := false
	for _, opt := range opts {
		switch {
		case opt == nil:
		case opt.Type() == asynq.RetentionOpt:
			return "own"
		case opt.Type() == asynq.TaskIDOpt:
			id = true
		}
	}
	if id {
		return "id"
	}
	return ""
}

// retained returns opts with the Client's retention when task's options
// (HeaderRetain) or opts give it an ID, and neither a retention of its
// own.
func (c *Client) retained(task *asynq.Task, opts []asynq.Option) []asynq.Option {
	if c.retention <= 0 {
		return opts
	}
	built, given := task.Headers()[HeaderRetain], retainOf(opts)
	if built == "own" || given == "own" || (built != "id" && given != "id") {
		return opts
	}
	return append(opts[:len(opts):len(opts)], asynq.Retention(c.retention))
}
