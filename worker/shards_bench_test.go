package worker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/worker"
)

// shardsDrainPolicies are those of issue 29's trial: 5 a second per
// tenant, 300 a second for the provider.
const shardsDrainPolicies = `
tasks:
  sms:send:
    - { name: tenant, scope: tenant, limit: 5, window: 1s }
    - { name: provider, scope: global, limit: 300, window: 1s }
`

// BenchmarkShardsDrain drains issue 29's trial, 3,000 SMS of 300 tenants,
// with two workers of concurrency 20, under layouts of 1 and 3 shards: on
// a three-master cluster of its own (each master with a replica), and on
// one Redis, where the shards' cost shows without three servers sharing
// the cores. It reports each master's Redis CPU (user + system) during the
// drain, the busiest over the mean ("busiest/mean"; docs/SCALING.md
// promises at most 1.3 with shards), the CPU of all masters per task, and
// how close the drain came to the provider's rate ("utilization", ideal
// time over actual). One iteration a case: run with -benchtime 1x.
func BenchmarkShardsDrain(b *testing.B) {
	const tenants, tasks = 300, 3000
	p, err := policies.Parse(b.Name(), []byte(shardsDrainPolicies))
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		redis  string
		shards int
	}{{"cluster", 1}, {"cluster", 3}, {"single", 1}, {"single", 3}} {
		b.Run(fmt.Sprintf("%s/shards=%d", tc.redis, tc.shards), func(b *testing.B) {
			shards := tc.shards
			var rdb redis.UniversalClient
			var addrs []string
			if tc.redis == "single" {
				one := redistest.OwnClient(b, 100)
				rdb, addrs = one, []string{one.Options().Addr}
			} else {
				c := redistest.StartReplicatedCluster(b)
				rdb, addrs = c.Client(b), c.Masters
			}
			ctx := context.Background()
			lay := layout.Layout{Shards: shards}
			if err := layout.Ensure(ctx, rdb, keyspace.DefaultPrefix, lay); err != nil {
				b.Fatal(err)
			}
			masters := make([]*redis.Client, len(addrs))
			for i, addr := range addrs {
				masters[i] = redis.NewClient(&redis.Options{Addr: addr})
				defer masters[i].Close()
			}
			for b.Loop() {
				pc := producer.NewClientFromRedisClient(rdb)
				for i := range tasks {
					if _, err := pc.EnqueueSMS(ctx, fmt.Sprintf("tenant-%03d", i%tenants), goodSMS); err != nil {
						b.Fatal(err)
					}
				}
				cpu0 := mastersCPU(b, masters)
				slowlogStart(b, masters)
				var sent atomic.Int64
				done := make(chan struct{})
				sms := countedSMS(func() {
					if sent.Add(1) == tasks {
						close(done)
					}
				})
				start := time.Now()
				stop := startWorkers(b, rdb, p, shards, sms)
				select {
				case <-done:
				case <-time.After(2 * time.Minute):
					b.Fatalf("after 2 minutes %d of %d sent", sent.Load(), tasks)
				}
				took := time.Since(start)
				cpu1 := mastersCPU(b, masters)
				slowlogReport(b, masters)
				stop()
				var total, busiest float64
				for i := range masters {
					used := cpu1[i] - cpu0[i]
					total += used
					busiest = max(busiest, used)
					b.ReportMetric(used, fmt.Sprintf("master%d-cpu-s", i+1))
				}
				b.ReportMetric(busiest/(total/float64(len(masters))), "busiest/mean")
				b.ReportMetric(total/tasks*1e6, "redis-µs/task")
				b.ReportMetric((tasks/300.0)/took.Seconds(), "utilization")
			}
		})
	}
}

// startWorkers runs two workers of shards shards on rdb, sending SMS
// through sms, and returns the function that stops them.
func startWorkers(b *testing.B, rdb redis.UniversalClient, p *policies.Policies, shards int, sms countedSMS) (stop func()) {
	b.Helper()
	var stops []func()
	for range 2 {
		srv, err := worker.NewServer(rdb, worker.Config{
			ThrottleConfig: worker.ThrottleConfig{Shards: shards},
			Policies:       policies.Static(p), SMS: sms, Email: provider.LogProvider{}, Concurrency: 20,
			ShutdownTimeout: 5 * time.Second, AllowEviction: true,
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- srv.Run(ctx) }()
		stops = append(stops, func() {
			cancel()
			if err := <-ran; err != nil {
				b.Error(err)
			}
		})
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}

// countedSMS is an SMS provider that sends nothing and calls itself for
// each message.
type countedSMS func()

func (c countedSMS) SendSMS(context.Context, provider.Message[producer.SMS]) error {
	c()
	return nil
}

// mastersCPU returns the CPU seconds each of masters has used.
func mastersCPU(b *testing.B, masters []*redis.Client) []float64 {
	b.Helper()
	cpu := make([]float64, len(masters))
	for i, m := range masters {
		cpu[i], _ = redisLoad(b, m)
	}
	return cpu
}
