package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// unreachable is a Redis URL where nothing listens: loopback port 1.
const unreachable = "redis://127.0.0.1:1"

// testPolicies is the policies file of the tests: windows of an hour or a
// day, so that nothing leaves them while a test runs (the default margin,
// 50 ms, widens each).
const testPolicies = `
tasks:
  sms:send:
    - {name: per-hour, scope: tenant, limit: 5, window: 1h, tenants: {big: {limit: 8}}}
    - {name: provider, scope: global, limit: 100, window: 1h}
  email:send:
    - {name: daily, scope: tenant, algorithm: gcra, limit: 10, window: 1d}
`

// result is what one run of the command did.
type result struct {
	code           int
	stdout, stderr string
}

// admin runs the command with args and stdin as its standard input.
func admin(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// writeFile writes content to a file in a directory of the test's own and
// returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// windows is a limiter on the test Redis with keys of the test's own, and
// the test policies.
type windows struct {
	rdb      *redis.Client
	prefix   string
	policies *policies.Policies
	path     string // the policies file
	limiter  *throttle.Limiter
}

// newWindows returns windows with a fresh prefix, whose keys are deleted
// when the test ends.
func newWindows(t *testing.T) *windows {
	t.Helper()
	rdb := redistest.Client(t)
	w := &windows{rdb: rdb, prefix: redistest.Prefix(t), path: writeFile(t, testPolicies)}
	var err error
	if w.policies, err = policies.Load(w.path); err != nil {
		t.Fatal(err)
	}
	w.limiter = throttle.NewLimiter(rdb, throttle.WithPrefix(w.prefix))
	t.Cleanup(func() {
		if keys := redistest.Keys(t, rdb, w.prefix); len(keys) > 0 {
			if err := rdb.Del(context.Background(), keys...).Err(); err != nil {
				t.Errorf("delete limiter keys: %v", err)
			}
		}
	})
	return w
}

// send asks the limiter for n tasks of taskType for tenant, as the
// Throttle middleware does (AllowInLine over every rule, with the task's
// ID), and returns how many were admitted; the others took a place in
// line.
func (w *windows) send(t *testing.T, taskType, tenant string, n int) (admitted int) {
	t.Helper()
	var checks []throttle.Check
	for _, a := range w.policies.For(taskType, tenant) {
		checks = append(checks, a.Check)
	}
	for i := range n {
		md, err := w.limiter.AllowInLine(context.Background(), fmt.Sprintf("%s-%s-%d", taskType, tenant, i), checks)
		if err != nil {
			t.Fatalf("AllowInLine: %v", err)
		}
		if md.Allowed {
			admitted++
		}
	}
	return admitted
}

// snapshot returns every key of the test's prefix with what it holds:
// members and scores of a sorted set, fields of a hash.
func (w *windows) snapshot(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, key := range redistest.Keys(t, w.rdb, w.prefix) {
		switch typ := w.rdb.Type(ctx, key).Val(); typ {
		case "zset":
			out[key] = fmt.Sprint(w.rdb.ZRangeWithScores(ctx, key, 0, -1).Val())
		case "hash":
			out[key] = fmt.Sprint(w.rdb.HGetAll(ctx, key).Val())
		default:
			out[key] = typ
		}
	}
	return out
}

// without returns snap without the Redis keys of the limiter keys given.
func without(snap map[string]string, limiterKeys ...string) map[string]string {
	out := map[string]string{}
	for k, v := range snap {
		gone := false
		for _, lk := range limiterKeys {
			// <prefix>{limits}:<key>, gcra:<key> (see throttle.RedisKeyFor)
			// or p:<key>, a log's frontier note.
			gone = gone || strings.HasSuffix(k, ":"+lk)
		}
		if !gone {
			out[k] = v
		}
	}
	return out
}

// lines returns s's lines, each with its runs of spaces made one.
func lines(s string) []string {
	var out []string
	for line := range strings.Lines(s) {
		out = append(out, strings.Join(strings.Fields(line), " "))
	}
	return out
}

func TestHelp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want []string // in stdout
	}{
		{"--help", []string{"--help"}, []string{"usage: admin usage", "admin throttled", "Exit status"}},
		{"help", []string{"help"}, []string{"usage: admin usage"}},
		{"usage --help", []string{"usage", "--help"}, []string{"usage: admin usage", "--tenant", "[$REDIS_URL]", "[$SLUICE_POLICIES]", "[$SLUICE_PREFIX]", "--json"}},
		{"reset -h", []string{"reset", "-h"}, []string{"--rule", "--yes"}},
		{"validate --help", []string{"validate", "--help"}, []string{"admin validate  FILE"}},
		{"throttled --help", []string{"throttled", "--help"}, []string{"--queue", "--limit"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := admin(t, "", tc.args...)
			if got, want := r.code, 0; got != want {
				t.Errorf("exit status = %d, want %d", got, want)
			}
			for _, want := range tc.want {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("stdout does not contain %q:\n%s", want, r.stdout)
				}
			}
			if r.stderr != "" {
				t.Errorf("stderr = %q, want nothing", r.stderr)
			}
		})
	}
}

