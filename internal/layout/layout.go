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
	"sync"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/keyspace"
)

// Legacy is the one queue of Sluice 0.x, where every task went: workers
// with a provider for every task type still serve it.
const Legacy = "default"

// DefaultShards is the number of shards of a layout on one Redis or on
// Sentinel, where more would gain nothing.
const DefaultShards = 1

// MaxShards is the most shards a layout may have: each is a queue per task
// type that every idle worker polls (docs/SCALING.md, "Idle polling").
const MaxShards = 256

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
	if !ok || err != nil || shards < 1 || shards > MaxShards || strconv.Itoa(shards) != n {
		return Layout{}, fmt.Errorf("layout %.80q is not shards=<N> with N a whole number from 1 to %d", s, MaxShards)
	}
	return Layout{Shards: shards}, nil
}

// Queue is the asynq queue of a task of taskType for tenant: its type's
// name on one shard, its shard's name (ShardName) on more; Legacy under Old.
func (l Layout) Queue(taskType, tenant string) string {
	switch {
	case l == Old:
		return Legacy
	case l.Shards <= 1:
		return taskType
	}
	return ShardName(taskType, l.Shard(tenant), l.Shards)
}

// Group is the limiter group of a task of taskType for tenant, the hash
// tag of its rule logs and fair lines: keyspace.DefaultGroup on one shard,
// its queue's name on more, so that queue and limiter share a slot.
func (l Layout) Group(taskType, tenant string) string {
	if l.Shards <= 1 {
		return keyspace.DefaultGroup
	}
	return l.Queue(taskType, tenant)
}

// TypeQueues are the queues of taskType, shard by shard.
func (l Layout) TypeQueues(taskType string) []string {
	if l.Shards <= 1 {
		return []string{l.Queue(taskType, "")}
	}
	return l.Groups(taskType)
}

// Groups are the limiter groups of taskType, shard by shard.
func (l Layout) Groups(taskType string) []string {
	if l.Shards <= 1 {
		return []string{keyspace.DefaultGroup}
	}
	gs := make([]string, l.Shards)
	for i := range gs {
		gs[i] = ShardName(taskType, i, l.Shards)
	}
	return gs
}

// Queues are the queues a worker with providers for taskTypes serves: each
// type's, and Legacy when it has a provider for every type of allTypes, so
// that a task an older producer put there is never fetched by a worker
// that cannot send it.
func (l Layout) Queues(taskTypes, allTypes []string) []string {
	var qs []string
	for _, t := range taskTypes {
		for _, q := range l.TypeQueues(t) {
			if !slices.Contains(qs, q) {
				qs = append(qs, q)
			}
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
	if from, to, switching := parseSwitching(v); switching {
		return Layout{}, false, fmt.Errorf("%w: from %s to %s (%s); start the workers once it is done", ErrSwitching, from, to, key)
	}
	if l, err = Parse(v); err != nil {
		return Layout{}, false, fmt.Errorf("read the layout %s: %w", key, err)
	}
	return l, true, nil
}

// Choose returns the layout a worker runs: the one Redis names under
// prefix; when it names none, asked shards, or, when asked is 0, one on a
// single Redis or Sentinel, and on a cluster one per master, unless an
// older deployment is there (its workers admit outside any shard:
// docs/SCALING.md, "From 0.1.0"): its limiter keys, or an asynq server
// running, when it is one too. A Redis
// that names another than asked is an error matching ErrOther, naming
// both.
func Choose(ctx context.Context, rdb redis.UniversalClient, prefix string, asked int) (Layout, error) {
	got, ok, err := Read(ctx, rdb, prefix)
	switch {
	case err != nil:
		return Layout{}, err
	case ok && asked != 0 && got.Shards != asked:
		return Layout{}, Mismatch(prefix, got, Layout{Shards: asked})
	case ok:
		return got, nil
	case asked != 0:
		return Layout{Shards: asked}, nil
	}
	c, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return Default, nil
	}
	if old, err := olderKeys(ctx, c, prefix); err != nil || old {
		return Default, err
	}
	// A worker of this version writes the marker before asynq registers
	// it: a live server here with no marker is an older one, whose keys
	// may all have expired while it idled.
	servers, err := asynq.NewInspectorFromRedisClient(c).Servers()
	if err != nil {
		return Layout{}, fmt.Errorf("look for running workers: %w", err)
	}
	if len(servers) > 0 {
		return Default, nil
	}
	var mu sync.Mutex
	masters := 0
	err = c.ForEachMaster(ctx, func(context.Context, *redis.Client) error {
		mu.Lock()
		masters++
		mu.Unlock()
		return nil
	})
	if err != nil {
		return Layout{}, fmt.Errorf("count the cluster's masters: %w", err)
	}
	return Layout{Shards: min(max(masters, 1), MaxShards)}, nil
}

// olderKeys reports whether the cluster holds limiter keys under prefix in
// the default group, as a deployment without a layout wrote them (the
// marker, which another worker may write meanwhile, aside): it scans the
// master of that group's slot until the first.
func olderKeys(ctx context.Context, c *redis.ClusterClient, prefix string) (bool, error) {
	base := keyspace.LinesBase(prefix)
	m, err := c.MasterForKey(ctx, base)
	if err != nil {
		return false, fmt.Errorf("find the master of %s: %w", base, err)
	}
	match := strings.NewReplacer("*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(base) + "*"
	var cursor uint64
	for {
		keys, next, err := m.Scan(ctx, cursor, match, 1000).Result()
		if err != nil {
			return false, fmt.Errorf("look for an older deployment's keys %s: %w", match, err)
		}
		for _, k := range keys {
			if k != keyspace.LayoutKey(prefix) {
				return true, nil
			}
		}
		if cursor = next; cursor == 0 {
			return false, nil
		}
	}
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
