package bench

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
)

// ownClient returns a client of a Redis of the benchmark's own (nothing
// else counts in its INFO commandstats), with room for 64 connections,
// closed when b ends.
func ownClient(b *testing.B) *redis.Client {
	b.Helper()
	opt, err := redis.ParseURL(redistest.Own(b))
	if err != nil {
		b.Fatal(err)
	}
	opt.PoolSize = 64
	rdb := redis.NewClient(opt)
	b.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// runRedisTime runs call b.N times from 32 callers (16 a core on 2 cores)
// and reports Redis's own time per call of command, µs (INFO commandstats
// before and after): nothing else may use the Redis meanwhile.
func runRedisTime(ctx context.Context, b *testing.B, rdb *redis.Client, command string, call func() error) {
	b.Helper()
	before, err := redisCommands(ctx, rdb)
	if err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := call(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	after, err := redisCommands(ctx, rdb)
	if err != nil {
		b.Fatal(err)
	}
	if calls := after[command].calls - before[command].calls; calls > 0 {
		b.ReportMetric(float64(after[command].usec-before[command].usec)/float64(calls), "redis-µs/call")
	}
}