// TestUsageErrors: each is one line on stderr and exit status 2, found
// before Redis is asked (the URL is unreachable or cannot be read).
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	path := writeFile(t, testPolicies)
	usage := []string{"usage", "--redis", unreachable, "--policies", path}
	reset := []string{"reset", "--redis", unreachable, "--policies", path, "--yes"}
	cases := []struct {
		name string
		args []string
		want string // the whole of stderr
	}{
		{"no command", nil, "admin: name a command: usage, reset, reset-global, reset-lines, validate, throttled, holds, unhold or layout (see --help)\n"},
		{"unknown command", []string{"stats"}, `admin: unknown command "stats": name usage, reset, reset-global, reset-lines, validate, throttled, holds, unhold or layout (see --help)` + "\n"},
		{"bad flag", []string{"usage", "--nope"}, "admin usage: flag provided but not defined: -nope\n"},
		{"argument", append(usage, "--tenant", "acme", "--json", "sms:send"), `admin usage: unexpected argument "sms:send": only flags are taken (see --help)` + "\n"},
		{"flag after an argument", append(reset, "acme", "--tenant", "acme"), `admin reset: unexpected argument "acme" (then "--tenant", "acme"): flags go before arguments` + "\n"},
		{"throttled second queue", []string{"throttled", "--redis", unreachable, "--queue", "default", "low"},
			`admin throttled: unexpected argument "low": only flags are taken (see --help)` + "\n"},
		{"usage bad URL", append(usage[:1:1], "--redis", "http://127.0.0.1:1", "--policies", path, "--tenant", "acme"),
			`admin usage: --redis "http://127.0.0.1:1": scheme "http": use redis://, redis+cluster:// or redis+sentinel:// (rediss for TLS: rediss://, rediss+cluster://, rediss+sentinel://)` + "\n"},
		{"reset bad URL", []string{"reset", "--redis", "http://127.0.0.1:1", "--policies", path, "--tenant", "acme", "--yes"},
			`admin reset: --redis "http://127.0.0.1:1": scheme "http": use redis://, redis+cluster:// or redis+sentinel:// (rediss for TLS: rediss://, rediss+cluster://, rediss+sentinel://)` + "\n"},
		{"throttled no Redis", []string{"throttled", "--redis", ""}, "admin throttled: no Redis: set --redis or REDIS_URL\n"},
		{"throttled bad URL", []string{"throttled", "--redis", "http://127.0.0.1:1"},
			`admin throttled: --redis "http://127.0.0.1:1": scheme "http": use redis://, redis+cluster:// or redis+sentinel:// (rediss for TLS: rediss://, rediss+cluster://, rediss+sentinel://)` + "\n"},
		{"usage without tenant", usage, "admin usage: no tenant: set --tenant\n"},
		{"usage without policies", []string{"usage", "--redis", unreachable, "--policies", "", "--tenant", "acme"},
			"admin usage: no policies: set --policies or SLUICE_POLICIES to the workers' file\n"},
		{"usage prefix with a brace", append(usage, "--tenant", "acme", "--prefix", "x{"), `admin usage: --prefix "x{": may not contain a brace` + "\n"},
		{"reset prefix with a brace", append(reset, "--tenant", "acme", "--prefix", "x}"), `admin reset: --prefix "x}": may not contain a brace` + "\n"},
		{"reset-global prefix with a brace", []string{"reset-global", "--redis", unreachable, "--policies", path, "--type", "sms:send", "--rule", "provider", "--yes", "--prefix", "x{"},
			`admin reset-global: --prefix "x{": may not contain a brace` + "\n"},
		{"reset-lines prefix with a brace", []string{"reset-lines", "--redis", unreachable, "--type", "sms:send", "--yes", "--prefix", "x{"},
			`admin reset-lines: --prefix "x{": may not contain a brace` + "\n"},
		{"holds prefix with a brace", []string{"holds", "--redis", unreachable, "--prefix", "x{"}, `admin holds: --prefix "x{": may not contain a brace` + "\n"},
		{"unhold prefix with a brace", []string{"unhold", "--redis", unreachable, "--key", "provider/sms:send", "--prefix", "x{"},
			`admin unhold: --prefix "x{": may not contain a brace` + "\n"},
		{"holds bad URL", []string{"holds", "--redis", "http://127.0.0.1:1"},
			`admin holds: --redis "http://127.0.0.1:1": scheme "http": use redis://, redis+cluster:// or redis+sentinel:// (rediss for TLS: rediss://, rediss+cluster://, rediss+sentinel://)` + "\n"},
		{"usage unknown type", append(usage, "--tenant", "acme", "--type", "fax:send"),
			`admin usage: task type "fax:send" has no rules in ` + path + " (it runs unthrottled); it has rules for email:send, sms:send\n"},
		{"reset without tenant", reset, "admin reset: no tenant: set --tenant\n"},
		{"reset unknown type", append(reset, "--tenant", "acme", "--type", "sms"),
			`admin reset: task type "sms" has no rules in ` + path + " (it runs unthrottled); it has rules for email:send, sms:send\n"},
		{"reset unknown rule", append(reset, "--tenant", "acme", "--rule", "per-day"),
			`admin reset: rule "per-day" is not a rule of any task type in ` + path + "; its rules: email:send daily, sms:send per-hour, sms:send provider\n"},
		{"reset rule of another type", append(reset, "--tenant", "acme", "--type", "email:send", "--rule", "per-hour"),
			`admin reset: rule "per-hour" is not a rule of task type email:send in ` + path + "; its rules: email:send daily\n"},
		{"reset global rule", append(reset, "--tenant", "acme", "--rule", "provider"),
			`admin reset: rule "provider" of sms:send is global: its window is shared by every tenant, and a tenant's reset never empties it` + "\n"},
		{"validate without FILE", []string{"validate"}, "admin validate: needs FILE, or - for standard input, after the flags (see --help)\n"},
		{"validate two files", []string{"validate", "a.yaml", "b.yaml"}, `admin validate: unexpected argument "b.yaml": after the flags, only FILE is taken (see --help)` + "\n"},
		{"throttled negative limit", []string{"throttled", "--redis", unreachable, "--limit", "-1"}, "admin throttled: --limit -1: must be 0 or more\n"},
		{"throttled blank queue", []string{"throttled", "--redis", unreachable, "--queue", " "}, `admin throttled: invalid value " " for flag -queue: name a queue` + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := admin(t, "", tc.args...)
			if got, want := r.code, 2; got != want {
				t.Errorf("exit status = %d, want %d", got, want)
			}
			if got, want := r.stderr, tc.want; got != want {
				t.Errorf("stderr\n got %q\nwant %q", got, want)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
		})
	}
}

