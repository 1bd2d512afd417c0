package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// runMain is the environment variable that makes the test binary run the
// command's main instead of the tests: the tests run the command as a
// process, with its real exit status and output.
const runMain = "SLUICE_TEST_RUN_WORKER_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMain) == "1" {
		main()
		os.Exit(0) // main returned without os.Exit: not expected
	}
	os.Exit(redistest.Main(m))
}

// unreachable is a Redis URL where nothing listens: loopback port 1.
const unreachable = "redis://127.0.0.1:1"

// result is what one run of the command did.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// command returns the command run with args as a process of its own, with
// none of the environment variables it reads but those of env, killed when
// ctx is done.
func command(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDIS_URL=") && !strings.HasPrefix(kv, "SLUICE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// GORACE: a race-enabled binary otherwise sleeps 1 s at exit.
	cmd.Env = append(cmd.Env, runMain+"=1", "GORACE=atexit_sleep_ms=0")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// runWorker runs the command with args as a process of its own, with none of
// the environment variables it reads, and kills it after 30 s: these tests
// cover only what happens before a worker starts.
func runWorker(t *testing.T, args ...string) result {
	t.Helper()
	return runWorkerEnv(t, nil, args...)
}

// runWorkerEnv is runWorker with the environment variables of env set.
func runWorkerEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := command(ctx, env, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run worker %q: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("worker %q still running after 30 s; stderr:\n%s", args, r.stderr)
	}
	return r
}

