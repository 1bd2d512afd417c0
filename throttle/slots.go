package throttle

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/lua"
)

// A Concurrency check holds a slot from the caller's admission
// (AllowInLine, or a grant of the fair lines) until the caller releases
// it or its lease lapses: a holder that is still sending renews its
// slots every lease ÷ 3 or so (docs/INFLIGHT.md, "Slots").

// isCap reports whether c is a Concurrency cap.
func isCap(c Check) bool { return c.Policy.Algorithm == Concurrency }

// slotKeys returns the Redis keys of the slots of caps, which must all be
// Concurrency checks, and their group.
func (l *Limiter) slotKeys(caps []Check) ([]string, string, error) {
	for _, c := range caps {
		if !isCap(c) {
			return nil, "", fmt.Errorf("%w: key %s is held to %s, not a concurrency cap", ErrInvalidPolicy, Quote(c.Key), c.Policy)
		}
	}
	return l.resolve(caps)
}

// Renew extends holder id's slot in each cap of caps (Concurrency checks)
// to its lease from now, and returns the indexes of those it no longer
// held: lapsed (it renewed too late) or taken back (a reset). Such a cap
// may have given the slot to another, and be exceeded until this send
// ends. Safe for concurrent use.
func (l *Limiter) Renew(ctx context.Context, id string, caps []Check) (lost []int, err error) {
	if l.err != nil {
		return nil, l.err
	}
	keys, _, err := l.slotKeys(caps)
	if err != nil {
		return nil, fmt.Errorf("throttle: renew the slots of %s: %w", describe(caps), err)
	}
	args := make([]any, 1, 1+len(caps))
	args[0] = id
	for _, c := range caps {
		args = append(args, c.Policy.Window.Microseconds())
	}
	renewed, err := lua.SlotsRenew.Run(ctx, l.rdb, keys, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("throttle: renew the slots of %s: %w", describe(caps), err)
	}
	for i, r := range renewed {
		if r == 0 {
			lost = append(lost, i)
		}
	}
	return lost, nil
}

// Release frees holder id's slot in each cap of caps (Concurrency
// checks), and returns how many it held; a slot not held (lapsed) is no
// error. Tasks served by fair lines release through Lines.Release, which
// also gives the freed slot at once.
func (l *Limiter) Release(ctx context.Context, id string, caps []Check) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	keys, _, err := l.slotKeys(caps)
	if err != nil {
		return 0, fmt.Errorf("throttle: release the slots of %s: %w", describe(caps), err)
	}
	n, err := lua.SlotsRelease.Run(ctx, l.rdb, keys, id, "", "").Int()
	if err != nil {
		return 0, fmt.Errorf("throttle: release the slots of %s: %w", describe(caps), err)
	}
	return n, nil
}

// Release is Limiter.Release for a task of class served by ls: when the
// class waits, it is due at once and every process's dispatch loop is
// woken, so that the freed slots go to the next tasks in fair order.
func (ls *Lines) Release(ctx context.Context, class, id string, caps []Check) (int, error) {
	if ls.l.err != nil {
		return 0, ls.l.err
	}
	keys, _, err := ls.l.slotKeys(caps)
	if err != nil {
		return 0, fmt.Errorf("throttle: release the slots of %s: %w", describe(caps), err)
	}
	group := ls.group()
	base := ls.base(group)
	keys = append(keys, base+"qw", base+"qb:"+encodeKeyPart(class))
	n, err := lua.SlotsRelease.Run(ctx, ls.l.rdb, keys, id, encodeKeyPart(class), ls.wakeChannel(group)).Int()
	if err != nil {
		return 0, fmt.Errorf("throttle: release the slots of %s: %w", describe(caps), err)
	}
	return n, nil
}