// TestHostileTenants: a tenant id that producer.ValidateTenant refuses is
// one line naming it, exit status 2, before Redis is asked, whether it
// would reach another tenant's keys or a global one.
func TestHostileTenants(t *testing.T) {
	t.Parallel()
	path := writeFile(t, testPolicies)
	tenants := []string{
		" ", "a b", "{acme}", "acme}", "acme/x", "../acme", "acme/../globex", "acme:x", "-acme", ".acme",
		"acme\n", "acme\x00", "acme*", "ácme", "acme%7D", strings.Repeat("a", producer.MaxTenantLen+1),
	}
	for _, tenant := range tenants {
		for _, cmd := range []string{"usage", "reset"} {
			t.Run(fmt.Sprintf("%s %q", cmd, tenant), func(t *testing.T) {
				t.Parallel()
				args := []string{cmd, "--redis", unreachable, "--policies", path, "--tenant", tenant}
				if cmd == "reset" {
					args = append(args, "--yes")
				}
				r := admin(t, "", args...)
				if got, want := r.code, 2; got != want {
					t.Errorf("exit status = %d, want %d", got, want)
				}
				want := "admin " + cmd + ": tenant " + fmt.Sprintf("%q: ", tenant)
				if len(tenant) > 40 { // cut short in messages
					want = "admin " + cmd + ": tenant " + fmt.Sprintf("%q... (%d bytes): ", tenant[:40], len(tenant))
				}
				if !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
					t.Errorf("stderr = %q, want one line starting %q", r.stderr, want)
				}
				if r.stdout != "" {
					t.Errorf("stdout = %q, want nothing", r.stdout)
				}
			})
		}
	}
}

