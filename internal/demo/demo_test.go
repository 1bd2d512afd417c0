package demo

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/throttle"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// waitFor is how long a test waits for something before it fails; a
// passing test waits only as long as it must.
const waitFor = 30 * time.Second

// output is a Config.Out that tests can read while the demo writes, and
// that signals when a line containing mark has been written.
type output struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	mark   string
	marked chan struct{}
	once   sync.Once
}

func newOutput(mark string) *output { return &output{mark: mark, marked: make(chan struct{})} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, err := o.buf.Write(p)
	if o.mark != "" && strings.Contains(o.buf.String(), o.mark) {
		o.once.Do(func() { close(o.marked) })
	}
	return n, err
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// runResult is what one in-process run of the demo did.
type runResult struct {
	err  error
	out  string
	logs string
	took time.Duration
}

// run runs the demo with cfg, cancelling it when cancel receives, and
// fails t if it has not returned within waitFor after that.
func run(t *testing.T, cfg Config, out *output, cancel <-chan struct{}) runResult {
	t.Helper()
	var logs bytes.Buffer
	var logsMu sync.Mutex
	cfg.Out = out
	cfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&logsMu, &logs}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		select {
		case <-cancel:
			stop()
		case <-ctx.Done():
		}
	}()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- Run(ctx, cfg) }()
	var r runResult
	select {
	case r.err = <-done:
	case <-time.After(cfg.Timeout + waitFor):
		t.Fatalf("Run still running after %v; output:\n%s", cfg.Timeout+waitFor, out)
	}
	r.took = time.Since(start)
	logsMu.Lock()
	r.out, r.logs = out.String(), logs.String()
	logsMu.Unlock()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output:\n%s\nlogs:\n%s", r.out, r.logs)
		}
	})
	return r
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// backends are the Redis servers a run can use: the embedded one, the test
// Redis, a Redis Cluster and a master behind Sentinel (skipped without
// them). open returns the URL the run is given and, but for the embedded
// one, a client of the same Redis, where checkNoKeys looks.
var backends = []struct {
	name string
	open func(t *testing.T) (string, redis.UniversalClient)
}{
	{"embedded", func(*testing.T) (string, redis.UniversalClient) { return "", nil }},
	{"redis", func(t *testing.T) (string, redis.UniversalClient) {
		return redistest.URL(t), redistest.Client(t)
	}},
	{"cluster", func(t *testing.T) (string, redis.UniversalClient) {
		return "redis+cluster://" + redistest.ClusterAddrs(t)[0], redistest.Cluster(t)
	}},
	{"sentinel", func(t *testing.T) (string, redis.UniversalClient) {
		sentinels, master := redistest.Sentinel(t, 1)
		rdb := redis.NewClient(&redis.Options{Addr: master})
		t.Cleanup(func() { _ = rdb.Close() })
		return "redis+sentinel://" + sentinels[0] + "/0?master_name=" + redistest.SentinelMaster, rdb
	}},
}

var queueRE = regexp.MustCompile(`queue (sluice-demo-[0-9a-f]+) and limiter prefix (sluice-demo-[0-9a-f]+:) `)

// checkNoKeys fails t if the run whose output is out left keys in the
// Redis of rdb.
func checkNoKeys(t *testing.T, rdb redis.UniversalClient, out string) {
	t.Helper()
	m := queueRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the output names no queue and prefix:\n%s", out)
	}
	redistest.CheckNoKeys(t, rdb, m[1], m[2])
}

// TestRun: a short demo ends by itself, before the timeout computed from
// its policies, with a passing verdict, on the embedded Redis and on a real
// one, where it leaves no keys.
func TestRun(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			url, rdb := b.open(t)
			r := run(t, Config{RedisURL: url, Tasks: 9}, newOutput(""), nil)
			if r.err != nil {
				t.Fatalf("Run: %v", r.err)
			}
			for _, want := range []string{
				"policies: built-in demo policies: sms:send: tenant-per-second acme 4/1s, globex 2/1s, initech 1/1s; provider 5/1s for all tenants together\n",
				"tasks: 9 SMS (acme 5, globex 3, initech 1) enqueued at once",
				// The provider's 5 a second: 5 at once, 4 more 1.1 s later;
				// × 1.2 + 10 s.
				"\ntime: 9 SMS at the limits take about 1.1s; the demo stops after 11.3s unless all are sent\n\n",
				"summary: 9 of 9 tasks sent in ",
				"\nall      9/9   ",
				"\nverdict: PASS: every task sent exactly once; no window exceeded\n",
			} {
				if !strings.Contains(r.out, want) {
					t.Errorf("output does not contain %q", want)
				}
			}
			if !strings.HasSuffix(r.out, "no window exceeded\n") {
				t.Errorf("the verdict is not the last line")
			}
			if url == "" {
				if !strings.HasPrefix(r.out, "redis: none configured (--redis, REDIS_URL), so an embedded miniredis runs at 127.0.0.1:") {
					t.Errorf("the first line does not say an embedded Redis runs on loopback")
				}
			} else {
				if want := "redis: " + redisconn.Describe(url) + ", queue "; !strings.HasPrefix(r.out, want) {
					t.Errorf("the first line does not start with %q", want)
				}
				checkNoKeys(t, rdb, r.out)
			}
			if r.logs != "" {
				t.Errorf("the worker logged warnings:\n%s", r.logs)
			}
		})
	}
}

// lateRE reads the summary's line of the late tenant.
var lateRE = regexp.MustCompile(`\nlate tenant: umbrella's SMS, enqueued while (\d+) of the others' waited, was sent ([\d.]+)s after it, behind (\d+) of them\n`)

