package redistest

import (
	"context"
	"errors"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Queue returns the name of an asynq queue of tb's own, "test-" and 12 hex
// digits (asynq's keys do not take Prefix), and when tb ends deletes the
// queue, with the keys that asynq's DeleteQueue leaves (its statistics).
func Queue(tb testing.TB, rdb redis.UniversalClient) string {
	tb.Helper()
	q := "test-" + random()
	tb.Cleanup(func() {
		err := asynq.NewInspectorFromRedisClient(rdb).DeleteQueue(q, true)
		if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
			tb.Errorf("delete queue %s: %v", q, err)
		}
		if keys := QueueKeys(tb, rdb, q); len(keys) > 0 {
			if err := rdb.Del(context.Background(), keys...).Err(); err != nil {
				tb.Errorf("delete the keys of queue %s: %v", q, err)
			}
		}
	})
	return q
}

// QueueKeys returns every Redis key of asynq queue q: asynq names them
// "asynq:{q}:...", with q as the hash tag, so on a cluster they are all on
// one master.
func QueueKeys(tb testing.TB, rdb redis.UniversalClient, q string) []string {
	tb.Helper()
	return Keys(tb, rdb, "asynq:{"+q+"}")
}

// CheckNoKeys fails tb, without stopping it, if Redis holds a key of asynq
// queue q or one that starts with prefix: what a run that deletes its keys
// at the end, such as the demo's, must not leave.
func CheckNoKeys(tb testing.TB, rdb redis.UniversalClient, q, prefix string) {
	tb.Helper()
	left := func(of string, keys []string) {
		tb.Helper()
		if len(keys) > 0 {
			tb.Errorf("%d keys of %s left in Redis, such as %s", len(keys), of, keys[0])
		}
	}
	left("queue "+q, QueueKeys(tb, rdb, q))
	left("prefix "+prefix, Keys(tb, rdb, prefix))
}
