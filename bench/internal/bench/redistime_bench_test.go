package bench

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// runRedisTime runs call b.N times from 16 callers a core and reports
// Redis's own time per call of command, µs (INFO commandstats before and
// after): nothing else may use the Redis meanwhile.
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
