package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/producer"
)

// asMain, set in the environment, makes the test binary run the command
// itself: the tests that measure a process's memory start it so.
const asMain = "SLUICE_ENQUEUE_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) != "" {
		main()
	}
	os.Exit(redistest.Main(m))
}

// unreachable is a Redis URL where nothing listens: loopback port 1.
const unreachable = "redis://127.0.0.1:1"

// result is what one run of the command did.
type result struct {
	code           int
	stdout, stderr string
}

// enqueue runs the command with args and stdin as its standard input.
func enqueue(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// stored is a task as Redis holds it.
type stored struct {
	ID       string // "(random)" for asynq's own UUIDs
	State    asynq.TaskState
	Type     string
	Tenant   string
	MaxRetry int // asynq's: the HeaderMaxRetry budget plus one
	Payload  string
}

// tasksIn returns the pending and scheduled tasks of queue q, sorted by
// payload.
func tasksIn(t *testing.T, rdb redis.UniversalClient, q string) []stored {
	t.Helper()
	ins := asynq.NewInspectorFromRedisClient(rdb)
	var infos []*asynq.TaskInfo
	for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){ins.ListPendingTasks, ins.ListScheduledTasks} {
		got, err := list(q)
		if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
			t.Fatalf("list tasks of %s: %v", q, err)
		}
		infos = append(infos, got...)
	}
	var tasks []stored
	for _, info := range infos {
		id := info.ID
		if len(id) == 36 && strings.Count(id, "-") == 4 {
			id = "(random)"
		}
		tasks = append(tasks, stored{id, info.State, info.Type, info.Headers[producer.HeaderTenant], info.MaxRetry, string(info.Payload)})
	}
	slices.SortFunc(tasks, func(a, b stored) int { return strings.Compare(a.Payload, b.Payload) })
	return tasks
}

// lines returns its arguments as a file, each line ending with LF.
func lines(s ...string) string { return strings.Join(s, "\n") + "\n" }

