// Command worker runs Sluice workers: asynq task processing where each SMS
// and email task asks the limiter first and, when denied, comes back at the
// time the limiter gives.
//
//	worker --redis redis://localhost:6379/0 --policies policies.yaml --sms-webhook https://sms.example/send
//
// With --smtp-addr, email goes through that SMTP server (STARTTLS required by
// default; credentials best given in SLUICE_SMTP_USER and SLUICE_SMTP_PASSWORD).
//
// SIGTERM or SIGINT stops fetching and lets running tasks finish within the
// shutdown timeout; SIGHUP reloads the policies file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/worker"
)

const synopsis = `
usage: worker --redis URL --policies FILE [--sms-webhook URL]
              [--smtp-addr HOST:PORT --smtp-from ADDRESS] [flags]

Runs a Sluice worker: each task asks the limiter for every rule of the
policies file that applies to it, and a denied task comes back when a slot
frees. Every flag can also be set from the environment variable shown;
prefer SLUICE_SMTP_PASSWORD to --smtp-password, which other users can see in ps.`

var env = map[string]string{
	"redis":            "REDIS_URL",
	"policies":         "SLUICE_POLICIES",
	"sms-webhook":      "SLUICE_SMS_WEBHOOK",
	"sms-log":          "SLUICE_SMS_LOG",
	"email-log":        "SLUICE_EMAIL_LOG",
	"concurrency":      "SLUICE_CONCURRENCY",
	"queues":           "SLUICE_QUEUES",
	"prefix":           "SLUICE_PREFIX",
	"check-interval":   "SLUICE_CHECK_INTERVAL",
	"shutdown-timeout": "SLUICE_SHUTDOWN_TIMEOUT",
	"fail-open":        "SLUICE_FAIL_OPEN",
	"max-hold":         "SLUICE_MAX_HOLD",
	"fetch-interval":   "SLUICE_FETCH_INTERVAL",
	"provider-hold":    "SLUICE_PROVIDER_HOLD",
	"log-level":        "SLUICE_LOG_LEVEL",
	"smtp-addr":        "SLUICE_SMTP_ADDR",
	"smtp-from":        "SLUICE_SMTP_FROM",
	"smtp-user":        "SLUICE_SMTP_USER",
	"smtp-password":    "SLUICE_SMTP_PASSWORD",
	"smtp-starttls":    "SLUICE_SMTP_STARTTLS",
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:]))
}