// TestRedisUnusable: a Redis that cannot be used is one line naming it,
// and exit status 1.
func TestRedisUnusable(t *testing.T) {
	t.Parallel()
	path := writeFile(t, testPolicies)
	cases := []struct {
		name string
		args []string
		want string // the start of stderr
	}{
		{"usage", []string{"usage", "--redis", unreachable, "--policies", path, "--tenant", "acme"}, "admin usage: Redis at redis://127.0.0.1:1 unreachable: dial tcp 127.0.0.1:1: "},
		{"reset", []string{"reset", "--redis", unreachable, "--policies", path, "--tenant", "acme", "--yes"}, "admin reset: Redis at redis://127.0.0.1:1 unreachable: dial tcp 127.0.0.1:1: "},
		{"throttled", []string{"throttled", "--redis", "redis://:s3cret@127.0.0.1:1"}, "admin throttled: Redis at redis://:xxxxx@127.0.0.1:1 unreachable: dial tcp 127.0.0.1:1: "},
		{"reset-global", []string{"reset-global", "--redis", unreachable, "--policies", path, "--type", "sms:send", "--rule", "provider", "--yes"},
			"admin reset-global: Redis at redis://127.0.0.1:1 unreachable: dial tcp 127.0.0.1:1: "},
		{"reset-lines", []string{"reset-lines", "--redis", unreachable, "--type", "sms:send"}, "admin reset-lines: Redis at redis://127.0.0.1:1 unreachable: dial tcp 127.0.0.1:1: "},
		{"holds", []string{"holds", "--redis", unreachable}, "admin holds: Redis at redis://127.0.0.1:1 unreachable: dial tcp 127.0.0.1:1: "},
		{"unhold", []string{"unhold", "--redis", unreachable, "--key", "provider/sms:send"}, "admin unhold: Redis at redis://127.0.0.1:1 unreachable: dial tcp 127.0.0.1:1: "},
		{"usage policies missing", []string{"usage", "--redis", unreachable, "--policies", filepath.Join(t.TempDir(), "none.yaml"), "--tenant", "acme"}, "admin usage: policies: open "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := admin(t, "", tc.args...)
			if got, want := r.code, 1; got != want {
				t.Errorf("exit status = %d, want %d", got, want)
			}
			if !strings.HasPrefix(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("stderr = %q, want one line starting %q", r.stderr, tc.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
		})
	}
}

// TestEnvironment: the flags with a variable take it from the environment,
// and a command is not troubled by the variables of flags it does not
// have. Not parallel: it sets the environment.
func TestEnvironment(t *testing.T) {
	path := writeFile(t, testPolicies)
	t.Setenv("REDIS_URL", unreachable)
	t.Setenv("SLUICE_POLICIES", path)
	t.Setenv("SLUICE_PREFIX", "env-prefix:")
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string // the start of stderr
	}{
		{"validate", []string{"validate", path}, 0, "email:send: daily", ""},
		{"throttled", []string{"throttled"}, 1, "", "admin throttled: Redis at redis://127.0.0.1:1 unreachable: "},
		{"usage", []string{"usage", "--tenant", "acme"}, 1, "", "admin usage: Redis at redis://127.0.0.1:1 unreachable: "},
		{"reset", []string{"reset", "--tenant", "acme"}, 2, "would reset email:send daily", "admin reset: nothing reset: give --yes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := admin(t, "", tc.args...)
			if got, want := r.code, tc.code; got != want {
				t.Errorf("exit status = %d, want %d (stderr %q)", got, want, r.stderr)
			}
			if !strings.HasPrefix(r.stdout, tc.stdout) {
				t.Errorf("stdout = %q, want it to start %q", r.stdout, tc.stdout)
			}
			if !strings.HasPrefix(r.stderr, tc.stderr) || (tc.stderr == "") != (r.stderr == "") {
				t.Errorf("stderr = %q, want it to start %q", r.stderr, tc.stderr)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	good := writeFile(t, testPolicies)
	bad := writeFile(t, "tasks:\n  sms:send:\n    - {name: per-hour, scope: tenant, limit: 5, window: 1 hour}\n")
	summary := "email:send: daily 10/24h0m0s gcra per tenant; sms:send: per-hour 5/1h0m0s per tenant (1 override), provider 100/1h0m0s global\n"
	cases := []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout string
		stderr string
	}{
		{"good file", []string{"validate", good}, "", 0, summary, ""},
		{"good standard input", []string{"validate", "-"}, testPolicies, 0, summary, ""},
		{"no rules", []string{"validate", "-"}, "tasks: {}\n", 0, "no rules: every task type runs unthrottled\n", ""},
		{"bad file", []string{"validate", bad}, "", 1, "",
			"admin validate: " + bad + `: invalid policies: sms:send: rule 1 (per-hour): window: "1 hour" is not a duration such as 1s, 1m or 24h` + "\n"},
		{"bad standard input", []string{"validate", "-"}, "tasks:\n  sms:send:\n    - {name: x, scope: everyone, limit: 1, window: 1s}\n", 1, "",
			`admin validate: standard input: invalid policies: sms:send: rule 1 (x): scope: "everyone" must be "tenant" or "global"` + "\n"},
		{"misspelled task type", []string{"validate", "-"}, "tasks:\n  sms:sned:\n    - {name: x, scope: tenant, limit: 4, window: 1s}\n", 1, "",
			`admin validate: standard input: invalid policies: line 2: task type "sms:sned" (did you mean sms:send?): no worker handles it, so its rules would never apply; ` +
				"the known types are email:send, sms:send: list a type of your own under extra_task_types\n"},
		{"a type of one's own, listed", []string{"validate", "-"}, "extra_task_types: [report:build]\ntasks:\n  report:build:\n    - {name: x, scope: global, limit: 4, window: 1s}\n", 0,
			"report:build: x 4/1s global\n", ""},
		{"fractional limit", []string{"validate", "-"}, "tasks:\n  sms:send:\n    - {name: x, scope: tenant, limit: 4.9, window: 1s}\n", 1, "",
			"admin validate: standard input: invalid policies: sms:send: rule 1 (x): limit: 4.9 is not a whole number: a window admits whole tasks; write 4 or 5\n"},
		{"limit below one", []string{"validate", "-"}, "tasks:\n  sms:send:\n    - {name: x, scope: tenant, limit: 0.5, window: 1s}\n", 1, "",
			"admin validate: standard input: invalid policies: sms:send: rule 1 (x): limit: 0.5 is less than one task a window: a window admits whole tasks; for one task every 2s, write limit: 1 and window: 2s\n"},
		{"missing limit", []string{"validate", "-"}, "tasks:\n  sms:send:\n    - {name: x, scope: tenant, window: 1s}\n", 1, "",
			"admin validate: standard input: invalid policies: sms:send: rule 1 (x): limit: missing: give how many tasks a window admits, a whole number such as 10\n"},
		{"misspelled field", []string{"validate", "-"}, "tasks:\n  sms:send:\n    - name: x\n      scope: tenant\n      limt: 4\n      window: 1s\n", 1, "",
			`admin validate: standard input: invalid policies: line 5: sms:send: rule 1 (x): unknown field "limt" (did you mean limit?); a rule's fields are name, scope, limit, window, margin, algorithm, concurrency, lease, adaptive, min, mode, tenants` + "\n"},
		{"empty file", []string{"validate", "-"}, "", 1, "",
			"admin validate: standard input: invalid policies: no tasks: list the rules of each task type under tasks:, or write tasks: {} to throttle nothing\n"},
		{"missing file", []string{"validate", "/nonexistent/policies.yaml"}, "", 1, "",
			"admin validate: policies: open /nonexistent/policies.yaml: no such file or directory\n"},
		{"a file without end", []string{"validate", "/dev/zero"}, "", 1, "",
			"admin validate: /dev/zero: invalid policies: the file is more than the limit of 1 MiB\n"},
		{"standard input too large", []string{"validate", "-"}, "tasks: {}\n" + strings.Repeat("#", policies.MaxFileSize), 1, "",
			"admin validate: standard input: invalid policies: the file is more than the limit of 1 MiB\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := admin(t, tc.stdin, tc.args...)
			if got, want := r.code, tc.code; got != want {
				t.Errorf("exit status = %d, want %d", got, want)
			}
			if got, want := r.stdout, tc.stdout; got != want {
				t.Errorf("stdout\n got %q\nwant %q", got, want)
			}
			if got, want := r.stderr, tc.stderr; got != want {
				t.Errorf("stderr\n got %q\nwant %q", got, want)
			}
		})
	}
}

// TestValidateInterrupted: an interrupt stops admin validate at once,
// even while it waits for standard input.
func TestValidateInterrupted(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe() // sends nothing until closed
	t.Cleanup(func() { pw.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		code := run(ctx, []string{"validate", "-"}, pr, &stdout, &stderr)
		done <- result{code, stdout.String(), stderr.String()}
	}()
	select {
	case got := <-done:
		if want := (result{1, "", "admin validate: interrupted\n"}); got != want {
			t.Errorf("result = %+v, want %+v", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("admin validate still running 10 s after the interrupt")
	}
}
