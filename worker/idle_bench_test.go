package worker_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/worker"
)

// BenchmarkIdleQueues measures what an idle worker costs its Redis as it
// serves more queues, as it will with shards (docs/SCALING.md, "Idle
// polling"): a worker with n empty queues runs for 5 s on a Redis of its
// own, and the bench reports that Redis's CPU (user + system) and the
// commands it ran, per second; queues=0 is the Redis alone, with no
// worker, what every other size's figure includes. One iteration a size:
// run with -benchtime 1x.
func BenchmarkIdleQueues(b *testing.B) {
	p, err := policies.Parse(b.Name(), []byte(perHour))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{0, 1, 3, 7, 13, 25} {
		b.Run(fmt.Sprintf("queues=%d", n), func(b *testing.B) {
			rdb := redistest.OwnClient(b, 0)
			queues := map[string]int{}
			for i := range n {
				queues[fmt.Sprintf("idle-%d", i)] = 1
			}
			srv, err := worker.NewServer(rdb, worker.Config{Policies: policies.Static(p), SMS: provider.LogProvider{},
				Email: provider.LogProvider{}, Queues: queues, AllowEviction: true})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			if n > 0 {
				go func() { done <- srv.Run(ctx) }()
			} else {
				close(done) // the Redis alone
			}
			time.Sleep(2 * time.Second) // started, and every loop past its first turn
			const span = 5 * time.Second
			for b.Loop() {
				cpu0, calls0 := redisLoad(b, rdb)
				time.Sleep(span)
				cpu1, calls1 := redisLoad(b, rdb)
				b.ReportMetric((cpu1-cpu0)/span.Seconds()*1e6, "redis-µs/s")
				b.ReportMetric(float64(calls1-calls0)/span.Seconds(), "commands/s")
			}
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// redisLoad returns the CPU seconds (user + system) the Redis of rdb has
// used, and the commands it has run.
func redisLoad(b *testing.B, rdb *redis.Client) (cpu float64, calls int64) {
	b.Helper()
	info, err := rdb.Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "used_cpu_user:"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f
		}
		if v, ok := strings.CutPrefix(line, "used_cpu_sys:"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f
		}
		if _, fields, ok := strings.Cut(line, ":calls="); ok && strings.HasPrefix(line, "cmdstat_") {
			n, _ := strconv.ParseInt(strings.SplitN(fields, ",", 2)[0], 10, 64)
			calls += n
		}
	}
	return cpu, calls
}
