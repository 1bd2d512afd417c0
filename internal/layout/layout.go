// Package layout says where a task's queue is: the layout of a deployment
// (its number of shards), the queue of a task, the queues a worker serves,
// and the marker that names the layout in Redis (docs/SCALING.md).
package layout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/keyspace"
)

// Legacy is the one queue of Sluice 0.x, where every task went: workers
// with a provider for every task type still serve it.
const Legacy = "default"

// DefaultShards is the number of shards of a layout on one Redis or on
// Sentinel; the only one this version runs.
const DefaultShards = 1

// Layout is how tasks are spread: over Shards shards; 0 is Sluice 0.1's
// layout, every task in the queue Legacy (Old).
type Layout struct {
	Shards int
}

// Default is the layout a worker writes when Redis names none.
var Default = Layout{Shards: DefaultShards}

// Old is the layout of a Redis that names none: Sluice 0.1's, where
// producers put every task in Legacy. A producer keeps to it until a
// worker of this version writes Default, so that tasks enqueued before the
// workers are upgraded go where the old workers look.
var Old = Layout{}

// ErrOther: Redis names another layout than the one asked for.
var ErrOther = errors.New("another layout")

// String is the layout as its marker holds it: "shards=<S>"; "none" for
// Old, which no marker holds.
func (l Layout) String() string {
	if l == Old {
		return "none"
	}
	return "shards=" + strconv.Itoa(l.Shards)
}

// Parse reads a marker's value, as String writes it.
func Parse(s string) (Layout, error) {
	n, ok := strings.CutPrefix(s, "shards=")
	shards, err := strconv.Atoi(n)
	if !ok || err != nil || shards < 1 || strconv.Itoa(shards) != n {
		return Layout{}, fmt.Errorf("layout %.80q is not shards=<N> with N a whole number from 1", s)
	}
	return Layout{Shards: shards}, nil
}

// Queue is the asynq queue of a task of taskType for tenant: its type's
// name, on one shard; Legacy under Old.
func (l Layout) Queue(taskType, tenant string) string {
	if l == Old {
		return Legacy
	}
	return taskType
}

// Queues are the queues a worker with providers for taskTypes serves: each
// type's, and Legacy when it has a provider for every type of allTypes, so
// that a task an older producer put there is never fetched by a worker
// that cannot send it.
func (l Layout) Queues(taskTypes, allTypes []string) []string {
	var qs []string
	for _, t := range taskTypes {
		if q := l.Queue(t, ""); !slices.Contains(qs, q) {
			qs = append(qs, q)
		}
	}
	for _, t := range allTypes {
		if !slices.Contains(taskTypes, t) {
			return qs
		}
	}
	if slices.Contains(qs, Legacy) {
		return qs // Old: every type's queue is Legacy
	}
	return append(qs, Legacy)
}

// Read returns the layout that Redis names under prefix; ok is false when
// it names none (a new Redis, or one of Sluice 0.x).
func Read(ctx context.Context, rdb redis.UniversalClient, prefix string) (l Layout, ok bool, err error) {
	key := keyspace.LayoutKey(prefix)
	v, err := rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return Layout{}, false, nil
	}
	if err != nil {
		return Layout{}, false, fmt.Errorf("read the layout %s: %w", key, err)
	}
	if l, err = Parse(v); err != nil {
		return Layout{}, false, fmt.Errorf("read the layout %s: %w", key, err)
	}
	return l, true, nil
}

// Ensure returns nil when Redis names want under prefix, writing it when
// Redis names none; an error matching ErrOther, naming both, when Redis
// names another.
func Ensure(ctx context.Context, rdb redis.UniversalClient, prefix string, want Layout) error {
	key := keyspace.LayoutKey(prefix)
	if err := rdb.SetNX(ctx, key, want.String(), 0).Err(); err != nil {
		return fmt.Errorf("write the layout %s: %w", key, err)
	}
	return Check(ctx, rdb, prefix, want)
}

// Check returns nil when Redis names want under prefix, or none; an error
// matching ErrOther, naming both, when it names another.
func Check(ctx context.Context, rdb redis.UniversalClient, prefix string, want Layout) error {
	got, ok, err := Read(ctx, rdb, prefix)
	if err != nil {
		return err
	}
	if ok && got != want {
		return Mismatch(prefix, got, want)
	}
	return nil
}

// Mismatch is the error of a process that runs want where Redis, under
// prefix, names got: it matches ErrOther and names both.
func Mismatch(prefix string, got, want Layout) error {
	return fmt.Errorf("%w: Redis holds layout %s (%s), and this process runs %s; docs/SCALING.md says how to change it",
		ErrOther, got, keyspace.LayoutKey(prefix), want)
}