// writeFile writes content to a file in a directory of the test's own and
// returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHelp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want []string // in stdout
	}{
		{"--help", []string{"--help"}, []string{"usage: enqueue sms", "enqueue bulk", "Exit status"}},
		{"-h", []string{"-h"}, []string{"usage: enqueue sms"}},
		{"help", []string{"help"}, []string{"usage: enqueue sms"}},
		{"sms --help", []string{"sms", "--help"}, []string{"usage: enqueue sms", "--tenant", "[$REDIS_URL]"}},
		{"email -h", []string{"email", "-h"}, []string{"usage: enqueue sms", "--subject"}},
		{"bulk --help", []string{"bulk", "--help"}, []string{"usage: enqueue bulk", "--skip-invalid", "[$SLUICE_QUEUE]", `"-" for standard input`, "Exit status"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := enqueue(t, "", tc.args...)
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

// TestUsageErrors: each is one line on stderr and exit status 2, before
// anything reaches Redis (the URL, when there is one, is unreachable or
// cannot be read).
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	invalid := filepath.Join(t.TempDir(), "invalid.jsonl")
	if err := os.WriteFile(invalid, []byte(`{"type":"fax"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string // the whole of stderr
	}{
		{"no kind", nil, "enqueue: name a kind of task: sms, email or bulk (see --help)\n"},
		{"unknown kind", []string{"fax"}, `enqueue: unknown kind of task "fax": name sms, email or bulk (see --help)` + "\n"},
		{"bad flag", []string{"sms", "--nope"}, "enqueue: flag provided but not defined: -nope\n"},
		{"bad flag value", []string{"sms", "--count", "many"}, `enqueue: invalid value "many" for flag -count: parse error` + "\n"},
		{"zero count", []string{"sms", "--count", "0"}, "enqueue: --count 0: must be at least 1\n"},
		{"invalid sms", []string{"sms", "--redis", unreachable, "--tenant", "acme", "--to", "+1555x", "--body", "hi"},
			`enqueue: producer: new sms:send task for tenant "acme": invalid task: to "+1555x": not an E.164 phone number (+ then 2 to 15 digits, no leading 0)` + "\n"},
		{"bulk bad flag", []string{"bulk", "--nope", "-"}, "enqueue: flag provided but not defined: -nope\n"},
		{"sms unquoted body", []string{"sms", "--redis", unreachable, "--tenant", "acme", "--to", "+15551234567", "--body", "hello", "world", "--count", "3"},
			`enqueue: unexpected argument "world" (then "--count", "3"): flags go before arguments, and a value with spaces needs quotes: --body "hello world"` + "\n"},
		{"email unquoted subject", []string{"email", "--redis", unreachable, "--tenant", "acme", "--to", "ada@example.com", "--subject", "Your", "order", "--body", "hi"},
			`enqueue: unexpected argument "order" (then "--body", "hi"): flags go before arguments, and a value with spaces needs quotes: --subject "Your order"` + "\n"},
		{"sms argument", []string{"sms", "acme", "--redis", unreachable}, `enqueue: unexpected argument "acme" (then "--redis", "redis://127.0.0.1:1"): flags go before arguments` + "\n"},
		{"bulk without FILE", []string{"bulk", "--redis", unreachable}, "enqueue: bulk needs FILE, or - for standard input, after the flags (see --help)\n"},
		{"bulk with two files", []string{"bulk", "a.jsonl", "b.jsonl"}, `enqueue: unexpected argument "b.jsonl": after the flags, only FILE is taken (see --help)` + "\n"},
		{"bulk flag after FILE", []string{"bulk", "-", "--redis", unreachable}, `enqueue: unexpected argument "--redis" (then "redis://127.0.0.1:1"): flags go before arguments` + "\n"},
		{"sms bad URL", []string{"sms", "--redis", "http://127.0.0.1:1", "--tenant", "acme", "--to", "+15551234567", "--body", "hi"},
			`enqueue: --redis "http://127.0.0.1:1": scheme "http": use redis://, redis+cluster:// or redis+sentinel:// (rediss for TLS: rediss://, rediss+cluster://, rediss+sentinel://)` + "\n"},
		{"bulk no Redis", []string{"bulk", "--redis", "", "-"}, "enqueue: no Redis: set --redis or REDIS_URL\n"},
		{"bulk bad URL", []string{"bulk", "--redis", "http://127.0.0.1:1", "-"},
			`enqueue: --redis "http://127.0.0.1:1": scheme "http": use redis://, redis+cluster:// or redis+sentinel:// (rediss for TLS: rediss://, rediss+cluster://, rediss+sentinel://)` + "\n"},
		{"bulk blank queue", []string{"bulk", "--queue", " ", "-"}, `enqueue: --queue: queue " " is not 1 to 64 letters, digits, '.', '_', ':' and '-', starting with a letter or digit` + "\n"},
		{"bulk queue with braces", []string{"bulk", "--queue", "a}{b", "-"}, `enqueue: --queue: queue "a}{b" is not 1 to 64 letters, digits, '.', '_', ':' and '-', starting with a letter or digit` + "\n"},
		{"blank queue", []string{"sms", "--redis", unreachable, "--queue", " ", "--tenant", "acme", "--to", "+15551234567", "--body", "hi"},
			`enqueue: --queue: queue " " is not 1 to 64 letters, digits, '.', '_', ':' and '-', starting with a letter or digit` + "\n"},
		{"queue with a newline", []string{"sms", "--redis", unreachable, "--queue", "a\nb", "--tenant", "acme", "--to", "+15551234567", "--body", "hi"},
			`enqueue: --queue: queue "a\nb" is not 1 to 64 letters, digits, '.', '_', ':' and '-', starting with a letter or digit` + "\n"},
		{"negative max retry", []string{"sms", "--redis", unreachable, "--max-retry", "-1", "--tenant", "acme", "--to", "+15551234567", "--body", "hi"},
			"enqueue: --max-retry -1: must be 0 or more\n"},
		{"sms with a subject", []string{"sms", "--redis", unreachable, "--tenant", "acme", "--to", "+15551234567", "--body", "hi", "--subject", "Hi"},
			"enqueue: --subject and --from are for email; an SMS has only --to and --body\n"},
		{"sms with a sender", []string{"sms", "--redis", unreachable, "--tenant", "acme", "--to", "+15551234567", "--body", "hi", "--from", "a@example.com"},
			"enqueue: --subject and --from are for email; an SMS has only --to and --body\n"},
		{"bulk bad URL, nothing to enqueue", []string{"bulk", "--redis", "http://127.0.0.1:1", invalid},
			`enqueue: --redis "http://127.0.0.1:1": scheme "http": use redis://, redis+cluster:// or redis+sentinel:// (rediss for TLS: rediss://, rediss+cluster://, rediss+sentinel://)` + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := enqueue(t, lines(`{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi"}`), tc.args...)
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

// TestRedisUnusable: a Redis that cannot be used is one line naming it,
// and exit status 1, at once.
func TestRedisUnusable(t *testing.T) {
	t.Parallel()
	good := lines(`{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi"}`)
	sms := []string{"sms", "--tenant", "acme", "--to", "+15551234567", "--body", "hi"}
	cases := []struct {
		name string
		args []string
		want string // the start of stderr
	}{
		{"sms unreachable", append(sms, "--redis", unreachable), "enqueue: Redis at redis://127.0.0.1:1 unreachable: dial tcp 127.0.0.1:1: "},
		{"bulk unreachable", []string{"bulk", "--redis", unreachable, "-"}, "enqueue: Redis at redis://127.0.0.1:1 unreachable: dial tcp 127.0.0.1:1: "},
		{"sms unreachable, password hidden", append(sms, "--redis", "redis://:s3cret@127.0.0.1:1/0"), "enqueue: Redis at redis://:xxxxx@127.0.0.1:1/0 unreachable: dial tcp 127.0.0.1:1: "},
		{"sms no sentinel", append(sms, "--redis", "redis+sentinel://127.0.0.1:1/0?master_name=mymaster"), `enqueue: Redis at redis+sentinel://127.0.0.1:1/0?master_name=mymaster unreachable: no sentinel gave the address of master "mymaster": sentinel 127.0.0.1:1: dial tcp 127.0.0.1:1: `},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			r := enqueue(t, good, tc.args...)
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("took %v to give up", took)
			}
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

// TestStrayWordEnqueuesNothing: an unquoted body, whose second word stops
// the flags, exits 2 and enqueues nothing, rather than one task with the
// first word and --count unread.
func TestStrayWordEnqueuesNothing(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	q := redistest.Queue(t, rdb)
	r := enqueue(t, "", "sms", "--redis", redistest.URL(t), "--queue", q, "--tenant", "acme",
		"--to", "+15551234567", "--body", "hello", "world", "--count", "3")
	want := result{2, "", `enqueue: unexpected argument "world" (then "--count", "3"): flags go before arguments, and a value with spaces needs quotes: --body "hello world"` + "\n"}
	if diff := cmp.Diff(want, r, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if keys := redistest.QueueKeys(t, rdb, q); len(keys) > 0 {
		t.Errorf("queue %s has keys in Redis: %q", q, keys)
	}
}

func TestBulkUnreadableFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		name string
		path string
		want string // the whole of stderr
	}{
		{"missing", filepath.Join(dir, "nope.jsonl"), "enqueue: open " + filepath.Join(dir, "nope.jsonl") + ": no such file or directory\n"},
		{"directory", dir, "enqueue: producer: read bulk file at line 1: read " + dir + ": is a directory\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := enqueue(t, "", "bulk", "--redis", unreachable, tc.path)
			if got, want := r.code, 1; got != want {
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

// mixed is a bulk file of good and bad lines.
var mixed = lines(
	`{"type":"sms","tenant":"acme","to":"+15551234567","body":"one","id":"a-1"}`,
	`{"type":"sms","tenant":"acme","to":"+1555x","body":"two","id":"a-2"}`,
	``,
	`{"type":"email","tenant":"globex","to":"ada@example.com","subject":"Hi","body":"three","id":"g-1","max_retry":2}`,
	`{"type":"fax","tenant":"acme","to":"+15551234567","body":"four"}`,
	`{"type":"email","tenant":"","to":"ada@example.com","subject":"Hi","body":"five"}`,
	`{"type":"sms","tenant":"initech","to":"+15557654321","body":"six","id":"a-1"}`,
	`not JSON`,
	`{"type":"sms","tenant":"initech","to":"+15557654321","body":"nine","cc":"+15550000000"}`,
	`{"type":"sms","tenant":"initech","to":"+15557654321","body":"ten","process_in":"1h"}`,
)

// mixedRejected is what enqueue says on stderr about the bad lines of
// mixed, before it reaches Redis.
var mixedRejected = []string{
	`enqueue: line 2: invalid task: to "+1555x": not an E.164 phone number (+ then 2 to 15 digits, no leading 0)`,
	`enqueue: line 5: invalid task: type "fax": is neither sms (sms:send) nor email (email:send)`,
	`enqueue: line 6: invalid task: tenant "": is empty`,
	`enqueue: line 7: id "a-1" is the id of line 1 too, in queue QUEUE`,
	`enqueue: line 8: invalid task: invalid character 'o' in literal null (expecting 'u')`,
	`enqueue: line 9: invalid task: json: unknown field "cc"`,
}

// stderrLines returns want with QUEUE replaced by q, as stderr.
func stderrLines(q string, want ...string) string {
	return strings.ReplaceAll(strings.Join(want, "\n")+"\n", "QUEUE", q)
}

// TestBulkRefusesInvalidFile: without --skip-invalid, one bad line and
// nothing is enqueued.
func TestBulkRefusesInvalidFile(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	q := redistest.Queue(t, rdb)
	r := enqueue(t, "", "bulk", "--redis", redistest.URL(t), "--queue", q, writeFile(t, mixed))
	if got, want := r.code, 1; got != want {
		t.Errorf("exit status = %d, want %d", got, want)
	}
	if got, want := r.stderr, stderrLines(q, mixedRejected...); got != want {
		t.Errorf("stderr\n got %s\nwant %s", got, want)
	}
	if got, want := r.stdout, "enqueued 0 of 9 tasks; 6 rejected (lines 2, 5, 6, 7, 8, 9); nothing enqueued because of them (--skip-invalid enqueues the valid lines)\n"; got != want {
		t.Errorf("stdout\n got %q\nwant %q", got, want)
	}
	if got := tasksIn(t, rdb, q); len(got) > 0 {
		t.Errorf("queue %s holds %+v, want nothing", q, got)
	}
	if keys := redistest.QueueKeys(t, rdb, q); len(keys) > 0 {
		t.Errorf("queue %s has keys in Redis: %q", q, keys)
	}
}

// TestBulkRefusesOversizedPayload: a line whose task would have a payload
// larger than producer.MaxPayload is rejected with its line number, the
// size and the limit, and nothing is enqueued.
func TestBulkRefusesOversizedPayload(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	q := redistest.Queue(t, rdb)
	// A valid body of 100 KiB whose JSON is six times larger: \u0001 each.
	body := strings.Repeat(`\u0001`, 100<<10)
	file := lines(
		`{"type":"sms","tenant":"acme","to":"+15551234567","body":"one"}`,
		`{"type":"email","tenant":"acme","to":"ada@example.com","subject":"Hi","body":"`+body+`"}`,
	)
	r := enqueue(t, "", "bulk", "--redis", redistest.URL(t), "--queue", q, writeFile(t, file))
	if got, want := r.code, 1; got != want {
		t.Errorf("exit status = %d, want %d", got, want)
	}
	size := len(`{"to":"ada@example.com","subject":"Hi","body":""}`) + len(body)
	if got, want := r.stderr, fmt.Sprintf("enqueue: line 2: invalid task: the payload is %d bytes of JSON, more than the limit of %d\n", size, producer.MaxPayload); got != want {
		t.Errorf("stderr\n got %q\nwant %q", got, want)
	}
	if got, want := r.stdout, "enqueued 0 of 2 tasks; 1 rejected (line 2); nothing enqueued because of them (--skip-invalid enqueues the valid lines)\n"; got != want {
		t.Errorf("stdout\n got %q\nwant %q", got, want)
	}
	if keys := redistest.QueueKeys(t, rdb, q); len(keys) > 0 {
		t.Errorf("queue %s has keys in Redis: %q", q, keys)
	}
}

// TestBulkSkipInvalid: with --skip-invalid, the valid lines of a file read
// from standard input are enqueued, except one whose ID is taken, and
// Redis holds exactly those tasks.
func TestBulkSkipInvalid(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	q := redistest.Queue(t, rdb)
	// g-1, the ID of line 4, is taken already.
	pc := producer.NewClientFromRedisClient(rdb)
	if _, err := pc.EnqueueSMS(context.Background(), "acme", producer.SMS{To: "+15550000000", Body: "before"}, asynq.Queue(q), asynq.TaskID("g-1")); err != nil {
		t.Fatal(err)
	}

	r := enqueue(t, mixed, "bulk", "--redis", redistest.URL(t), "--queue", q, "--skip-invalid", "-")
	if got, want := r.code, 1; got != want {
		t.Errorf("exit status = %d, want %d", got, want)
	}
	wantStderr := stderrLines(q, append(mixedRejected,
		`enqueue: line 4: id "g-1" is taken: queue QUEUE already has a task with this id`)...)
	if got, want := r.stderr, wantStderr; got != want {
		t.Errorf("stderr\n got %s\nwant %s", got, want)
	}
	if got, want := r.stdout, "enqueued 2 of 9 tasks; 7 rejected (lines 2, 4, 5, 6, 7, 8, 9)\n"; got != want {
		t.Errorf("stdout\n got %q\nwant %q", got, want)
	}
	want := []stored{
		{"g-1", asynq.TaskStatePending, producer.TypeSMS, "acme", 26, `{"to":"+15550000000","body":"before"}`},
		{"a-1", asynq.TaskStatePending, producer.TypeSMS, "acme", 26, `{"to":"+15551234567","body":"one"}`},
		{"(random)", asynq.TaskStateScheduled, producer.TypeSMS, "initech", 26, `{"to":"+15557654321","body":"ten"}`},
	}
	slices.SortFunc(want, func(a, b stored) int { return strings.Compare(a.Payload, b.Payload) })
	if diff := cmp.Diff(want, tasksIn(t, rdb, q)); diff != "" {
		t.Errorf("tasks in Redis (-want +got):\n%s", diff)
	}
}

// TestBulkExample enqueues examples/bulk.jsonl twice: all of it, then
// nothing of the lines with IDs.
func TestBulkExample(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	q := redistest.Queue(t, rdb)
	example := filepath.Join("..", "..", "examples", "bulk.jsonl")

	r := enqueue(t, "", "bulk", "--redis", redistest.URL(t), "--queue", q, example)
	if got, want := r, (result{0, "enqueued 6 of 6 tasks\n", ""}); got != want {
		t.Errorf("first run = %+v, want %+v", got, want)
	}
	want := []stored{
		{"acme-otp-1", asynq.TaskStatePending, producer.TypeSMS, "acme", 26, `{"to":"+15551234567","body":"Your code is 482913"}`},
		{"(random)", asynq.TaskStatePending, producer.TypeSMS, "acme", 4, `{"to":"+447700900123","body":"Your parcel arrives today"}`},
		{"globex-welcome-ada", asynq.TaskStatePending, producer.TypeEmail, "globex", 26, `{"to":"ada@example.com","subject":"Welcome to Globex","body":"Hello Ada, your account is ready.","from":"team@globex.example"}`},
		{"(random)", asynq.TaskStateScheduled, producer.TypeEmail, "globex", 26, `{"to":"grace@example.com","subject":"Your weekly report","body":"Three new reports are waiting."}`},
		{"(random)", asynq.TaskStatePending, producer.TypeSMS, "initech", 1, `{"to":"+15557654321","body":"Server room at 31 C"}`},
		{"(random)", asynq.TaskStateScheduled, producer.TypeEmail, "initech", 26, `{"to":"bill@example.com","subject":"TPS reports","body":"Did you get the memo?"}`},
	}
	slices.SortFunc(want, func(a, b stored) int { return strings.Compare(a.Payload, b.Payload) })
	if diff := cmp.Diff(want, tasksIn(t, rdb, q)); diff != "" {
		t.Errorf("tasks in Redis (-want +got):\n%s", diff)
	}

	r = enqueue(t, "", "bulk", "--redis", redistest.URL(t), "--queue", q, example)
	wantAgain := result{1, "enqueued 4 of 6 tasks; 2 rejected (lines 1, 3)\n", stderrLines(q,
		`enqueue: line 1: id "acme-otp-1" is taken: queue QUEUE already has a task with this id`,
		`enqueue: line 3: id "globex-welcome-ada" is taken: queue QUEUE already has a task with this id`)}
	if diff := cmp.Diff(wantAgain, r, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("second run (-want +got):\n%s", diff)
	}
	if got, want := len(tasksIn(t, rdb, q)), 10; got != want {
		t.Errorf("%d tasks in Redis after the second run, want %d", got, want)
	}
}

// TestBulkStopsAtRedisError: when Redis fails, enqueue stops at the line
// that failed rather than wait for every line after it to fail too. The
// queue's pending list is made a string, so that a task that would be
// pending fails with WRONGTYPE and a scheduled one goes through.
func TestBulkStopsAtRedisError(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	q := redistest.Queue(t, rdb)
	ctx := context.Background()
	t.Cleanup(func() { // before redistest.Queue's cleanup
		if keys := redistest.QueueKeys(t, rdb, q); len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})
	if err := rdb.Set(ctx, "asynq:{"+q+"}:pending", "not a list", 0).Err(); err != nil {
		t.Fatal(err)
	}
	input := lines(
		`{"type":"sms","tenant":"acme","to":"+15551234567","body":"later","id":"s-1","process_in":"1h"}`,
		`{"type":"sms","tenant":"acme","to":"+15551234567","body":"now","id":"p-1"}`,
		`{"type":"sms","tenant":"acme","to":"+15551234567","body":"later too","id":"s-2","process_in":"1h"}`,
	)
	r := enqueue(t, input, "bulk", "--redis", redistest.URL(t), "--queue", q, "-")
	if got, want := r.code, 1; got != want {
		t.Errorf("exit status = %d, want %d", got, want)
	}
	if got, want := r.stdout, "enqueued 1 of 3 tasks; 2 not enqueued after an error\n"; got != want {
		t.Errorf("stdout\n got %q\nwant %q", got, want)
	}
	errLines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(errLines) != 2 ||
		!strings.HasPrefix(errLines[0], `enqueue: line 2: producer: enqueue sms:send for tenant "acme": `) || !strings.Contains(errLines[0], "WRONGTYPE") ||
		errLines[1] != "enqueue: stopped at line 2: it and 1 valid line after it not enqueued" {
		t.Errorf("stderr = %q, want the error of line 2, then where enqueue stopped", r.stderr)
	}
	scheduled, err := asynq.NewInspectorFromRedisClient(rdb).ListScheduledTasks(q)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, info := range scheduled {
		ids = append(ids, info.ID)
	}
	if diff := cmp.Diff([]string{"s-1"}, ids); diff != "" {
		t.Errorf("IDs of the scheduled tasks (-want +got):\n%s", diff)
	}
}

// TestBulkInterruptedReading: an interrupt stops a read that waits for
// input, and nothing is enqueued.
func TestBulkInterruptedReading(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe() // sends one line, then nothing until closed
	t.Cleanup(func() { pw.Close() })
	go func() {
		_, _ = pw.Write([]byte(lines(`{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi"}`)))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"bulk", "--redis", unreachable, "-"}, pr, &stdout, &stderr)
	got := result{code, stdout.String(), stderr.String()}
	want := result{1, "", "enqueue: interrupted while reading the file; nothing enqueued\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

// TestBulkNothingToSend: a file without a task reaches no Redis.
func TestBulkNothingToSend(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		input string
		args  []string
		want  result
	}{
		{"empty", "", nil, result{0, "enqueued 0 of 0 tasks\n", ""}},
		{"blank lines", "\n \r\n\t\n", nil, result{0, "enqueued 0 of 0 tasks\n", ""}},
		{"all invalid, skipped", lines("{}", "[]"), []string{"--skip-invalid"}, result{1, "enqueued 0 of 2 tasks; 2 rejected (lines 1, 2)\n",
			"enqueue: line 1: invalid task: type \"\": is neither sms (sms:send) nor email (email:send)\n" +
				"enqueue: line 2: invalid task: json: cannot unmarshal array into Go value of type producer.BulkLine\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{"bulk", "--redis", unreachable}, tc.args...), "-")
			r := enqueue(t, tc.input, args...)
			if diff := cmp.Diff(tc.want, r, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSMSCount enqueues --count tasks with IDs.
func TestSMSCount(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	q := redistest.Queue(t, rdb)
	r := enqueue(t, "", "sms", "--redis", redistest.URL(t), "--queue", q, "--tenant", "acme",
		"--to", "+15551234567", "--body", "hi", "--count", "3", "--id", "otp", "--max-retry", "2")
	want := result{0, "enqueued 3 of 3 sms tasks for tenant acme on queue " + q + "\n", ""}
	if diff := cmp.Diff(want, r, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	var ids []string
	for _, s := range tasksIn(t, rdb, q) {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	if diff := cmp.Diff([]string{"otp-1", "otp-2", "otp-3"}, ids); diff != "" {
		t.Errorf("task IDs (-want +got):\n%s", diff)
	}
}

func TestListLines(t *testing.T) {
	t.Parallel()
	cases := []struct {
		lines []int
		want  string
	}{
		{[]int{3}, "line 3"},
		{[]int{3, 8}, "lines 3, 8"},
		{[]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, "lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10"},
		{[]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, "lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 2 more"},
	}
	for _, tc := range cases {
		if got, want := listLines(tc.lines), tc.want; got != want {
			t.Errorf("listLines(%v) = %q, want %q", tc.lines, got, want)
		}
	}
}

// TestProgress draws the bar on a writer that stands for a terminal; on
// anything else, newProgress draws nothing.
func TestProgress(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := &progress{w: &buf, total: 4}
	p.update(1)
	p.update(2) // too soon after the first: not drawn
	p.clear()
	p.update(3) // drawn again after clear
	p.update(4) // the last is always drawn
	p.clear()
	want := "\renqueue: [######..................] 1/4" +
		"\r\x1b[K" +
		"\renqueue: [##################......] 3/4" +
		"\renqueue: [########################] 4/4" +
		"\r\x1b[K"
	if got := buf.String(); got != want {
		t.Errorf("drawn\n got %q\nwant %q", got, want)
	}

	buf.Reset()
	p = newProgress(&buf, 4)
	for i := range 4 {
		p.update(i + 1)
	}
	p.clear()
	if buf.Len() > 0 {
		t.Errorf("drew %q on a buffer", buf.String())
	}
}