// checkError fails t unless r exited with code, having written nothing on
// stdout and one line on stderr that starts with want.
func checkError(t *testing.T, r result, code int, want string) {
	t.Helper()
	if got := r.code; got != code {
		t.Errorf("exit status = %d, want %d", got, code)
	}
	if !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr = %q, want one line starting %q", r.stderr, want)
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q, want nothing", r.stdout)
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--help", "-h"} {
		t.Run(flag, func(t *testing.T) {
			t.Parallel()
			r := runWorker(t, flag)
			if got, want := r.code, 0; got != want {
				t.Errorf("exit status = %d, want %d", got, want)
			}
			out := r.stdout
			if r.stderr != "" {
				t.Errorf("stderr = %q, want nothing: the usage goes to stdout", r.stderr)
			}
			for _, want := range []string{"usage: worker --redis URL --policies FILE", "--sms-webhook URL", "[$SLUICE_POLICIES]",
				"SLUICE_SMTP_PASSWORD_FILE", "SLUICE_SMS_WEBHOOK_TOKEN_FILE"} {
				if !strings.Contains(out, want) {
					t.Errorf("output does not contain %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "--smtp-password") {
				t.Errorf("output offers --smtp-password, a secret in a flag:\n%s", out)
			}
		})
	}
}

// TestStartupErrors: each is one line on stderr, naming what is wrong, and
// the worker never starts.
func TestStartupErrors(t *testing.T) {
	t.Parallel()
	policies := filepath.Join("..", "..", "examples", "policies.yaml")
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.yaml")
	badYAML := filepath.Join(dir, "bad.yaml")
	misspelled := filepath.Join(dir, "misspelled.yaml")
	fractional := filepath.Join(dir, "fractional.yaml")
	for path, text := range map[string]string{
		badYAML:    "tasks: [\n",
		misspelled: "tasks:\n  sms:send: []\n  sms:sned:\n    - {name: a, scope: tenant, limit: 4, window: 1s}\n",
		fractional: "tasks:\n  sms:send:\n    - {name: a, scope: tenant, limit: 4.9, window: 1s}\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// logs are the providers' flags of a worker that gets past them.
	logs := []string{"--sms-log", "--email-log"}
	cases := []struct {
		name string
		args []string
		code int
		want string // the start of stderr
	}{
		{"bad flag", []string{"--nope"}, 2, "worker: flag provided but not defined: -nope\n"},
		{"bad flag value", []string{"--concurrency", "many"}, 2, `worker: invalid value "many" for flag -concurrency: parse error` + "\n"},
		{"bad log level", []string{"--log-level", "loud"}, 2, `worker: --log-level "loud": use debug, info, warn or error` + "\n"},
		{"SMS only with --queues", []string{"--redis", unreachable, "--policies", policies, "--sms-log", "--queues", "a=1"}, 2,
			"worker: --queues names the queues, which may hold sms:send and email:send tasks alike: it needs a provider for each (without --queues the worker serves only the queues of the types it has a provider for)\n"},
		{"email only with --queues", []string{"--redis", unreachable, "--policies", policies, "--email-log", "--queues", "a=1"}, 2,
			"worker: --queues names the queues, which may hold "},
		{"no provider at all", []string{"--redis", unreachable, "--policies", policies}, 2,
			"worker: no provider: set --sms-webhook URL (SLUICE_SMS_WEBHOOK) or --sms-log for SMS, --smtp-addr HOST:PORT (SLUICE_SMTP_ADDR) or --email-log for email, or both\n"},
		{"an argument left over", append([]string{"--redis", unreachable, "--policies", policies, "extra"}, logs...), 2, `worker: unexpected argument "extra"`},
		{"a flag after an argument", append([]string{"--redis", unreachable, "--policies", policies, "extra", "--concurrency", "3"}, logs...), 2, `worker: unexpected argument "extra" (then "--concurrency", "3", `},
		{"no policies", append([]string{"--redis", unreachable}, logs...), 2, "worker: no policies: set --policies or SLUICE_POLICIES\n"},
		{"missing policies file", append([]string{"--redis", unreachable, "--policies", missing}, logs...), 1, "worker: policies: open " + missing + ": no such file or directory\n"},
		{"policies file is a directory", append([]string{"--redis", unreachable, "--policies", dir}, logs...), 1, "worker: policies: read " + dir + ": is a directory\n"},
		{"policies not YAML", append([]string{"--redis", unreachable, "--policies", badYAML}, logs...), 1, "worker: " + badYAML + ": "},
		{"policies with a misspelled task type", append([]string{"--redis", unreachable, "--policies", misspelled}, logs...), 1,
			"worker: " + misspelled + `: invalid policies: line 3: task type "sms:sned" (did you mean sms:send?): no worker handles it, so its rules would never apply; ` +
				"the known types are email:send, sms:send: list a type of your own under extra_task_types\n"},
		{"policies with a fractional limit", append([]string{"--redis", unreachable, "--policies", fractional}, logs...), 1,
			"worker: " + fractional + ": invalid policies: sms:send: rule 1 (a): limit: 4.9 is not a whole number: a window admits whole tasks; write 4 or 5\n"},
		{"bad queues", append([]string{"--redis", unreachable, "--policies", policies, "--queues", "a=x"}, logs...), 2, "worker: "},
		{"queue with braces", append([]string{"--redis", unreachable, "--policies", policies, "--queues", "a}{b=1"}, logs...), 2,
			`worker: --queues: queue "a}{b" is not 1 to 64 letters, digits, '.', '_', ':' and '-', starting with a letter or digit` + "\n"},
		{"queue with a newline", append([]string{"--redis", unreachable, "--policies", policies, "--queues", "a\nb=1"}, logs...), 2,
			`worker: --queues: queue "a\nb" is not 1 to 64 letters, digits, '.', '_', ':' and '-', starting with a letter or digit` + "\n"},
		{"zero check interval", []string{"--check-interval", "0s"}, 2, "worker: --check-interval 0s: must be more than 0\n"},
		{"no concurrency", []string{"--concurrency", "0"}, 2, "worker: --concurrency 0: must be at least 1\n"},
		{"negative shards", []string{"--shards", "-1"}, 2, "worker: --shards -1: must be from 1 to 256, or 0 for the layout Redis names\n"},
		{"too many shards", []string{"--shards", "257"}, 2, "worker: --shards 257: must be from 1 to 256, or 0 for the layout Redis names\n"},
		{"zero provider hold cap", []string{"--max-provider-hold", "0s"}, 2, "worker: --max-provider-hold 0s: must be more than 0\n"},
		{"negative provider hold cap", []string{"--max-provider-hold", "-1m"}, 2, "worker: --max-provider-hold -1m0s: must be more than 0\n"},
		{"bad provider hold", []string{"--provider-hold", "everyone"}, 2, `worker: --provider-hold "everyone": use account or tenant` + "\n"},
		{"STARTTLS without SMTP", []string{"--smtp-starttls", "off"}, 2, "worker: --smtp-from, --smtp-user, --smtp-starttls and SLUICE_SMTP_PASSWORD need --smtp-addr (SLUICE_SMTP_ADDR)\n"},
		{"two SMS providers", []string{"--sms-log", "--sms-webhook", "http://127.0.0.1:1"}, 2, "worker: --sms-webhook and --sms-log both choose the SMS provider; give one\n"},
		{"no Redis", append([]string{"--policies", policies}, logs...), 2, "worker: no Redis: set --redis or REDIS_URL\n"},
		{"bad Redis URL", append([]string{"--policies", policies, "--redis", "http://127.0.0.1:1"}, logs...), 2, `worker: --redis "http://127.0.0.1:1": scheme "http": use redis://, redis+cluster:// or redis+sentinel:// (rediss for TLS: rediss://, rediss+cluster://, rediss+sentinel://)` + "\n"},
		{"unreachable Redis", append([]string{"--policies", policies, "--redis", unreachable}, logs...), 1, "worker: Redis at redis://127.0.0.1:1 unreachable: dial tcp 127.0.0.1:1: "},
		{"Sentinel URL without master", append([]string{"--policies", policies, "--redis", "redis+sentinel://127.0.0.1:1/0"}, logs...), 2, `worker: --redis "redis+sentinel://127.0.0.1:1/0": no master_name: name the master the sentinels monitor, as in redis+sentinel://127.0.0.1:1/0?master_name=mymaster` + "\n"},
		{"unreachable cluster", append([]string{"--policies", policies, "--redis", "redis+cluster://:s3cret@127.0.0.1:1"}, logs...), 1, "worker: Redis Cluster at redis+cluster://:xxxxx@127.0.0.1:1 unreachable: dial tcp 127.0.0.1:1: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runWorker(t, tc.args...)
			checkError(t, r, tc.code, tc.want)
			// The ping gives up after 5 s; a refused connection should
			// not take that long.
			if r.took > 4*time.Second {
				t.Errorf("took %v", r.took)
			}
		})
	}
}
