// Package entrance is how a producer parks a task at enqueue beside the
// fair lines (docs/FAIRNESS.md, "Parked at enqueue"): while the task's type
// waits in the lines, the producer puts the task in asynq's scheduled set
// and its Entry on a list beside the lines, and a worker's dispatch step
// puts it in its line from there. Producers and the lines (package
// throttle) share it, so that a producer needs no limiter.
package entrance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/keyspace"
)

// DefaultPark is how long a parked task stays in asynq's retry or
// scheduled set before asynq brings it back by itself: long enough that it
// comes back through a grant.
const DefaultPark = 10 * time.Minute

// ErrNotWoken: the call did what it was asked, but Redis refused to
// publish the wake-up of the dispatch loops; they look at their next turn.
var ErrNotWoken = errors.New("the lines' wake-up was not published")

// ErrInvalid: an entry lacks a field. The callers check its priority.
var ErrInvalid = errors.New("invalid entry")

// Entry is a task parked at enqueue, as the entrance holds it.
type Entry struct {
	Class    string `json:"c"` // the task type
	Priority int    `json:"l"` // 1, most urgent, to 5
	Tenant   string `json:"t"`
	Queue    string `json:"q"` // the asynq queue the task waits in, scheduled
	ID       string `json:"id"`
	// At is when the task was enqueued, in Unix milliseconds; Enter sets it.
	At int64 `json:"at"`
}

// Door is the entrance of the lines whose keys start with base
// ("<prefix>{<group>}", keyspace.LinesBase). It is safe for concurrent use.
type Door struct {
	rdb  redis.UniversalClient
	base string
}

// New returns the entrance of the lines at base.
func New(rdb redis.UniversalClient, base string) *Door { return &Door{rdb: rdb, base: base} }

// WakeChannel is the Pub/Sub channel that wakes the dispatch loops of the
// lines at base.
func WakeChannel(base string) string { return base + "qwake" }

// Waits reports whether class waits in the lines, served by a dispatch
// loop (its heartbeat <base>qd lives): a task of it enqueued now is better
// parked than put behind the pending list.
func (d *Door) Waits(ctx context.Context, class string) (bool, error) {
	var beat *redis.IntCmd
	var wake *redis.FloatCmd
	_, err := d.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		beat = p.Exists(ctx, d.base+"qd")
		wake = p.ZScore(ctx, d.base+"qw", keyspace.Encode(class))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, err
	}
	return beat.Val() == 1 && wake.Err() == nil, nil
}

// Enter puts entries, tasks already in asynq's scheduled set, on the
// entrance and wakes the dispatch loops of every process to take them in.
// A refused wake-up is ErrNotWoken: the entries are in, and a loop takes
// them at its next look.
func (d *Door) Enter(ctx context.Context, entries ...Entry) error {
	if len(entries) == 0 {
		return nil
	}
	vals := make([]any, len(entries))
	at := time.Now().UnixMilli()
	for i, e := range entries {
		e.At = at
		if e.ID == "" || e.Queue == "" || e.Tenant == "" || e.Class == "" {
			return fmt.Errorf("enter %q in the lines: %w: class, tenant, queue and task id are all needed", e.ID, ErrInvalid)
		}
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("enter %s in the lines: %w", e.ID, err)
		}
		vals[i] = b
	}
	if err := d.rdb.RPush(ctx, d.base+"qe", vals...).Err(); err != nil {
		return fmt.Errorf("enter %d tasks in the lines: %w", len(entries), err)
	}
	if err := d.rdb.Publish(ctx, WakeChannel(d.base), "wake").Err(); err != nil {
		return fmt.Errorf("enter %d tasks in the lines: %w: %w", len(entries), ErrNotWoken, err)
	}
	return nil
}
