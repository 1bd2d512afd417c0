package integration_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/arrivals"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestSustainedLoad runs 8 worker processes at concurrency 20 against one
// limit of 40 a second for more than a minute, and counts, from the
// provider's side, the arrivals over the limit: there must be none.
func TestSustainedLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the load lasts more than a minute")
	}
	const (
		workers     = 8
		concurrency = 20
		limit       = 40 // a second
		tasks       = 2600
		tenants     = 10
		minSpan     = time.Minute
	)
	rawURL := redistest.URL(t)
	rdb := redistest.Client(t)
	queue := redistest.Queue(t, rdb)
	sink := newSMSSink(t)
	names := make([]string, tenants)
	for i := range names {
		names[i] = fmt.Sprintf("tenant-%d", i)
	}
	want := backlog(t, rdb, queue, tasks/tenants, names...)
	procs := startWorkers(t, workers, "--redis", rawURL, "--policies", limits{global: limit}.policies(t),
		"--sms-webhook", sink.srv.URL, "--queues", queue+"=1", "--prefix", redistest.Prefix(t),
		"--concurrency", fmt.Sprint(concurrency), "--log-level", "warn")

	start := time.Now()
	waitDrained(t, rdb, queue, 3*time.Minute)
	drained := time.Since(start)
	stopWorkers(t, procs...)

	rs := sink.receipts()
	checkDelivered(t, rs, want, nil)
	times := make([]time.Time, len(rs))
	for i, r := range rs {
		times[i] = r.At
	}
	if over := arrivals.OverLimit(times, time.Second, limit); over > 0 {
		t.Errorf("%d of %d arrivals over the limit of %d a second; the densest window:\n%s", over, len(rs), limit, densest(rs, time.Second))
	}
	if len(rs) == 0 {
		t.Fatal("nothing reached the provider")
	}
	span := rs[len(rs)-1].At.Sub(rs[0].At)
	if span < minSpan {
		t.Errorf("the load lasted %v at the provider, want at least %v: send more tasks", span, minSpan)
	}
	// The margin widens each 1 s window by 50 ms: 40 in 1.05 s at best.
	ideal := time.Duration(float64(len(rs)-limit) / limit * 1.05 * float64(time.Second))
	t.Logf("%d workers × %d: %d tasks in %v at the provider (%v after the workers started), the most in a 1 s window %d of %d, none over; utilization %.3f of the limit with its margin",
		workers, concurrency, len(rs), span.Round(10*time.Millisecond), drained.Round(10*time.Millisecond),
		arrivals.MaxInWindow(times, time.Second), limit, ideal.Seconds()/span.Seconds())
}
