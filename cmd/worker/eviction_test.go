package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestEvictingRedis: on a Redis whose maxmemory-policy is allkeys-lru,
// the worker exits 1 before its first line, with one line that names the
// policy, the fix and the flag; with --allow-eviction it starts, and
// warns once.
func TestEvictingRedis(t *testing.T) {
	t.Parallel()
	url := redistest.Own(t)
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.ConfigSet(context.Background(), "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	args := []string{"--redis", url, "--policies", filepath.Join("..", "..", "examples", "policies.yaml"), "--sms-log", "--email-log"}
	r := runWorker(t, args...)
	checkError(t, r, 1, `worker: the Redis may evict Sluice's keys: maxmemory-policy "allkeys-lru" at `)
	for _, want := range []string{"noeviction", "--allow-eviction"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q does not say %s", r.stderr, want)
		}
	}

	lines := startLines(t, append(args, "--allow-eviction"), "worker started")
	if n := strings.Count(strings.Join(lines, "\n"), `"maxmemory_policy"`); n != 1 {
		t.Errorf("%d warnings of the policy before the first line, want 1: %q", n, lines)
	}
}

// startLines runs the worker with args until it logs a line whose message
// is last, stops it, and returns its lines up to that one.
func startLines(t *testing.T, args []string, last string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := command(ctx, nil, args...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	scan := bufio.NewScanner(pipe)
	for scan.Scan() {
		lines = append(lines, scan.Text())
		var l struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal(scan.Bytes(), &l) == nil && l.Msg == last {
			break
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	go func() { _, _ = io.Copy(io.Discard, pipe) }()
	if err := cmd.Wait(); err != nil {
		t.Errorf("worker: %v; its lines: %q", err, lines)
	}
	return lines
}