// TestRunLateTenant: in a run of 30 SMS, the late tenant's one is
// enqueued behind a backlog of the others' and reaches the provider ahead
// of nearly all of it: behind at most 4 of the others' (the slots given
// before it came, at most a lead ahead), where first come, first served
// would put it behind all of them. Counted by the provider's order of
// arrival.
func TestRunLateTenant(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			url, _ := b.open(t)
			r := run(t, Config{RedisURL: url, Tasks: 30}, newOutput(""), nil)
			if r.err != nil {
				t.Fatalf("Run: %v", r.err)
			}
			for _, want := range []string{
				"tasks: 29 SMS (acme 16, globex 9, initech 4) enqueued at once",
				"\nlate tenant: 1 SMS of umbrella, which has nothing waiting, enqueued once 9 of the others' are sent\n",
				"\numbrella  1/1  ",
			} {
				if !strings.Contains(r.out, want) {
					t.Errorf("output does not contain %q", want)
				}
			}
			m := lateRE.FindStringSubmatch(r.out)
			if m == nil {
				t.Fatalf("no line of the late tenant")
			}
			waiting, _ := strconv.Atoi(m[1])
			behind, _ := strconv.Atoi(m[3])
			if waiting < 10 || behind > 4 {
				t.Errorf("the late SMS came behind %d of the others' sends, with %d waiting; want at most 4 behind at least 10", behind, waiting)
			}
		})
	}
}

// TestRunTimeout: a demo that cannot send everything in time stops at its
// timeout with a failing verdict that says what was not sent.
func TestRunTimeout(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "slow.yaml")
	if err := os.WriteFile(path, []byte(`
tasks:
  sms:send:
    - {name: per-minute, scope: tenant, limit: 1, window: 1m}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	policyFile, err := policies.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, Config{Policies: policyFile, Tasks: 6, Timeout: time.Second}, newOutput(""), nil)
	if !errors.Is(r.err, ErrFailed) {
		t.Fatalf("Run = %v, want ErrFailed", r.err)
	}
	for _, want := range []string{
		"policies: " + path + ": sms:send: per-minute acme 1/1m0s, globex 1/1m0s, initech 1/1m0s\n",
		// acme's 3 at 1 a minute widened by 50 ms; Timeout replaces the
		// timeout computed from it.
		"\ntime: 6 SMS at the limits take about 120.1s; the demo stops after 1.0s unless all are sent\n",
		"time is up after 1.0s: stopping the worker\n",
		"\nverdict: FAIL: 3 of 6 tasks never sent (",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output does not contain %q", want)
		}
	}
	if !strings.Contains(r.out, "; asynq still holds 3 of the demo's tasks") {
		t.Errorf("the verdict does not say asynq still holds the unsent tasks")
	}
}

// TestRunInterrupted: cancelling the context stops the demo cleanly: the
// worker shuts down, the summary shows what was sent, no verdict is given,
// and on a real Redis no key is left.
func TestRunInterrupted(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			url, rdb := b.open(t)
			out := newOutput("s  sent ")
			r := run(t, Config{RedisURL: url, Tasks: 60, Timeout: 40 * time.Second}, out, out.marked)
			if !errors.Is(r.err, ErrInterrupted) {
				t.Fatalf("Run = %v, want ErrInterrupted", r.err)
			}
			for _, want := range []string{
				"\ninterrupted: stopping the worker; tasks waiting in it go back to asynq\n",
				"\nverdict: none, interrupted with ",
			} {
				if !strings.Contains(r.out, want) {
					t.Errorf("output does not contain %q", want)
				}
			}
			if strings.Contains(r.out, "verdict: PASS") || strings.Contains(r.out, "verdict: FAIL") {
				t.Errorf("an interrupted run gave a verdict")
			}
			// The first progress line comes after a second; the 60 tasks
			// take over ten.
			if r.took > 8*time.Second {
				t.Errorf("Run took %v to stop", r.took)
			}
			if url != "" {
				checkNoKeys(t, rdb, r.out)
			}
		})
	}
}

// TestRunRejectsTasks: a task count out of range is an error before
// anything starts.
func TestRunRejectsTasks(t *testing.T) {
	t.Parallel()
	for _, n := range []int{-1, MinTasks - 1, MaxTasks + 1} {
		var out bytes.Buffer
		err := Run(context.Background(), Config{Tasks: n, Out: &out})
		if err == nil || errors.Is(err, ErrFailed) {
			t.Errorf("Run with %d tasks = %v, want an error", n, err)
		}
		if out.Len() > 0 {
			t.Errorf("Run with %d tasks wrote %q", n, out.String())
		}
	}
}

// TestEmbeddedClock: on the embedded Redis, TIME follows the real clock and
// TTLs run down with it, so provider holds end and window keys expire as
// on Redis. miniredis freezes TTLs unless told otherwise.
func TestEmbeddedClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := openBroker(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	if b.embedded == nil {
		t.Fatal("no embedded Redis without a URL")
	}
	if !strings.HasPrefix(b.addr, "127.0.0.1:") {
		t.Errorf("embedded Redis at %s, want loopback", b.addr)
	}
	now, err := b.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(now).Abs(); d > time.Second {
		t.Errorf("TIME is %v off the clock", d)
	}

	l := throttle.NewLimiter(b.rdb)
	if err := l.Hold(ctx, "provider/sms:send", 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Allow(ctx, "window", throttle.Policy{Limit: 1, Window: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	windowKey, _ := l.RedisKey("window")
	deadline := time.Now().Add(waitFor)
	for {
		held, err := l.HeldFor(ctx, "provider/sms:send")
		if err != nil {
			t.Fatal(err)
		}
		n, err := b.rdb.Exists(ctx, windowKey).Result()
		if err != nil {
			t.Fatal(err)
		}
		if held == 0 && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: the hold has %v left and the window key exists: %v", waitFor, held, n == 1)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
