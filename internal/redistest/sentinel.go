package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redisproc"
)

// SentinelMaster is the name under which the sentinels that Sentinel starts
// monitor their master.
const SentinelMaster = "mymaster"

// Sentinel starts a Redis master and n sentinels that monitor it as
// SentinelMaster, with a quorum of a majority of them: redis-server
// processes of tb's own on loopback, stopped when tb ends. It returns the
// sentinels' addresses and the master's. The binary is REDIS_SERVER, or
// redis-server on PATH.
func Sentinel(tb testing.TB, n int) (sentinels []string, master string) {
	tb.Helper()
	bin, err := serverBinary()
	if err != nil {
		unavailable(tb, "no redis-server for Sentinel tests: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := redisproc.Start(ctx, bin)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(func() { _ = m.Close() })
	for range n {
		s, err := redisproc.StartSentinel(ctx, bin, SentinelMaster, m.Addr, n/2+1)
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		tb.Cleanup(func() { _ = s.Close() })
		sentinels = append(sentinels, s.Addr)
	}
	return sentinels, m.Addr
}
