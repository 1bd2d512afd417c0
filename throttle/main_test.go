package throttle_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

func TestMain(m *testing.M) {
	if prefix := os.Getenv(hammerEnv); prefix != "" {
		if err := hammer(prefix); err != nil {
			fmt.Fprintln(os.Stderr, "hammer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(redistest.Main(m))
}

// backend is a Redis a test runs against.
type backend struct {
	name string
	rdb  redis.UniversalClient
}

// backends returns the Redis setups every behaviour test runs on: a single
// node and a three-master Redis Cluster.
func backends(t *testing.T) []backend {
	t.Helper()
	return []backend{
		{"single", redistest.Client(t)},
		{"cluster", redistest.Cluster(t)},
	}
}

// eachBackend runs f as a parallel subtest on every backend, with a limiter
// whose keys start with a prefix of the subtest's own.
func eachBackend(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string)) {
	t.Helper()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			prefix := redistest.Prefix(t)
			f(t, b.rdb, throttle.NewLimiter(b.rdb, throttle.WithPrefix(prefix)), prefix)
		})
	}
}

// redisNow reads the Redis clock in microseconds.
func redisNow(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	// On a cluster TIME goes to a random node; all nodes here share a clock.
	tm, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return tm.UnixMicro()
}

// scores returns the admission times of key's entries, oldest first, in
// microseconds.
func scores(t *testing.T, rdb redis.UniversalClient, rkey string) []int64 {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(context.Background(), rkey, 0, -1).Result()
	if err != nil {
		t.Fatalf("ZRANGE %s: %v", rkey, err)
	}
	out := make([]int64, len(zs))
	for i, z := range zs {
		out[i] = int64(z.Score)
	}
	return out
}

func redisKey(tb testing.TB, l *throttle.Limiter, key string) string {
	tb.Helper()
	rkey, err := l.RedisKey(key)
	if err != nil {
		tb.Fatalf("RedisKey(%q): %v", key, err)
	}
	return rkey
}

func mustAllowN(t *testing.T, l *throttle.Limiter, key string, p throttle.Policy, n int) throttle.Decision {
	t.Helper()
	d, err := l.AllowN(context.Background(), key, p, n)
	if err != nil {
		t.Fatalf("AllowN(%q, %v, %d): %v", key, p, n, err)
	}
	return d
}

func rdbKeys(t *testing.T, rdb redis.UniversalClient, prefix string) []string {
	t.Helper()
	return redistest.Keys(t, rdb, prefix)
}
