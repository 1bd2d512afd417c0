package throttle

import (
	"context"
	"fmt"
	"strings"
)

// A task waiting for a slot of a cap may stand at its worker instead of
// going back to its queue (docs/INFLIGHT.md, "In the fair lines"): a slot
// freed then reaches it in one message, not at the next fetch. Whoever
// gives a grant to a task that is running at some worker (it stands
// there) publishes the task's id on a channel beside the lines' keys, and
// the worker where it stands asks again at once.

// grantChannel is the channel of the lines of group: "<prefix>{group}qgrant".
func (ls *Lines) grantChannel(group string) string { return ls.base(group) + "qgrant" }

// NotifyGranted tells every process that the tasks ids hold grants: one
// standing at a worker asks again at once (Granted). Safe for concurrent
// use.
func (ls *Lines) NotifyGranted(ctx context.Context, ids ...string) error {
	if ls.l.err != nil {
		return ls.l.err
	}
	if len(ids) == 0 {
		return nil
	}
	if err := ls.l.rdb.Publish(ctx, ls.grantChannel(ls.group()), strings.Join(ids, "\n")).Err(); err != nil {
		return fmt.Errorf("throttle: notify grants: %w", err)
	}
	return nil
}

// Grants subscribes to the grants NotifyGranted publishes for the lines'
// group, in any process, and calls f with each task id, in the order
// published, from one goroutine; it returns a function that ends the
// subscription.
func (ls *Lines) Grants(ctx context.Context, f func(id string)) (func() error, error) {
	if ls.l.err != nil {
		return nil, ls.l.err
	}
	ps := ls.l.rdb.Subscribe(ctx, ls.grantChannel(ls.group()))
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return nil, fmt.Errorf("throttle: subscribe to the lines' grants: %w", err)
	}
	go func() {
		for m := range ps.Channel() {
			for id := range strings.SplitSeq(m.Payload, "\n") {
				f(id)
			}
		}
	}()
	return ps.Close, nil
}

// Upcoming returns the tasks that the lines of class will serve next, at
// most n: the heads of its ready flows of the most urgent level waiting,
// by start tag. A worker brings them to the front of their queues ahead of
// their grants when a cap holds the class, so that they stand at a worker
// when a slot frees. Read only; safe for concurrent use.
func (ls *Lines) Upcoming(ctx context.Context, class string, n int) ([]Grant, error) {
	if ls.l.err != nil {
		return nil, ls.l.err
	}
	group := ls.group()
	c := encodeKeyPart(class)
	t, err := ls.runKeys(ctx, ls.scripts.Upcoming, group, ls.settings(group).ClassKeys(c), c, n)
	if err != nil {
		return nil, fmt.Errorf("throttle: the tasks %s serves next: %w", class, err)
	}
	return t.Granted, nil
}
