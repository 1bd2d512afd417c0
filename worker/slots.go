package worker

import (
	"context"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle"
)

// slotPoll is how often a task refused by a full cap asks again while it
// waits in the worker, first come, first served: a slot frees when a send
// ends, at no time the limiter knows.
const slotPoll = 50 * time.Millisecond

// heldSlots are the slots of a task's concurrency rules, held from its
// admission until its send ends: renewed every third of the shortest
// lease meanwhile, and freed at the end (docs/INFLIGHT.md).
type heldSlots struct {
	t      *Throttle
	id     string
	caps   []throttle.Check // enforced
	shadow []throttle.Check // in shadow mode, held on t.limiter
	// free releases the enforced caps: through the task's fair lines, so
	// that the freed slot is given at once, or on its limiter.
	free  func(ctx context.Context, caps []throttle.Check) (int, error)
	renew func(ctx context.Context, caps []throttle.Check) ([]int, error)

	stop chan struct{}
	done sync.WaitGroup
}

// capsOf returns the checks of the concurrency rules of rules, enforced
// and in shadow mode.
func capsOf(rules []policies.Applied) (caps, shadow []throttle.Check) {
	for _, a := range rules {
		if a.Check.Policy.Algorithm != throttle.Concurrency {
			continue
		}
		if a.Shadow {
			shadow = append(shadow, a.Check)
		} else {
			caps = append(caps, a.Check)
		}
	}
	return caps, shadow
}

// isCap reports whether a is a concurrency rule.
func isCap(a policies.Applied) bool { return a.Check.Policy.Algorithm == throttle.Concurrency }

// slotsOf is holdSlots for task, of tenant, admitted under rules.
func (t *Throttle) slotsOf(ctx context.Context, task *asynq.Task, tenant string, rules []policies.Applied) *heldSlots {
	caps, shadow := capsOf(rules)
	if len(caps)+len(shadow) == 0 {
		return nil
	}
	id, _ := asynq.GetTaskID(ctx)
	var f *fairLines
	if t.fair != nil && len(caps) > 0 {
		f = t.fair.of(task.Type(), tenant)
	}
	return t.holdSlots(id, task.Type(), rules, f, t.limiterOf(task.Type(), tenant))
}

// unsent frees the slots of a task that its fair lines admitted but that
// is not sent after all (err, its return to the queue), of the rules
// all, enforced and in shadow mode: they would be held until their lease
// lapsed. It returns err.
func (t *Throttle) unsent(f *fairLines, id, class string, all []policies.Applied, err error) error {
	caps, shadow := capsOf(all)
	if err == nil || len(caps)+len(shadow) == 0 {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	defer cancel()
	if len(caps) > 0 {
		if _, ferr := f.release(ctx, class, id, caps); ferr != nil {
			t.logger.Debug("could not free the slots of a task not sent; they lapse at the end of their lease", "task", id, "err", ferr)
		}
	}
	if len(shadow) > 0 {
		if _, ferr := t.limiter.Release(ctx, id, shadow); ferr != nil {
			t.logger.Debug("could not free the slots of shadow rules of a task not sent", "task", id, "err", ferr)
		}
	}
	return err
}

// holdSlots starts renewing the slots of task id's concurrency rules, of
// rules, until release; nil when it has none. f are the task's fair
// lines, or nil first come, first served, where limiter decides it.
func (t *Throttle) holdSlots(id, class string, rules []policies.Applied, f *fairLines, limiter *throttle.Limiter) *heldSlots {
	caps, shadow := capsOf(rules)
	if len(caps)+len(shadow) == 0 {
		return nil
	}
	h := &heldSlots{t: t, id: id, caps: caps, shadow: shadow, stop: make(chan struct{})}
	h.renew = func(ctx context.Context, caps []throttle.Check) ([]int, error) { return limiter.Renew(ctx, id, caps) }
	h.free = func(ctx context.Context, caps []throttle.Check) (int, error) { return limiter.Release(ctx, id, caps) }
	if f != nil {
		h.free = func(ctx context.Context, caps []throttle.Check) (int, error) { return f.release(ctx, class, id, caps) }
	}
	every := time.Duration(0)
	for _, c := range append(append([]throttle.Check(nil), caps...), shadow...) {
		if every == 0 || c.Policy.Window/3 < every {
			every = c.Policy.Window / 3
		}
	}
	h.done.Go(func() { h.renewing(every) })
	return h
}

// renewing renews the slots every `every` until release.
func (h *heldSlots) renewing(every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-tick.C:
		}
		h.renewOnce(h.caps, h.renew)
		h.renewOnce(h.shadow, func(ctx context.Context, caps []throttle.Check) ([]int, error) {
			return h.t.limiter.Renew(ctx, h.id, caps)
		})
	}
}

