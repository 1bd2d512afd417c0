package redisproc

import (
	"context"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestStart starts a redis-server and stops it.
func TestStart(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server on PATH")
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
