package status

import (
	"context"
	"errors"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/retryset"
	"github.com/sluicehq/sluice/throttle"
)

// pageRead is one Redis read of a page: the windows of a tenant's task
// type (policies.Usage), a queue's retry set (retryset.Head) when queue is
// set, or the fair lines of shard PageConfig.Lines[shard]
// (throttle.Lines.Waiting) when lines is.
type pageRead struct {
	tenant, taskType string
	queue            string
	lines            bool
	shard            int
}

// readResult is what a pageRead got.
type readResult struct {
	pageRead
	usage []policies.RuleUsage
	retry retryset.Queue
	flows []throttle.WaitingFlow
	err   error
}

// errNotRead stands for a read that did not finish within the page's
// Timeout.
var errNotRead = errors.New("no answer in time")

// collect makes the reads of one page and gathers what the page shows.
// It returns when every read is done or ctx is: a read still under way
// then finishes in its goroutine (a Redis call started after the deadline
// is bounded by the client's timeouts, see worker.SyncHook), and holds its place
// in s.reads until it does, so that a Redis that hangs never has more than
// statusReads reads waiting on it.
func (s *statusPage) collect(ctx context.Context) statusData {
	start := time.Now()
	p := s.cfg.Policies.Current()
	tenants := s.cfg.Activity.Tenants()
	var reads []pageRead
	for _, t := range tenants {
		for _, tt := range t.TaskTypes {
			if len(p.Rules(tt)) > 0 {
				reads = append(reads, pageRead{tenant: t.Tenant, taskType: tt})
			}
		}
	}
	for _, q := range s.cfg.Queues {
		reads = append(reads, pageRead{queue: q})
	}
	for i := range s.cfg.Lines {
		reads = append(reads, pageRead{lines: true, shard: i})
	}
	results := make(chan readResult, len(reads)) // never blocks a late read
	for _, rd := range reads {
		go func() { results <- s.run(ctx, p, rd) }()
	}
	got := make(map[pageRead]readResult, len(reads))
wait:
	for range reads {
		select {
		case r := <-results:
			got[r.pageRead] = r
		case <-ctx.Done():
			break wait
		}
	}
	// The reads that finished as the time ran out are shown all the same.
	for len(got) < len(reads) {
		select {
		case r := <-results:
			got[r.pageRead] = r
			continue
		default:
		}
		break
	}
	for _, rd := range reads {
		if _, ok := got[rd]; !ok {
			got[rd] = readResult{pageRead: rd, err: errNotRead}
		}
	}
	return s.build(p, tenants, reads, got, time.Since(start))
}

// run makes one read, once a place in s.reads is free.
func (s *statusPage) run(ctx context.Context, p *policies.Policies, rd pageRead) readResult {
	select {
	case s.reads <- struct{}{}:
	case <-ctx.Done():
		return readResult{pageRead: rd, err: errNotRead}
	}
	defer func() { <-s.reads }()
	if ctx.Err() != nil {
		return readResult{pageRead: rd, err: errNotRead}
	}
	if rd.lines {
		flows, err := s.cfg.Lines[rd.shard].Waiting(ctx, statusFlows)
		return readResult{pageRead: rd, flows: flows, err: err}
	}
	if rd.queue != "" {
		rq, err := retryset.Head(ctx, s.ins, rd.queue, s.cfg.RetryTasks, s.cfg.RetryTasks)
		if errors.Is(err, asynq.ErrQueueNotFound) {
			err = nil // a queue that never held a task holds none
		}
		return readResult{pageRead: rd, retry: rq, err: err}
	}
	u, err := policies.Usage(ctx, s.rdb, s.cfg.Prefix, p, rd.taskType, rd.tenant)
	return readResult{pageRead: rd, usage: u, err: err}
}
