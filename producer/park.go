package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/entrance"
	"github.com/sluicehq/sluice/internal/keyspace"
)

// Parking at enqueue (docs/FAIRNESS.md, "Parked at enqueue"): while a
// task's type waits in the fair lines, the Client puts the task in its
// queue's scheduled set, due a park later, and on the lines' entrance,
// from which a worker's dispatch loop puts it in its line at once. A
// newcomer or an urgent task then waits for its slot, not for the workers
// to take a backlog off the pending list ahead of it.

// ErrEnqueuedLate is matched by the error of an enqueue whose task is in
// Redis but not in the fair lines: it runs when its park ends, up to
// throttle.DefaultPark (10 minutes) later. Its TaskInfo is returned with it: do not
// enqueue the task again.
var ErrEnqueuedLate = errors.New("enqueued, but late")

// waitsFor is how long a Client takes a task type's waiting in the lines
// as said: a type that stopped waiting meanwhile costs its tasks a
// dispatch step, no more. A type that does not wait is asked every time,
// as a backlog may start waiting at any moment.
const waitsFor = 100 * time.Millisecond

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithPrefix sets the prefix of the limiter's Redis keys, as the workers'
// --prefix: the Client parks a task at enqueue while its type waits in
// the lines there. The default is "sluice:", the workers' default.
func WithPrefix(prefix string) ClientOption {
	return func(c *Client) { c.prefix = prefix }
}

// WithoutParking makes the Client put every task on its queue's pending
// list, as asynq does, even while its type waits in the fair lines.
func WithoutParking() ClientOption {
	return func(c *Client) { c.parking = false }
}

// parker parks tasks at enqueue for one Client.
type parker struct {
	rdb     redis.UniversalClient
	prefix  string
	inspect *asynq.Inspector
	mu      sync.Mutex
	doors   map[string]*entrance.Door // by limiter group
	waits   map[string]time.Time      // group and task type -> until when it waits, as said
}

// door returns the entrance of the lines of group.
func (p *parker) door(group string) *entrance.Door {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.doors[group]
	if !ok {
		d = entrance.New(p.rdb, keyspace.Base(p.prefix, group))
		p.doors[group] = d
	}
	return d
}

// parkable reports whether a task due at enqueued may be parked: it is
// due now, and opts ask for no other time or a group.
func parkable(enqueued time.Time, opts []asynq.Option) bool {
	if enqueued.After(time.Now()) {
		return false
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		switch o.Type() {
		case asynq.ProcessAtOpt, asynq.ProcessInOpt, asynq.GroupOpt:
			return false
		}
	}
	return true
}

// waiting reports whether typ waits in the lines of group. An error counts
// as no: the task then goes on the pending list, as without parking.
func (p *parker) waiting(ctx context.Context, group, typ string) bool {
	key := group + "\x00" + typ
	p.mu.Lock()
	until, ok := p.waits[key]
	p.mu.Unlock()
	if ok && time.Now().Before(until) {
		return true
	}
	w, err := p.door(group).Waits(ctx, typ)
	if err != nil || !w {
		return false
	}
	p.mu.Lock()
	p.waits[key] = time.Now().Add(waitsFor)
	p.mu.Unlock()
	return true
}

// park enqueues task, due a park from now, and enters it in its line in
// group. Should the entrance refuse it, the task is run now, the usual way.
func (p *parker) park(ctx context.Context, aq *asynq.Client, group string, task *asynq.Task, tenant string, opts []asynq.Option) (*asynq.TaskInfo, error) {
	prio, err := TaskPriority(task)
	if err != nil {
		return nil, err
	}
	info, err := aq.EnqueueContext(ctx, task, append(opts[:len(opts):len(opts)], asynq.ProcessIn(entrance.DefaultPark))...)
	if err != nil {
		return nil, err
	}
	err = p.door(group).Enter(ctx, entrance.Entry{Class: task.Type(), Priority: prio, Tenant: tenant, Queue: info.Queue, ID: info.ID})
	if err == nil || errors.Is(err, entrance.ErrNotWoken) {
		return info, nil
	}
	// Run now; or pending already, moved by a worker that took it in.
	if rerr := p.inspect.RunTask(info.Queue, info.ID); rerr != nil && !p.pending(info) {
		return info, fmt.Errorf("%w: task %s in queue %s runs within %s: %w; run it now: %w",
			ErrEnqueuedLate, info.ID, info.Queue, entrance.DefaultPark, err, rerr)
	}
	info.State, info.NextProcessAt = asynq.TaskStatePending, time.Now()
	return info, nil
}

// pending reports whether the task of info is pending or running.
func (p *parker) pending(info *asynq.TaskInfo) bool {
	got, err := p.inspect.GetTaskInfo(info.Queue, info.ID)
	return err == nil && (got.State == asynq.TaskStatePending || got.State == asynq.TaskStateActive)
}
