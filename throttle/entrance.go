package throttle

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/entrance"
)

// The entrance is how a producer parks a task at enqueue (docs/FAIRNESS.md,
// "Parked at enqueue"): internal/entrance holds it, shared with producer.

// Entry is a task parked at enqueue, as the entrance holds it.
type Entry = entrance.Entry

// EntryRules gives a task taken from the entrance the weight of its tenant
// and its checks, those of the policies in force; no checks release it
// (it is not limited, and is moved to the front of its queue).
type EntryRules func(class, tenant string) (weight float64, checks []LineCheck)

const (
	// entranceBatch is the most entries one Dispatch takes in; a full
	// batch says to call again at once.
	entranceBatch = 128

	// heartbeat is how long a Dispatch that takes in the entrance says a
	// loop does (Waits): loops call it at least every second.
	heartbeat = 5 * time.Second

	// entryStale is the age of an entry that is no longer taken in: its
	// task's park ends soon, or has ended and the task arrived (it may
	// even have been sent, and failed since), so it comes the usual way.
	entryStale = DefaultPark - time.Minute
)

// Waits reports whether class waits in the lines, served by a dispatch
// loop: a task of it enqueued now is better parked at enqueue (Enter)
// than put behind the pending list.
func (ls *Lines) Waits(ctx context.Context, class string) (bool, error) {
	if ls.l.err != nil {
		return false, ls.l.err
	}
	w, err := entrance.New(ls.l.rdb, ls.base(ls.group())).Waits(ctx, class)
	if err != nil {
		return false, fmt.Errorf("throttle: does %s wait in the lines: %w", class, err)
	}
	return w, nil
}

// Enter puts entries, tasks already in asynq's scheduled set, on the
// entrance of the lines, and wakes the dispatch loops of every process to
// take them in. A refused wake-up is ErrNotWoken: the entries are in, and
// a loop takes them at its next look.
func (ls *Lines) Enter(ctx context.Context, entries ...Entry) error {
	if ls.l.err != nil {
		return ls.l.err
	}
	for _, e := range entries {
		if e.ID == "" || e.Queue == "" || e.Tenant == "" || e.Class == "" {
			return fmt.Errorf("throttle: enter %q in the lines: %w: class, tenant, queue and task id are all needed", e.ID, ErrInvalidKey)
		}
		if e.Priority < MostUrgent || e.Priority > LeastUrgent {
			return fmt.Errorf("throttle: enter %s in the lines: %w: priority %d is not %d to %d", e.ID, ErrInvalidPolicy, e.Priority, MostUrgent, LeastUrgent)
		}
	}
	if err := entrance.New(ls.l.rdb, ls.base(ls.group())).Enter(ctx, entries...); err != nil {
		return fmt.Errorf("throttle: %w", err)
	}
	return nil
}

// entering reads the head of the entrance of group and returns
// dispatch.lua's arguments that take it in (none when the lines have no
// EntryRules or the entrance is empty), the keys they need declared (their
// classes' and their rules' logs), how many entries it read, and what
// Redis refused.
func (ls *Lines) entering(ctx context.Context, group string) ([]any, []string, int, error) {
	if ls.cfg.Rules == nil {
		return nil, nil, 0, nil
	}
	// The heartbeat first: an entrance that fails is still read by a loop.
	read := ls.l.rdb.Pipeline()
	read.Set(ctx, ls.base(group)+"qd", 1, heartbeat)
	lr := read.LRange(ctx, ls.base(group)+"qe", 0, entranceBatch-1)
	_, _ = read.Exec(ctx)
	raw, err := lr.Result()
	if err != nil || len(raw) == 0 {
		if err == redis.Nil {
			err = nil
		}
		return nil, nil, 0, err
	}
	var keys []string
	stale := time.Now().Add(-entryStale).UnixMilli()
	type entering struct {
		S  bool     `json:"s,omitempty"`
		C  string   `json:"c,omitempty"`
		L  int      `json:"l,omitempty"`
		T  string   `json:"t,omitempty"`
		Q  string   `json:"q,omitempty"`
		ID string   `json:"id,omitempty"`
		W  float64  `json:"w,omitempty"`
		R  []string `json:"r,omitempty"`
	}
	batch := make([]entering, len(raw))
	for i, r := range raw {
		var e Entry
		if json.Unmarshal([]byte(r), &e) != nil || e.Class == "" || e.Tenant == "" || e.Queue == "" || e.ID == "" ||
			e.Priority < MostUrgent || e.Priority > LeastUrgent {
			continue // not a task: the step only removes it, and says so
		}
		if e.At < stale {
			batch[i] = entering{S: true}
			continue
		}
		x := entering{C: encodeKeyPart(e.Class), L: e.Priority, T: e.Tenant, Q: e.Queue, ID: e.ID}
		keys = append(keys, ls.settings(group).ClassKeys(x.C)...)
		w, checks := ls.cfg.Rules(e.Class, e.Tenant)
		if len(checks) > 0 {
			// Rules the lines cannot keep release the task: its arrival at
			// a worker says what is wrong with them.
			if rules, g, err := ls.rules(checks); err == nil && g == group {
				x.R, x.W = rules, w
				for i := 0; i < len(rules); i += 6 {
					keys = append(keys, beside(rules[i])...)
				}
				if !(x.W > 0) {
					x.W = 1
				}
			}
		}
		batch[i] = x
	}
	enc, err := json.Marshal(batch)
	if err != nil {
		return nil, nil, 0, err
	}
	args := make([]any, 0, 1+len(raw))
	args = append(args, string(enc))
	for _, r := range raw {
		args = append(args, r)
	}
	return args, keys, len(raw), nil
}
