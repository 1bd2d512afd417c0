package worker_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// binsEnv, set to 1, makes BenchmarkShardsDrain log how many sends each
// 250 ms of a drain saw, and each shard each 100 ms, and when each later
// phase was enqueued: where its utilization goes.
const binsEnv = "SLUICE_BENCH_BINS"

// binWidth is the span of one count of sendBins, shardBinWidth of one
// count of a shard's.
const (
	binWidth      = 250 * time.Millisecond
	shardBinWidth = 100 * time.Millisecond
)

// sendBins records the times of a drain's sends and phases, when binsEnv
// is set. It is safe for concurrent use.
type sendBins struct {
	on     bool
	mu     sync.Mutex
	sends  []time.Time
	shards []int // of each send
	phases []time.Time
}

func newSendBins() *sendBins { return &sendBins{on: os.Getenv(binsEnv) == "1"} }

// send records a send at now, of a tenant of shard.
func (s *sendBins) send(now time.Time, shard int) {
	if s.on {
		s.mu.Lock()
		s.sends, s.shards = append(s.sends, now), append(s.shards, shard)
		s.mu.Unlock()
	}
}

// phase records a phase enqueued at now.
func (s *sendBins) phase(now time.Time) {
	if s.on {
		s.mu.Lock()
		s.phases = append(s.phases, now)
		s.mu.Unlock()
	}
}

// report logs the sends in each binWidth from the first, against pace,
// the sends a binWidth the rule allows, and each shard's in each
// shardBinWidth when there are more than one.
func (s *sendBins) report(b *testing.B, pace float64) {
	if !s.on || len(s.sends) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var phases []string
	for _, at := range s.phases {
		phases = append(phases, at.Sub(s.sends[0]).Round(10*time.Millisecond).String())
	}
	b.Logf("sends in each %v (the pace allows %.1f): %s; later phases enqueued at %s", binWidth, pace,
		s.counts(binWidth, -1), strings.Join(phases, ", "))
	if top := slices.Max(s.shards); top > 0 {
		for shard := 0; shard <= top; shard++ {
			b.Logf("shard %d, sends in each %v: %s", shard, shardBinWidth, s.counts(shardBinWidth, shard))
		}
	}
}

// counts returns the sends of shard (every shard: -1) in each width from
// the first send, spaced.
func (s *sendBins) counts(width time.Duration, shard int) string {
	n := int(s.sends[len(s.sends)-1].Sub(s.sends[0])/width) + 1
	counts := make([]string, n)
	bins := make([]int, n)
	for i, at := range s.sends {
		if shard < 0 || s.shards[i] == shard {
			bins[int(at.Sub(s.sends[0])/width)]++
		}
	}
	for i, c := range bins {
		counts[i] = fmt.Sprint(c)
	}
	return strings.Join(counts, " ")
}
