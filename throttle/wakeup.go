package throttle

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/internal/entrance"
)

// The dispatch loops of every process sleep until the next slot their
// last Dispatch saw. What makes a slot due sooner in another process (a
// window reset by hand, a policies reload, a grant dropped) is published
// on a Pub/Sub channel beside the lines' keys, so that the loops wake at
// once instead of at the end of their sleep.

// wakeChannel is the channel of the lines of group: "<prefix>{group}qwake".
func (ls *Lines) wakeChannel(group string) string { return entrance.WakeChannel(ls.base(group)) }

// publishWake tells every process's dispatch loop to look at the lines of
// group now; a refusal is ErrNotWoken.
func (ls *Lines) publishWake(ctx context.Context, group string) error {
	if err := ls.l.rdb.Publish(ctx, ls.wakeChannel(group), "wake").Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotWoken, err)
	}
	return nil
}

// Wakeups subscribes to the wake-ups of the lines of its group, which
// Wake, Refresh and Drop publish (in any process), and returns a channel
// that receives after each one (several close together may come as one),
// and a function that ends the subscription. A dispatch loop waits on it
// beside its timer. It fails when Redis refuses the subscription (an ACL
// without the prefix's channels).
func (ls *Lines) Wakeups(ctx context.Context) (<-chan struct{}, func() error, error) {
	if ls.l.err != nil {
		return nil, nil, ls.l.err
	}
	ps := ls.l.rdb.Subscribe(ctx, ls.wakeChannel(ls.group()))
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return nil, nil, fmt.Errorf("throttle: subscribe to the lines' wake-ups: %w", err)
	}
	out := make(chan struct{}, 1)
	go func() {
		for range ps.Channel() {
			select {
			case out <- struct{}{}:
			default: // one is pending already
			}
		}
	}()
	return out, ps.Close, nil
}
