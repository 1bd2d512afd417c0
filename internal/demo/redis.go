package demo

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/internal/rediskeys"
)

// broker is the Redis a demo runs on: the user's, or one embedded in the
// process.
type broker struct {
	rdb      redis.UniversalClient
	embedded *miniredis.Miniredis // nil for the user's Redis
	addr     string               // host:port, for the first line
}

// openBroker connects to the Redis at url, or starts an embedded
// miniredis on a random loopback port when url is "".
//
// miniredis keeps key TTLs frozen unless told otherwise; ClockTTL makes them
// run down with the real clock, as Redis's do, so that provider holds
// (throttle.Limiter.Hold) end and window keys expire. TIME already follows
// the real clock. See the package documentation for what else was checked.
func openBroker(ctx context.Context, url string) (*broker, error) {
	if url == "" {
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true)
		if err := m.Start(); err != nil { // 127.0.0.1, a random port
			return nil, fmt.Errorf("start the embedded Redis: %w", err)
		}
		rdb, err := redisconn.Client("redis://" + m.Addr())
		if err != nil {
			m.Close()
			return nil, err
		}
		return &broker{rdb: rdb, embedded: m, addr: m.Addr()}, nil
	}
	// As the worker connects: the error says what answered and how.
	rdb, err := redisconn.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	return &broker{rdb: rdb, addr: redisconn.Describe(url)}, nil // not the URL: it may hold a password
}

// close closes the connection, and stops the embedded Redis.
func (b *broker) close() {
	_ = b.rdb.Close()
	if b.embedded != nil {
		b.embedded.Close()
	}
}

// cleanup deletes every key of the demo's queue and limiter prefix, with
// the statistics that asynq's DeleteQueue leaves. The worker must have
// stopped.
func (b *broker) cleanup(ctx context.Context, queue, prefix string) error {
	var err error
	if derr := asynq.NewInspectorFromRedisClient(b.rdb).DeleteQueue(queue, true); derr != nil && !errors.Is(derr, asynq.ErrQueueNotFound) {
		err = fmt.Errorf("delete the demo's queue %s: %w", queue, derr)
	}
	// Neither name holds a glob character: they are patterns of themselves.
	for _, pattern := range []string{"asynq:{" + queue + "}*", prefix + "*"} {
		if derr := b.deleteKeys(ctx, pattern); derr != nil {
			err = errors.Join(err, derr)
		}
	}
	return err
}

// deleteKeys deletes the keys that match pattern, on every master of a
// Redis Cluster.
func (b *broker) deleteKeys(ctx context.Context, pattern string) error {
	keys, err := rediskeys.Scan(ctx, b.rdb, pattern)
	if err != nil {
		return fmt.Errorf("find the demo's keys %s: %w", pattern, err)
	}
	// One DEL a key, pipelined: on a cluster, keys of different hash slots
	// cannot share a command.
	for len(keys) > 0 {
		n := min(len(keys), 500)
		pipe := b.rdb.Pipeline()
		for _, k := range keys[:n] {
			pipe.Del(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("delete the demo's keys %s: %w", pattern, err)
		}
		keys = keys[n:]
	}
	return nil
}