// renewOnce renews caps, and says when a slot was lost: its cap may then
// be exceeded until this send ends.
func (h *heldSlots) renewOnce(caps []throttle.Check, renew func(context.Context, []throttle.Check) ([]int, error)) {
	if len(caps) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.t.timeout)
	defer cancel()
	lost, err := renew(ctx, caps)
	if err != nil {
		h.t.logger.Debug("could not renew a send's slots; they lapse at the end of their lease", "task", h.id, "err", err)
		return
	}
	for _, i := range lost {
		h.t.logger.Warn("a send lost its slot of a concurrency rule before it ended (its lease lapsed or was reset); the cap may be exceeded until it ends",
			"task", h.id, "key", caps[i].Key, "lease", caps[i].Policy.Window)
	}
}

// release stops the renewals and frees the slots; a slot that cannot be
// freed lapses at the end of its lease. Safe on a nil h.
func (h *heldSlots) release() {
	if h == nil {
		return
	}
	close(h.stop)
	h.done.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), h.t.timeout)
	defer cancel()
	if len(h.caps) > 0 {
		if _, err := h.free(ctx, h.caps); err != nil {
			h.t.logger.Debug("could not free a send's slots; they lapse at the end of their lease", "task", h.id, "err", err)
		}
	}
	if len(h.shadow) > 0 {
		if _, err := h.t.limiter.Release(ctx, h.id, h.shadow); err != nil {
			h.t.logger.Debug("could not free a send's slots of shadow rules", "task", h.id, "err", err)
		}
	}
}

// release frees task id's slots of caps, and gives them at once: the
// lines are dispatched here, before the task's worker asks asynq for its
// next task, so that a parked task granted a freed slot is at the front
// of its queue by then, and that worker fetches it (docs/INFLIGHT.md,
// "In the fair lines").
func (f *fairLines) release(ctx context.Context, class, id string, caps []throttle.Check) (int, error) {
	n, err := f.lines.Release(ctx, class, id, caps)
	if err != nil || n == 0 {
		return n, err
	}
	// The tasks called ahead go to the front first, the granted one after
	// them: asynq fetches from the front, and this worker's next fetch is
	// to find the granted one.
	f.callAhead(ctx, class)
	turn, err := f.lines.Dispatch(ctx)
	f.move(ctx, turn.Granted) // given by its first calls, even on an error
	if err != nil {
		f.logger.Debug("could not give a freed slot at once; the dispatch loops will", "group", f.group, "err", err)
		f.wake()
	}
	return n, nil
}

// callAhead is how many of the tasks a class held by a cap serves next
// are brought to a worker ahead of their grants, at each release.
const callAhead = 4

// callAhead moves the tasks class serves next to the front of their
// queues, unless they stand here already: fetched, they stand at a worker
// (their turn kept), and a slot freed later reaches them in one message.
func (f *fairLines) callAhead(ctx context.Context, class string) {
	next, err := f.lines.Upcoming(ctx, class, callAhead)
	if err != nil {
		f.logger.Debug("could not read the tasks the lines serve next", "class", class, "err", err)
		return
	}
	for _, g := range next {
		if f.stand.has(g.ID) {
			continue
		}
		if _, err := toFront(ctx, f.rdb, g.Queue, g.ID); err != nil {
			f.logger.Debug("could not call a task ahead of its turn", "task", g.ID, "err", err)
		}
	}
}
