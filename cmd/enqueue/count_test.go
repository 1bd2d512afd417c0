package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisproc"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/syncbuf"
	"github.com/sluicehq/sluice/internal/testneed"
)

// maxRSS is the most memory, in bytes, that an enqueue process may reach
// whatever its input: issue 27 measured 6.3 GB for --count 100000000.
const maxRSS = 100 << 20

// command is the enqueue command as a process of its own: the test binary
// run as main (see TestMain), with its output in stdout and stderr.
type command struct {
	cmd            *exec.Cmd
	stdout, stderr syncbuf.Buffer
}

// start starts the command with args.
func start(t *testing.T, args ...string) *command {
	t.Helper()
	c := &command{cmd: exec.Command(os.Args[0], args...)}
	c.cmd.Env = append(os.Environ(), asMain+"=1")
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.cmd.Process.Kill(); _ = c.cmd.Wait() })
	return c
}

// peakRSS returns the process's peak resident memory in bytes (VmHWM),
// or 0 once it has exited.
func (c *command) peakRSS() int64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// wait waits for the process to exit, at most d, and returns its status.
func (c *command) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		_ = err // an exit status other than 0; ExitCode reads it
	case <-time.After(d):
		t.Fatalf("still running %v later; stderr so far:\n%.2000s", d, c.stderr.String())
	}
	return c.cmd.ProcessState.ExitCode()
}

// TestCountStreams: enqueue --count 100000000 sends tasks to Redis from
// the start, holds under maxRSS, and stops at once on SIGINT with one
// line, not a line per task left.
func TestCountStreams(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	q := redistest.Queue(t, rdb)
	c := start(t, "sms", "--redis", redistest.URL(t), "--queue", q, "--tenant", "acme",
		"--to", "+15551234567", "--body", "hi", "--count", "100000000")
	var peak int64
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		peak = max(peak, c.peakRSS())
		n, err := rdb.LLen(context.Background(), "asynq:{"+q+"}:pending").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n >= 2000 || peak > maxRSS || time.Now().After(deadline) {
			t.Logf("%d tasks pending, peak RSS %d MiB", n, peak>>20)
			break
		}
	}
	if peak > maxRSS {
		t.Errorf("peak RSS = %d MiB, want at most %d MiB", peak>>20, maxRSS>>20)
	}
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if got, want := c.wait(t, 10*time.Second), 1; got != want {
		t.Errorf("exit status = %d, want %d", got, want)
	}
	errLines := strings.Split(strings.TrimSuffix(c.stderr.String(), "\n"), "\n")
	if len(errLines) != 1 || !strings.HasPrefix(errLines[0], "enqueue: interrupted at task ") || !strings.HasSuffix(errLines[0], " tasks after it not enqueued") {
		t.Errorf("stderr = %.1000q, want one line saying where it was interrupted", c.stderr.String())
	}
	if !strings.HasPrefix(c.stdout.String(), "enqueued ") || !strings.HasSuffix(c.stdout.String(), " of 100000000 sms tasks for tenant acme on queue "+q+"\n") {
		t.Errorf("stdout = %q, want the summary", c.stdout.String())
	}
}

// TestCountStopsWhenRedisGoes: when Redis dies part-way, enqueue --count
// stops at the first failed task with its error and one line saying
// where, rather than try every task left.
func TestCountStopsWhenRedisGoes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	bin := os.Getenv("REDIS_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	srv, err := redisproc.Start(ctx, bin)
	if err != nil {
		testneed.Missing(t, "no redis-server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })

	type outcome struct {
		code           int
		stdout, stderr string
	}
	done := make(chan outcome, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		code := run(ctx, []string{"sms", "--redis", "redis://" + srv.Addr + "/0", "--tenant", "acme",
			"--to", "+15551234567", "--body", "hi", "--count", "1000000"}, strings.NewReader(""), &stdout, &stderr)
		done <- outcome{code, stdout.String(), stderr.String()}
	}()
	// Without --queue, and with no worker yet to write the layout, an SMS
	// goes to default.
	for n, start := int64(0), time.Now(); n < 500; time.Sleep(10 * time.Millisecond) {
		if n, err = rdb.LLen(ctx, "asynq:{default}:pending").Result(); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("%d tasks pending in sms:send after a minute, want 500", n)
		}
	}
	_ = srv.Close()
	var got outcome
	select {
	case got = <-done:
	case <-time.After(time.Minute):
		t.Fatal("enqueue still running a minute after Redis stopped")
	}
	if got.code != 1 {
		t.Errorf("exit status = %d, want 1", got.code)
	}
	errLines := strings.Split(strings.TrimSuffix(got.stderr, "\n"), "\n")
	if len(errLines) != 2 || !strings.HasPrefix(errLines[0], "enqueue: task ") ||
		!strings.HasPrefix(errLines[1], "enqueue: stopped at task ") || !strings.HasSuffix(errLines[1], " tasks after it not enqueued") {
		t.Errorf("stderr = %.2000q, want the error of the first failed task, then where enqueue stopped", got.stderr)
	}
	if !strings.HasSuffix(got.stdout, " of 1000000 sms tasks for tenant acme on queue default\n") {
		t.Errorf("stdout = %q, want the summary", got.stdout)
	}
}
