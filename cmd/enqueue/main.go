// Command enqueue puts Sluice tasks on the queue.
//
//	enqueue sms --redis redis://localhost:6379/0 --tenant acme --to +15551234567 --body "hi" [--count N] [--id ID]
//	enqueue email --redis URL --tenant acme --to a@example.com --subject S --body B [--from F]
//	enqueue bulk --redis URL [--queue Q] [--skip-invalid] FILE
//
// --redis names one server (redis://), a Redis Cluster (redis+cluster://)
// or a master through Sentinel (redis+sentinel://); see redisconn.Client.
//
// Exit status: 0 when every task was enqueued, 1 when one was not (a bulk
// line rejected, Redis or the file unusable), 2 for a usage error: a bad
// flag or --redis URL, or an argument the command does not take (a word
// left after the flags, as in --body hello world unquoted, is refused
// rather than ignored with every flag after it; see cli.Parse).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/producer"
)

const synopsis = `
usage: enqueue sms   --redis URL --tenant T --to +15551234567 --body TEXT [--count N] [--id ID]
       enqueue email --redis URL --tenant T --to ADDR --subject S --body TEXT [--from ADDR] [--count N] [--id ID]
       enqueue bulk  --redis URL [--queue Q] [--skip-invalid] FILE

Validates and enqueues tasks; with --count, N distinct tasks (with --id, IDs
ID-1 ... ID-N). bulk enqueues the tasks of a JSON-lines file ("enqueue bulk
--help" describes it). A flag shown with a variable (--redis, --queue,
--prefix) can also be set from the environment. While a task's type waits
in the workers' fair lines (under --prefix, default sluice:), the task is
parked at enqueue: scheduled, and in its line, so that no backlog on the
pending list stands before it.

Exit status: 0 when every task was enqueued; 1 when one was not (invalid
bulk line, task ID taken, Redis or FILE unusable); 2 for a usage error (a
bad flag, a --redis URL that cannot be read, an argument after the flags
of sms or email, more than FILE after those of bulk), or an sms or email
flag with a bad value (nothing is enqueued).`

// prefixHelp is the help of every command's --prefix.
const prefixHelp = "prefix of the limiter's Redis keys, as the workers' --prefix: a task whose type waits in the fair lines there is parked at enqueue"

var env = map[string]string{"redis": "REDIS_URL", "queue": "SLUICE_QUEUE", "prefix": "SLUICE_PREFIX"}

func main() {
	cli.Main(func(ctx context.Context, args []string) int {
		return tracing.Run(ctx, "sluice-enqueue", func() int { return run(ctx, args, os.Stdin, os.Stdout, os.Stderr) })
	})
}

// run runs the command with args, without the program name, and returns
// its exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Subcommands{
		Program:  "enqueue",
		Noun:     "kind of task",
		Synopsis: synopsis,
		Commands: []cli.Subcommand{
			{Name: "sms", Run: func(args []string) int { return runOne(ctx, "sms", args, stdout, stderr) }},
			{Name: "email", Run: func(args []string) int { return runOne(ctx, "email", args, stdout, stderr) }},
			{Name: "bulk", Run: func(args []string) int { return runBulk(ctx, args, stdin, stdout, stderr) }},
		},
	}.Run(args, stdout, stderr)
}

// parseFlags parses the flags of an enqueue command (see cli.ParseFlags),
// with the variables of env and the help of synopsis. The command's flag
// set is named "enqueue", which begins the error lines of every enqueue
// command.
func parseFlags(fs *flag.FlagSet, args []string, synopsis string, stdout, stderr io.Writer, names ...string) (code int, ok bool) {
	return cli.ParseFlags(fs, args, env, synopsis, stdout, stderr, names...)
}

