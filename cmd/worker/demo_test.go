package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// demoLimit is how long a demo may take: it must end by itself in under a
// minute.
const demoLimit = 60 * time.Second

// demoCommand returns the command run with args as a process of its own,
// with none of the environment variables it reads but those of env, and
// killed after demoLimit.
func demoCommand(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), demoLimit)
	t.Cleanup(cancel)
	return command(ctx, env, args...)
}

// exitCode returns the exit status of a finished command, failing t when
// it was killed at demoLimit or could not run.
func exitCode(t *testing.T, cmd *exec.Cmd, err error, stdout, stderr string) int {
	t.Helper()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		if ee.ExitCode() == -1 {
			t.Fatalf("demo killed after %v (%v); stdout:\n%s\nstderr:\n%s", demoLimit, err, stdout, stderr)
		}
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("run %v: %v", cmd.Args, err)
	}
	return 0
}

var demoQueueRE = regexp.MustCompile(`queue (sluice-demo-[0-9a-f]+) and limiter prefix (sluice-demo-[0-9a-f]+:) `)

// checkDemoKeys fails t if the demo whose output is stdout left keys in the
// test Redis.
func checkDemoKeys(t *testing.T, stdout string) {
	t.Helper()
	m := demoQueueRE.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("stdout names no queue and limiter prefix:\n%s", stdout)
	}
	redistest.CheckNoKeys(t, redistest.Client(t), m[1], m[2])
}

// lateSendWarning is the one line the demo may write on stderr: a send that
// a loaded machine (the race detector, miniredis's Lua in this process)
// held past half the margin is not sent but comes back, and the verdict
// still counts every task once and every window (FAIRNESS.md, "A late send
// is stamped again").
const lateSendWarning = `level=WARN msg="a send too late after its admission to restamp comes back"`

// checkDemoRun fails t unless stdout contains each of want and stderr is
// empty but for lateSendWarning lines, and, when the demo ran on the test
// Redis (env set), unless it left no key there. When t has failed, it logs
// stdout.
func checkDemoRun(t *testing.T, env []string, stdout, stderr string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(stdout, w) {
			t.Errorf("stdout does not contain %q", w)
		}
	}
	for line := range strings.Lines(stderr) {
		if !strings.Contains(line, lateSendWarning) {
			t.Errorf("stderr: %s", stderr)
			break
		}
		t.Logf("late send under load: %s", strings.TrimSpace(line))
	}
	if env != nil {
		checkDemoKeys(t, stdout)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s", stdout)
	}
}

// demoBackends are the Redis servers the demo runs on in these tests: none
// configured (it starts its own), and the test Redis through REDIS_URL.
var demoBackends = []struct {
	name string
	env  func(t *testing.T) []string
}{
	{"no Redis configured", func(*testing.T) []string { return nil }},
	{"REDIS_URL", func(t *testing.T) []string { return []string{"REDIS_URL=" + redistest.URL(t)} }},
}

// TestDemo: worker --demo, with nothing else, sends 60 SMS for three
// tenants, ends by itself well within a minute with a summary and a
// passing verdict, and exits 0. On a Redis of the user's it leaves no key.
func TestDemo(t *testing.T) {
	t.Parallel()
	for _, b := range demoBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			env := b.env(t)
			cmd := demoCommand(t, env, "--demo")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			took := time.Since(start)
			out := stdout.String()
			if got, want := exitCode(t, cmd, err, out, stderr.String()), 0; got != want {
				t.Errorf("exit status %d, want %d", got, want)
			}
			t.Logf("the demo took %v", took.Round(100*time.Millisecond))
			wantFirst := "redis: none configured (--redis, REDIS_URL), so an embedded miniredis runs at 127.0.0.1:"
			if env != nil {
				wantFirst = "redis: "
			}
			if !strings.HasPrefix(out, wantFirst) {
				t.Errorf("stdout does not start with %q", wantFirst)
			}
			if want := "\nverdict: PASS: every task sent exactly once; no window exceeded\n"; !strings.HasSuffix(out, want) {
				t.Errorf("stdout does not end with %q", want)
			}
			if strings.Contains(out, "\x1b[") {
				t.Errorf("stdout holds terminal escapes, but is not a terminal")
			}
			checkDemoRun(t, env, out, stderr.String(),
				"\ntasks: 59 SMS (acme 31, globex 19, initech 9) enqueued at once",
				"\nlate tenant: 1 SMS of umbrella, which has nothing waiting, enqueued once 19 of the others' are sent\n",
				"\ntime: 60 SMS at the limits take about 12.1s; the demo stops after 24.5s unless all are sent\n",
				"s  sent ", // progress lines: stdout is not a terminal
				"\nsummary: 60 of 60 tasks sent in ",
				"\ntenant    sent   throttled returns  tenant-per-second  provider\n",
				"\nacme      31/31  ",
				"\nglobex    19/19  ",
				"\ninitech   9/9    ",
				"\numbrella  1/1    ",
				"\nall       60/60  ",
				"\nlate tenant: umbrella's SMS, enqueued while ",
			)
		})
	}
}

// TestDemoInterrupted: SIGINT stops the demo cleanly once it runs: the
// worker shuts down, the summary shows what was sent, no verdict is given,
// the exit status is 130, and on a Redis of the user's no key is left.
func TestDemoInterrupted(t *testing.T) {
	t.Parallel()
	for _, b := range demoBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			env := b.env(t)
			cmd := demoCommand(t, env, "--demo")
			pipe, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Read up to the first progress line, then interrupt.
			var stdout bytes.Buffer
			r := bufio.NewReader(io.TeeReader(pipe, &stdout))
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
					t.Fatalf("stdout ended before any progress (%v):\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
				}
				if strings.Contains(line, "s  sent ") {
					break
				}
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			signalled := time.Now()
			_, _ = io.Copy(io.Discard, r)
			err = cmd.Wait()
			out := stdout.String()
			if got, want := exitCode(t, cmd, err, out, stderr.String()), 130; got != want {
				t.Errorf("exit status %d, want %d", got, want)
			}
			if took := time.Since(signalled); took > 10*time.Second {
				t.Errorf("the demo took %v to stop after SIGINT", took)
			}
			checkDemoRun(t, env, out, stderr.String(),
				"\ninterrupted: stopping the worker; tasks waiting in it go back to asynq\n",
				"\nsummary: ",
				"\nverdict: none, interrupted with ",
			)
		})
	}
}

// TestDemoUsageErrors: a bad --demo-tasks is a usage error, and a bad
// policies file or an unreachable Redis one line on stderr, before the
// demo starts.
func TestDemoUsageErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		code int
		want string // the start of stderr
	}{
		{"too few tasks", []string{"--demo", "--demo-tasks", "2"}, 2, "worker: --demo-tasks 2: give 3 to 1000\n"},
		{"too many tasks", []string{"--demo", "--demo-tasks", "1001"}, 2, "worker: --demo-tasks 1001: give 3 to 1000\n"},
		{"missing policies", []string{"--demo", "--policies", "nope.yaml"}, 1, "worker: policies: open nope.yaml: no such file or directory\n"},
		{"unreachable Redis", []string{"--demo", "--redis", unreachable}, 1, "worker: demo: Redis at redis://127.0.0.1:1 unreachable: dial tcp 127.0.0.1:1: "},
		{"bad Redis URL", []string{"--demo", "--redis", "http://127.0.0.1:1"}, 2, `worker: demo: --redis "http://127.0.0.1:1": scheme "http": use redis://`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkError(t, runWorker(t, tc.args...), tc.code, tc.want)
		})
	}
}
