// Package rediskeys finds Redis keys by pattern on every master of a Redis
// Cluster, where SCAN sees only the node it is sent to. The demo uses it to
// delete its own queue and limiter prefix when it ends, and the test
// helpers (internal/redistest) to find and delete a test's keys. Nothing
// else should: only throttle/ builds or reads the limiter's keys.
package rediskeys

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Scan returns every key that matches the SCAN pattern (glob-style, as
// Redis's MATCH reads it): on each master of rdb when it is a
// *redis.ClusterClient, otherwise on the one server rdb sends commands to.
// The keys come in no particular order, and, as with SCAN, one written or
// deleted meanwhile may be missed or returned twice. The error is the
// client's, unwrapped: callers say what they were looking for.
func Scan(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]string, error) {
	var (
		keys []string
		mu   sync.Mutex // ForEachMaster scans the masters at once
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, rdb)
	}
	if err != nil {
		return nil, err
	}
	return keys, nil
}
