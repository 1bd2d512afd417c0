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
// a three-master cluster of its own (each master with a replica), with 6
// shards on a six-master one, and on one Redis, where the shards' cost
// shows without several servers sharing the cores. It reports each
// master's Redis CPU (user + system) during the drain, the busiest over
// the mean ("busiest/mean"; docs/SCALING.md promises at most 1.3 with
// shards), the CPU of all masters per task, and
// how close the drain came to the provider's rate ("utilization", ideal
// time over actual, from the workers' start) and to the pace the global
// rule allows ("paced": a send every (window + margin) ÷ limit, from the
// first send to the last). One iteration a case: run with -benchtime 1x.
func BenchmarkShardsDrain(b *testing.B) {
	p, err := policies.Parse(b.Name(), []byte(shardsDrainPolicies))
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		redis  string
		shards int
		moving bool // the demand in one shard at a time (drainPhases)
	}{{"cluster", 1, false}, {"cluster", 3, false}, {"cluster", 3, true}, {"cluster6", 6, false},
		{"single", 1, false}, {"single", 3, false}, {"single", 3, true}} {
		name := fmt.Sprintf("%s/shards=%d", tc.redis, tc.shards)
		if tc.moving {
			name += "/moving"
		}
		b.Run(name, func(b *testing.B) {
			var rdb redis.UniversalClient
			var addrs []string
			if tc.redis == "single" {
				one := redistest.OwnClient(b, 100)
				rdb, addrs = one, []string{one.Options().Addr}
			} else {
				c := redistest.StartReplicatedClusterOf(b, max(redistest.ClusterMasters, tc.shards))
				rdb, addrs = c.Client(b), c.Masters
			}
			lay := layout.Layout{Shards: tc.shards}
			if err := layout.Ensure(context.Background(), rdb, keyspace.DefaultPrefix, lay); err != nil {
				b.Fatal(err)
			}
			masters := make([]*redis.Client, len(addrs))
			for i, addr := range addrs {
				masters[i] = redis.NewClient(&redis.Options{Addr: addr})
				defer masters[i].Close()
			}
			for b.Loop() {
				drainOnce(b, rdb, masters, p, lay, tc.moving)
			}
		})
	}
}

// The trial of BenchmarkShardsDrain.
const (
	drainTenants = 300
	drainTasks   = 3000
	drainPhases  = 3 // with the demand moving: a phase per shard, the next at 2/3 of the last sent
)

// drainOnce drains drainTasks SMS of drainTenants tenants on rdb with two
// workers of layout lay, and reports the masters' CPU, their balance, the
// cost a task and the utilization. Moving, the tasks of each shard's
// tenants are enqueued in turn, the next shard's once two thirds of the
// tasks enqueued so far are sent.
func drainOnce(b *testing.B, rdb redis.UniversalClient, masters []*redis.Client, p *policies.Policies, lay layout.Layout, moving bool) {
	ctx := context.Background()
	phases := tenantPhases(lay, moving)
	pc := producer.NewClientFromRedisClient(rdb)
	enqueue := func(tenants []string) {
		for _, tenant := range tenants {
			if _, err := pc.EnqueueSMS(ctx, tenant, goodSMS); err != nil {
				b.Error(err)
				return
			}
		}
	}
	enqueue(phases[0])
	cpu0 := mastersCPU(b, masters)
	slowlogStart(b, masters)
	var sent, first, last atomic.Int64 // first and last: unix ns
	bins := newSendBins()
	done, next := make(chan struct{}), make(chan struct{}, len(phases))
	var due atomic.Int64 // the sends at which the next phase is enqueued; 0: none
	if len(phases) > 1 {
		due.Store(int64(len(phases[0])) * 2 / 3)
	}
	sms := countedSMS(func(tenant string) {
		at := time.Now()
		bins.send(at, lay.Shard(tenant))
		now := at.UnixNano()
		first.CompareAndSwap(0, now)
		last.Store(now)
		n := sent.Add(1)
		if n == drainTasks {
			close(done)
		}
		if d := due.Load(); d > 0 && n >= d && due.CompareAndSwap(d, 0) {
			next <- struct{}{}
		}
	})
	go func() {
		enqueued := len(phases[0])
		for i, ph := range phases[1:] {
			<-next
			bins.phase(time.Now())
			enqueue(ph)
			enqueued += len(ph)
			if i+2 < len(phases) {
				due.Store(int64(enqueued) * 2 / 3)
			}
		}
	}()
	start := time.Now()
	stop := startWorkers(b, rdb, p, lay.Shards, sms)
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		b.Fatalf("after 2 minutes %d of %d sent", sent.Load(), drainTasks)
	}
	took := time.Since(start)
	cpu1 := mastersCPU(b, masters)
	slowlogReport(b, masters)
	stop()
	reportDrain(b, cpu0, cpu1, took, time.Duration(last.Load()-first.Load()))
	bins.report(b, binWidth.Seconds()/drainSlot.Seconds())
}

// drainSlot is the pace of the drain's global rule: a send every
// (window + margin) ÷ limit.
const drainSlot = (time.Second + policies.DefaultMargin) / 300

// tenantPhases returns the tenants of the drain's tasks, a task each, in
// one phase; moving, in a phase per shard of lay.
func tenantPhases(lay layout.Layout, moving bool) [][]string {
	phases := make([][]string, 1)
	if moving {
		phases = make([][]string, drainPhases)
	}
	for i := range drainTasks {
		tenant := fmt.Sprintf("tenant-%03d", i%drainTenants)
		k := 0
		if moving {
			k = lay.Shard(tenant) % drainPhases
		}
		phases[k] = append(phases[k], tenant)
	}
	return phases
}

// reportDrain reports each master's CPU from cpu0 to cpu1, their balance,
// the CPU a task, and the utilization: against the provider's rate over
// took, from the workers' start, and against the pace over sending, from
// the first send to the last.
func reportDrain(b *testing.B, cpu0, cpu1 []float64, took, sending time.Duration) {
	var total, busiest float64
	for i := range cpu0 {
		used := cpu1[i] - cpu0[i]
		total += used
		busiest = max(busiest, used)
		b.ReportMetric(used, fmt.Sprintf("master%d-cpu-s", i+1))
	}
	b.ReportMetric(busiest/(total/float64(len(cpu0))), "busiest/mean")
	b.ReportMetric(total/drainTasks*1e6, "redis-µs/task")
	b.ReportMetric((drainTasks/300.0)/took.Seconds(), "utilization")
	b.ReportMetric(float64(drainTasks-1)*drainSlot.Seconds()/sending.Seconds(), "paced")
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

// countedSMS is an SMS provider that sends nothing and calls itself with
// each message's tenant.
type countedSMS func(tenant string)

func (c countedSMS) SendSMS(_ context.Context, m provider.Message[producer.SMS]) error {
	c(m.Tenant)
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