// connect returns a producer client of the Redis at url, once Redis
// answers (see redisconn.Connect), that parks tasks in the fair lines of
// prefix and keeps a task with an ID for retention once it has run, and
// the function that closes the client and its connection. The error
// names Redis and the URL; it matches cli.ErrUsage when the URL cannot be
// read (cli.ExitStatus gives 2).
func connect(ctx context.Context, url, prefix string, retention time.Duration) (*producer.Client, func(), error) {
	rdb, err := redisconn.Connect(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	pc := producer.NewClientFromRedisClient(rdb, producer.WithPrefix(prefix), producer.WithRetention(retention))
	return pc, func() { _ = pc.Close(); _ = rdb.Close() }, nil
}

// runOne runs "enqueue sms" or "enqueue email", kind, with args.
func runOne(ctx context.Context, kind string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("enqueue", flag.ContinueOnError) // the errors' prefix (see parseFlags)
	redisURL := fs.String("redis", "", redisconn.RedisURLHelp)
	queue := fs.String("queue", "", "asynq queue; default: the task type's, as the deployment's layout names it")
	prefix := fs.String("prefix", keyspace.DefaultPrefix, prefixHelp)
	tenant := fs.String("tenant", "", "tenant id")
	to := fs.String("to", "", "recipient: E.164 number (sms) or address (email)")
	body := fs.String("body", "", "message text")
	subject := fs.String("subject", "", "subject (email)")
	from := fs.String("from", "", "sender address (email, optional)")
	count := fs.Int("count", 1, "how many distinct tasks")
	id := fs.String("id", "", "task ID, for idempotent enqueue: refused while a task of that ID is in the queue, or ran within --retention")
	retention := fs.Duration("retention", producer.DefaultRetention, retentionHelp)
	maxRetry := fs.Int("max-retry", producer.DefaultMaxRetry, "retries after real failures (throttling never spends them)")
	priority := fs.Int("priority", producer.DefaultPriority,
		"1 (most urgent) to 5: among tasks waiting for a shared limit, the more urgent goes first; each less urgent priority keeps a share")
	if code, ok := parseFlags(fs, args, synopsis, stdout, stderr); !ok {
		return code
	}
	if *count < 1 {
		fmt.Fprintf(stderr, "enqueue: --count %d: must be at least 1\n", *count)
		return 2
	}
	if err := checkTaskFlags(*maxRetry, *queue); err != nil {
		fmt.Fprintln(stderr, "enqueue:", err)
		return 2
	}
	if kind == "sms" && (*subject != "" || *from != "") {
		fmt.Fprintln(stderr, "enqueue: --subject and --from are for email; an SMS has only --to and --body")
		return 2
	}

	// One task, built and checked before Redis is contacted: the count
	// of them are the same task under IDs of their own.
	opts := []asynq.Option{asynq.MaxRetry(*maxRetry), producer.Priority(*priority)}
	var task *asynq.Task
	var err error
	if kind == "sms" {
		task, err = producer.NewSMSTask(*tenant, producer.SMS{To: *to, Body: *body}, opts...)
	} else {
		task, err = producer.NewEmailTask(*tenant, producer.Email{To: *to, Subject: *subject, Body: *body, From: *from}, opts...)
	}
	if err != nil {
		fmt.Fprintln(stderr, "enqueue:", err)
		return 2
	}

	if err := checkRetention(*retention); err != nil {
		fmt.Fprintln(stderr, "enqueue:", err)
		return 2
	}
	pc, closeRedis, err := connect(ctx, *redisURL, *prefix, *retention)
	if err != nil {
		fmt.Fprintln(stderr, "enqueue:", err)
		return cli.ExitStatus(err)
	}
	defer closeRedis()
	q := *queue
	if q == "" {
		if q, err = pc.Queue(ctx, task.Type(), *tenant); err != nil {
			fmt.Fprintln(stderr, "enqueue:", err)
			return 1
		}
	}
	c := countRun{task: task, count: *count, queue: *queue, named: q, id: *id, stdout: stdout, stderr: stderr}
	enqueued, notEnqueued := c.enqueue(ctx, pc)
	if *count > 1 {
		fmt.Fprintf(stdout, "enqueued %d of %d %s tasks for tenant %s on queue %s\n", enqueued, *count, kind, *tenant, q)
	}
	if notEnqueued > 0 {
		return 1
	}
	return 0
}

// queueOf returns the queue the first pass of bulk checks a task's ID in:
// explicit, when not empty, or its type's (layout.Default's). Under
// layout.Old (no worker of this version has started yet) every type goes
// to default, and two lines of one ID and different types are refused by
// asynq as the second is enqueued, not by the first pass; under more
// shards two lines of one ID and type are refused even when their tenants'
// shards differ: IDs unique per type is the rule it keeps.
func queueOf(explicit string, task *asynq.Task) string {
	if explicit != "" {
		return explicit
	}
	return layout.Default.Queue(task.Type(), task.Headers()[producer.HeaderTenant])
}

// checkTaskFlags checks --max-retry and --queue, for a usage error.
func checkTaskFlags(maxRetry int, queue string) error {
	if maxRetry < 0 {
		return fmt.Errorf("--max-retry %d: must be 0 or more", maxRetry)
	}
	if queue == "" {
		return nil
	}
	if err := producer.ValidateQueue(queue); err != nil {
		return fmt.Errorf("--queue: %w", err)
	}
	return nil
}

// retentionHelp is the help of --retention.
const retentionHelp = "how long a task with an ID is kept once it has run, its ID taken: an enqueue of it again within that is refused; 0 keeps none"

// checkRetention refuses a --retention that producer.WithRetention would.
func checkRetention(d time.Duration) error {
	if d < 0 || d > producer.MaxRetention {
		return fmt.Errorf("--retention %v: give 0 to %v", d, producer.MaxRetention)
	}
	return nil
}
