// Command enqueue puts Sluice tasks on the queue.
//
//	enqueue sms --redis redis://localhost:6379/0 --tenant acme --to +15551234567 --body "hi" [--count N] [--id ID]
//	enqueue email --redis URL --tenant acme --to a@example.com --subject S --body B [--from F]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/producer"
)

const synopsis = `
usage: enqueue sms   --redis URL --tenant T --to +15551234567 --body TEXT [--count N] [--id ID]
       enqueue email --redis URL --tenant T --to ADDR --subject S --body TEXT [--from ADDR] [--count N] [--id ID]

Validates and enqueues tasks; with --count, N distinct tasks (with --id, IDs
ID-1 ... ID-N). Every flag can also be set from the environment variable shown.`

var env = map[string]string{"redis": "REDIS_URL", "queue": "SLUICE_QUEUE"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:]))
}

func run(ctx context.Context, args []string) int {
	if len(args) == 0 || (args[0] != "sms" && args[0] != "email") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintln(os.Stdout, synopsis[1:])
			return 0
		}
		fmt.Fprintln(os.Stderr, "enqueue: name a kind of task: sms or email (see --help)")
		return 2
	}
	kind := args[0]
	fs := flag.NewFlagSet("enqueue "+kind, flag.ContinueOnError)
	redisURL := fs.String("redis", "", "Redis `URL`")
	queue := fs.String("queue", "default", "asynq queue")
	tenant := fs.String("tenant", "", "tenant id")
	to := fs.String("to", "", "recipient: E.164 number (sms) or address (email)")
	body := fs.String("body", "", "message text")
	subject := fs.String("subject", "", "subject (email)")
	from := fs.String("from", "", "sender address (email, optional)")
	count := fs.Int("count", 1, "how many distinct tasks")
	id := fs.String("id", "", "task ID, for idempotent enqueue")
	maxRetry := fs.Int("max-retry", producer.DefaultMaxRetry, "retries after real failures (throttling never spends them)")
	fs.Usage = cli.Usage(fs, synopsis, env)
	if err := cli.Parse(fs, args[1:], env); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "enqueue:", err)
		return 2
	}
	if *count < 1 {
		fmt.Fprintf(os.Stderr, "enqueue: --count %d: must be at least 1\n", *count)
		return 2
	}

	// Build and validate every task before anything reaches Redis.
	tasks := make([]*asynq.Task, *count)
	for i := range tasks {
		var err error
		opts := []asynq.Option{asynq.MaxRetry(*maxRetry)}
		if kind == "sms" {
			tasks[i], err = producer.NewSMSTask(*tenant, producer.SMS{To: *to, Body: *body}, opts...)
		} else {
			tasks[i], err = producer.NewEmailTask(*tenant, producer.Email{To: *to, Subject: *subject, Body: *body, From: *from}, opts...)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "enqueue:", err)
			return 2
		}
	}

	rdb, err := cli.RedisClient(*redisURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "enqueue:", err)
		return 1
	}
	defer rdb.Close()
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pingCtx).Err(); err != nil {
		fmt.Fprintf(os.Stderr, "enqueue: Redis at %s unreachable: %v\n", *redisURL, err)
		return 1
	}
	pc := producer.NewClientFromRedisClient(rdb)
	defer pc.Close()
	failed := 0
	for i, task := range tasks {
		opts := []asynq.Option{asynq.Queue(*queue)}
		switch {
		case *id != "" && *count == 1:
			opts = append(opts, asynq.TaskID(*id))
		case *id != "":
			opts = append(opts, asynq.TaskID(fmt.Sprintf("%s-%d", *id, i+1)))
		}
		info, err := pc.Enqueue(ctx, task, opts...)
		if err != nil {
			fmt.Fprintf(os.Stderr, "enqueue: task %d: %v\n", i+1, err)
			failed++
			continue
		}
		if *count == 1 {
			fmt.Println(info.ID)
		}
	}
	if *count > 1 {
		fmt.Printf("enqueued %d of %d %s tasks for tenant %s on queue %s\n", *count-failed, *count, kind, *tenant, *queue)
	}
	if failed > 0 {
		return 1
	}
	return 0
}
