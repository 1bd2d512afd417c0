package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
)

// workerBinTasks are the SMS of a BenchmarkWorkerBinary case, for 50
// tenants in turn.
const workerBinTasks = 20000

// BenchmarkWorkerBinary runs one `worker` process as a user runs it
// (--sms-log, --concurrency 10, the defaults otherwise) over 20,000 SMS
// that `enqueue bulk` put in Redis, on a Redis of its own: with policies
// that enforce nothing (tasks: {}), with two rules that never bind (a
// tenant's and the provider's, 100,000 a second), and with those and
// --fairness off. It reports tasks a second from the worker's start to
// the queue's end, and per task the Redis CPU and the worker process's
// CPU: what the limiter costs a user's deployment (issue 29, item 8).
// One iteration a case: run with -benchtime 1x.
func BenchmarkWorkerBinary(b *testing.B) {
	const rules = `
tasks:
  sms:send:
    - { name: tenant, scope: tenant, limit: 100000, window: 1s }
    - { name: provider, scope: global, limit: 100000, window: 1s }
`
	for _, tc := range []struct {
		name, policies string
		extra          []string
	}{
		{"none", "tasks: {}\n", nil},
		{"two-rules", rules, nil},
		{"two-rules-fcfs", rules, []string{"--fairness", "off"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				workerBinRun(b, tc.policies, tc.extra)
			}
		})
	}
}

// workerBinRun is one case of BenchmarkWorkerBinary.
func workerBinRun(b *testing.B, policyText string, extra []string) {
	rdb := redistest.OwnClient(b, 0)
	url := "redis://" + rdb.Options().Addr + "/0"
	enqueueBin, err := buildEnqueue()
	if err != nil {
		b.Fatal(err)
	}
	// Written first, as the worker would, so that enqueue uses sms:send.
	if err := layout.Ensure(context.Background(), rdb, "sluice:", layout.Default); err != nil {
		b.Fatal(err)
	}
	cliBulk(b, enqueueBin, url, "sluice:", workerBinTasks, 50)
	policyFile := writePolicies(b, policyText)
	redisCPU := func() float64 { return cliCPU(b, []*redis.Client{rdb})[0] }
	insp := asynq.NewInspectorFromRedisClient(rdb)
	cpu0 := redisCPU()
	start := time.Now()
	p := startWorkers(b, 1, append([]string{"--redis", url, "--policies", policyFile, "--sms-log"}, extra...)...)[0]
	waitFor(b, 5*time.Minute, "every SMS sent", nil, func() bool {
		q, err := insp.GetQueueInfo("sms:send")
		return err == nil && q.Pending+q.Active+q.Scheduled+q.Retry == 0 && q.Processed >= workerBinTasks
	})
	took := time.Since(start)
	cpu1 := redisCPU()
	workerCPU := cpuTime(b, p.cmd.Process.Pid)
	stopWorkers(b, p)
	b.ReportMetric(workerBinTasks/took.Seconds(), "tasks/s")
	b.ReportMetric((cpu1-cpu0)/workerBinTasks*1e6, "redis-µs/task")
	b.ReportMetric(float64(workerCPU.Microseconds())/workerBinTasks, "worker-µs/task")
	if q, err := insp.GetQueueInfo("sms:send"); err != nil || q.Archived > 0 {
		b.Errorf("queue sms:send after the run: %+v, %v; want nothing archived", q, err)
	}
}
