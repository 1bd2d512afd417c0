// Package redistest gives tests a real Redis: the one named by REDIS_URL (or
// REDIS_ADDR) when set, otherwise a container started with testcontainers-go
// from the image named by REDIS_IMAGE (default DefaultImage), once per test
// binary. It also starts Redis Cluster nodes, masters with their
// sentinels, servers that listen only for TLS with an ACL user
// (StartTLS), and, for failover tests, masters with replicas and sentinels
// (StartSentinelGroup) and clusters whose masters have replicas
// (StartReplicatedCluster), as redis-server processes on loopback.
//
// Without a Redis, tests skip with a one-line reason, or fail when the
// environment variable CI is "true": in CI a skipped suite would pass
// without testing anything.
//
// A test package that uses it runs its tests through Main, which stops what
// was started:
//
//	func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"

	"github.com/sluicehq/sluice/internal/rediskeys"
	"github.com/sluicehq/sluice/internal/testneed"
)

// DefaultImage is the Redis image used when REDIS_IMAGE is not set.
const DefaultImage = "redis:7.4"

var (
	urlOnce  sync.Once
	redisURL string
	startErr error

	stopsMu sync.Mutex
	stops   []func()
)

// atExit has Main call stop after the tests.
func atExit(stop func()) {
	stopsMu.Lock()
	defer stopsMu.Unlock()
	stops = append(stops, stop)
}

// Main runs the tests of m, then stops the containers and processes the
// tests started. It returns the exit code for os.Exit.
func Main(m *testing.M) int {
	code := m.Run()
	stopsMu.Lock()
	defer stopsMu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	stops = nil
	return code
}

// unavailable skips tb, or fails it when CI is "true".
func unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	testneed.Missing(tb, format, args...)
}

// URL returns the URL of the shared test Redis, starting a container the
// first time when neither REDIS_URL nor REDIS_ADDR is set.
func URL(tb testing.TB) string {
	tb.Helper()
	urlOnce.Do(func() { redisURL, startErr = findOrStart() })
	if startErr != nil {
		unavailable(tb, "no Redis for tests: %v", startErr)
	}
	return redisURL
}

func findOrStart() (string, error) {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u, nil
	}
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		return "redis://" + a, nil
	}
	image := os.Getenv("REDIS_IMAGE")
	if image == "" {
		image = DefaultImage
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctr, err := tcredis.Run(ctx, image,
		testcontainers.WithCmd("redis-server", "--protected-mode", "no", "--save", "", "--appendonly", "no"))
	if ctr != nil {
		atExit(func() { _ = testcontainers.TerminateContainer(ctr) })
	}
	if err != nil {
		return "", fmt.Errorf("set REDIS_URL, or make Docker and the image %s available: %w", image, err)
	}
	return ctr.ConnectionString(ctx)
}

// Client returns a new client of the shared test Redis, closed when tb ends.
func Client(tb testing.TB) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(URL(tb))
	if err != nil {
		tb.Fatalf("redistest: parse Redis URL: %v", err)
	}
	rdb := redis.NewClient(opt)
	tb.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		tb.Fatalf("redistest: ping %s: %v", opt.Addr, err)
	}
	return rdb
}

// Prefix returns a fresh key prefix, so that tests sharing one Redis never
// see each other's keys.
func Prefix(tb testing.TB) string {
	tb.Helper()
	return "test-" + random() + ":"
}

// random returns 12 random hex digits, for names no other test uses.
func random() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Keys returns every Redis key that starts with prefix. With a cluster
// client it looks on every master.
func Keys(tb testing.TB, rdb redis.UniversalClient, prefix string) []string {
	tb.Helper()
	keys, err := rediskeys.Scan(context.Background(), rdb, prefix+"*")
	if err != nil {
		tb.Fatalf("redistest: scan %s*: %v", prefix, err)
	}
	return keys
}
