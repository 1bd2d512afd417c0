package redisproc

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testneed"
)

// TestStart starts a redis-server and stops it.
func TestStart(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil {
		testneed.Missing(t, "no redis-server on PATH")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	srv, err := Start(ctx, "redis-server")
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping %s: %v", srv.URL(), err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.exited:
	default:
		t.Errorf("redis-server on %s still runs after Close", srv.Addr)
	}
	if c, err := net.DialTimeout("tcp", srv.Addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Close", srv.Addr)
	}
	if _, err := os.Stat(srv.dir); !os.IsNotExist(err) {
		t.Errorf("directory %s left behind: %v", srv.dir, err)
	}
}

func TestStartMissingBinary(t *testing.T) {
	t.Parallel()
	if _, err := Start(t.Context(), "no-such-redis-server"); err == nil {
		t.Error("StartServer with a missing binary: no error")
	}
}

// TestStartSentinel starts a master and a sentinel that monitors it, and
// asks the sentinel for the master's address.
func TestStartSentinel(t *testing.T) {
	t.Parallel()
	ctx, master := startServer(t)
	sentinel, err := StartSentinel(ctx, "redis-server", "mymaster", master.Addr, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sentinel.Close() })
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr, MaxRetries: -1})
	defer sc.Close()
	got, err := sc.GetMasterAddrByName(ctx, "mymaster").Result()
	if err != nil {
		t.Fatalf("sentinel %s: get-master-addr-by-name mymaster: %v", sentinel.Addr, err)
	}
	host, port, _ := net.SplitHostPort(master.Addr)
	if len(got) != 2 || got[0] != host || got[1] != port {
		t.Errorf("sentinel %s names master %q, want %s", sentinel.Addr, got, master.Addr)
	}
	if _, err := sc.GetMasterAddrByName(ctx, "other").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("sentinel %s: get-master-addr-by-name other: %v, want redis.Nil", sentinel.Addr, err)
	}
}

func TestStartSentinelBadMaster(t *testing.T) {
	t.Parallel()
	if _, err := StartSentinel(t.Context(), "redis-server", "mymaster", "no-port", 1); err == nil {
		t.Error("StartSentinel with a master address without port: no error")
	}
}

// TestKill kills a redis-server as a crash would: it stops answering at
// once, and its log stays until Close.
func TestKill(t *testing.T) {
	t.Parallel()
	_, srv := startServer(t)
	srv.Kill()
	select {
	case <-srv.exited:
	default:
		t.Errorf("redis-server on %s still runs after Kill", srv.Addr)
	}
	if c, err := net.DialTimeout("tcp", srv.Addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Kill", srv.Addr)
	}
	if log := srv.Log(); !strings.Contains(log, "Ready to accept connections") {
		t.Errorf("the log after Kill does not say the server was ready:\n%s", log)
	}
	srv.Kill() // again: nothing to do
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if log := srv.Log(); log != "" {
		t.Errorf("the log is still there after Close:\n%s", log)
	}
}

// startServer starts a redis-server for t, closed when t ends, and returns
// a context that ends 30 s later, or with t; it skips t without
// redis-server on PATH.
func startServer(t *testing.T) (context.Context, *Server) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		testneed.Missing(t, "no redis-server on PATH")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	srv, err := Start(ctx, "redis-server")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return ctx, srv
}