func run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	redisURL := fs.String("redis", "", "Redis `URL` (redis:// or rediss://)")
	policiesPath := fs.String("policies", "", "policies `file` (YAML)")
	smsWebhook := fs.String("sms-webhook", "", "SMS provider webhook `URL`")
	smsLog := fs.Bool("sms-log", false, "log SMS instead of sending them")
	emailLog := fs.Bool("email-log", false, "log email instead of sending it")
	smtpAddr := fs.String("smtp-addr", "", "send email through the SMTP server at `host:port` (such as smtp.example.com:587)")
	smtpFrom := fs.String("smtp-from", "", "sender `address` of email whose task has no from; a display name may come with it: \"Acme <noreply@acme.example>\"")
	smtpUser := fs.String("smtp-user", "", "SMTP `username` for AUTH PLAIN")
	smtpPassword := fs.String("smtp-password", "", "SMTP `password` (prefer the environment variable: flags show in ps)")
	smtpStartTLS := worker.StartTLSRequire
	fs.TextVar(&smtpStartTLS, "smtp-starttls", worker.StartTLSRequire, "STARTTLS `mode`: require, opportunistic (only if offered) or off")
	concurrency := fs.Int("concurrency", 10, "tasks run at once in this process")
	queues := fs.String("queues", "default=1", "queues and priorities, `name=prio,...`")
	prefix := fs.String("prefix", "sluice:", "prefix of the limiter's Redis keys")
	checkInterval := fs.Duration("check-interval", 250*time.Millisecond, "how often due retries move to their queue")
	fetchInterval := fs.Duration("fetch-interval", 100*time.Millisecond, "how often an idle worker looks for tasks in its empty queues")
	shutdownTimeout := fs.Duration("shutdown-timeout", 30*time.Second, "how long running tasks may finish at shutdown")
	failOpen := fs.Bool("fail-open", false, "run tasks without a decision when Redis cannot decide (default: they wait)")
	maxHold := fs.Duration("max-hold", 2*time.Second, "longest a denied task waits in the worker for its place in line, instead of the retry set (negative: never)")
	providerHold := fs.String("provider-hold", "account", "whose sends a provider's 429 holds back in every worker: account (all tenants) or tenant")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	fs.Usage = cli.Usage(fs, synopsis, env)

	if err := cli.Parse(fs, args, env); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "worker: --log-level %q: use debug, info, warn or error\n", *logLevel)
		return 2
	}
	var holdScope worker.HoldScope
	switch *providerHold {
	case "account":
		holdScope = worker.HoldAccount
	case "tenant":
		holdScope = worker.HoldTenant
	default:
		fmt.Fprintf(os.Stderr, "worker: --provider-hold %q: use account or tenant\n", *providerHold)
		return 2
	}
	if *smsWebhook != "" && *smsLog {
		fmt.Fprintln(os.Stderr, "worker: --sms-webhook and --sms-log both choose the SMS provider; give one")
		return 2
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	var smtpProvider *worker.SMTP
	switch {
	case *smtpAddr != "" && *emailLog:
		fmt.Fprintln(os.Stderr, "worker: --smtp-addr and --email-log both choose the email provider; give one")
		return 2
	case *smtpAddr != "":
		smtpProvider = &worker.SMTP{Addr: *smtpAddr, From: *smtpFrom, Username: *smtpUser, Password: *smtpPassword, StartTLS: smtpStartTLS}
		if err := smtpProvider.Validate(); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 2
		}
	case *smtpFrom != "" || *smtpUser != "" || *smtpPassword != "":
		fmt.Fprintln(os.Stderr, "worker: --smtp-from, --smtp-user and --smtp-password need --smtp-addr (SLUICE_SMTP_ADDR)")
		return 2
	}

	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	if *policiesPath == "" {
		fmt.Fprintln(os.Stderr, "worker: no policies: set --policies or SLUICE_POLICIES")
		return 2
	}
	qs, err := parseQueues(*queues)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	policies, err := worker.OpenPolicyFile(*policiesPath)
	if err != nil {
		return fail(err)
	}
	cfg := worker.Config{
		Policies:                 policies,
		Concurrency:              *concurrency,
		Queues:                   qs,
		Prefix:                   *prefix,
		DelayedTaskCheckInterval: *checkInterval,
		FetchInterval:            *fetchInterval,
		ShutdownTimeout:          *shutdownTimeout,
		MaxHold:                  *maxHold,
		ProviderHold:             holdScope,
		Logger:                   logger,
	}
	if *failOpen {
		cfg.FailureMode = worker.FailOpen
	}
	switch {
	case *smsWebhook != "":
		cfg.SMS = &worker.Webhook{URL: *smsWebhook}
	case *smsLog:
		cfg.SMS = worker.LogProvider{Logger: logger}
	}
	switch {
	case smtpProvider != nil:
		cfg.Email = smtpProvider
	case *emailLog:
		cfg.Email = worker.LogProvider{Logger: logger}
	}

	rdb, err := cli.RedisClient(*redisURL)
	if err != nil {
		return fail(err)
	}
	defer rdb.Close()
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pingCtx).Err(); err != nil {
		return fail(fmt.Errorf("Redis at %s unreachable: %v", *redisURL, err))
	}
	srv, err := worker.NewServer(rdb, cfg)
	if err != nil {
		return fail(err)
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			if err := policies.Reload(); err != nil {
				logger.Error("policies not reloaded; the previous ones stay in force", "err", err)
				continue
			}
			logger.Info("policies reloaded", "enforces", policies.Current().Summary())
		}
	}()

	logger.Info("worker started", "enforces", policies.Current().Summary(),
		"unthrottled", "task types without rules run unthrottled",
		"sms", providerName(*smsWebhook, *smsLog), "email", emailProviderName(smtpProvider, *emailLog),
		"concurrency", *concurrency, "queues", *queues)
	if err := srv.Run(ctx); err != nil {
		return fail(err)
	}
	logger.Info("worker stopped")
	return 0
}

func providerName(webhook string, log bool) string {
	switch {
	case webhook != "":
		return "webhook " + webhook
	case log:
		return "log"
	}
	return "none (tasks archived)"
}

func emailProviderName(smtp *worker.SMTP, log bool) string {
	if smtp != nil {
		return fmt.Sprintf("smtp %s (STARTTLS %s)", smtp.Addr, smtp.StartTLS)
	}
	return providerName("", log)
}

// parseQueues reads "name=prio,name=prio".
func parseQueues(s string) (map[string]int, error) {
	qs := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		name, prio, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(prio)
		if !ok || name == "" || err != nil || n < 1 {
			return nil, fmt.Errorf("--queues %q: want name=priority pairs such as default=1,critical=5", s)
		}
		qs[name] = n
	}
	return qs, nil
}
