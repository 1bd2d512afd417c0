package throttle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// floor is the cheapest possible script call: the round trip that any
// decision made in Redis costs at least.
var floor = redis.NewScript(`return 1`)

// BenchmarkAllow measures Allow over 10,000 keys beside a trivial EVALSHA:
// each caller alternates one of each, and it reports the time per call of
// each. Their ratio is not a fair comparison (with the calls mixed, floor
// calls queue behind Allow's in Redis); bench/cmd/bench measures the ratios, each
// contender on its own.
func BenchmarkAllow(b *testing.B) {
	opt, err := redis.ParseURL(redistest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	opt.PoolSize = 256
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	prefix := redistest.Prefix(b)
	l := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	p := throttle.PerSecond(100)
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%d", i)
	}
	ctx := context.Background()
	if err := floor.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, k := range redistest.Keys(b, rdb, prefix) {
			rdb.Del(ctx, k)
		}
	}()

	for _, callers := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			var allowNs, floorNs atomic.Int64
			b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					key := keys[rand.IntN(len(keys))]
					start := time.Now()
					if err := floor.Run(ctx, rdb, []string{prefix + key}).Err(); err != nil {
						b.Error(err)
						return
					}
					mid := time.Now()
					if _, err := l.Allow(ctx, key, p); err != nil {
						b.Error(err)
						return
					}
					floorNs.Add(int64(mid.Sub(start)))
					allowNs.Add(int64(time.Since(mid)))
				}
			})
			n := float64(b.N)
			b.ReportMetric(float64(allowNs.Load())/n, "allow-ns/call")
			b.ReportMetric(float64(floorNs.Load())/n, "floor-ns/call")
		})
	}
}

// BenchmarkMemoryPerUnit fills keys of growing limits, one admitted unit per
// Allow, and reports the Redis memory each admitted unit takes: MEMORY USAGE
// of the full key (SAMPLES 0, every member counted) over its limit. This is
// the figure behind MaxLimit.
func BenchmarkMemoryPerUnit(b *testing.B) {
	rdb := redistest.Client(b)
	prefix := redistest.Prefix(b)
	l := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	ctx := context.Background()
	defer func() {
		for _, k := range redistest.Keys(b, rdb, prefix) {
			rdb.Del(ctx, k)
		}
	}()
	for _, limit := range []int{10, 100, 1000, 10_000} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			p := throttle.Policy{Limit: limit, Window: time.Hour}
			var bytes int64
			for i := range b.N {
				key := fmt.Sprintf("sms:tenant:%d:%d", limit, i)
				for range limit {
					if d, err := l.Allow(ctx, key, p); err != nil || !d.Allowed {
						b.Fatalf("Allow(%q) = %+v, %v", key, d, err)
					}
				}
				n, err := rdb.MemoryUsage(ctx, redisKey(b, l, key), 0).Result()
				if err != nil {
					b.Fatal(err)
				}
				bytes += n
				rdb.Del(ctx, redisKey(b, l, key))
			}
			b.ReportMetric(float64(bytes)/float64(b.N)/float64(limit), "B/unit")
		})
	}
}
