package throttle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// BenchmarkArrivalGuards reports Redis's own time per arrival (INFO
// commandstats, on a Redis of its own) of the fair lines' common case, a
// task admitted at once on two rules with room (keys of its own for each
// contender), with and without the three reads that guard it (the task's
// entry, its class's wake time, a lapsed grant): what those guarantees
// cost each task of the default worker (docs/LIMITER.md, "The targets").
// Run it with -count 3:
//
//	go test -run '^$' -bench ArrivalGuards -count 3 ./throttle
func BenchmarkArrivalGuards(b *testing.B) {
	rdb := redistest.OwnClient(b, 64)
	prefix := redistest.Prefix(b)
	ctx := context.Background()
	l := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	guarded := l.Lines(throttle.LinesConfig{})
	roomy := throttle.PerSecond(100_000)
	var seq atomic.Int64
	for _, c := range []struct {
		name  string
		lines *throttle.Lines
	}{{"guarded", guarded}, {"unguarded", throttle.LinesWithoutGuards(guarded)}} {
		b.Run(c.name, func(b *testing.B) {
			calls0, usec0 := commandStat(b, rdb, "evalsha")
			b.SetParallelism(16) // 32 callers on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tenant := "t" + strconv.Itoa(rand.IntN(50))
					turn, err := c.lines.Arrive(ctx, throttle.Arrival{
						Class: "sms:send", Tenant: tenant, Queue: "q", ID: fmt.Sprint("task-", seq.Add(1)),
						Checks: []throttle.LineCheck{
							{Check: throttle.Check{Key: c.name + ":tenant:" + tenant, Policy: roomy, Cost: 1}},
							{Check: throttle.Check{Key: c.name + ":provider", Policy: roomy, Cost: 1}, Shared: true},
						},
					})
					if err == nil && turn.Outcome != throttle.Admitted {
						err = fmt.Errorf("arrival %v, want admitted", turn.Outcome)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			calls1, usec1 := commandStat(b, rdb, "evalsha")
			if calls1 > calls0 {
				b.ReportMetric(float64(usec1-usec0)/float64(calls1-calls0), "redis-µs/call")
			}
		})
	}
}
