// Command worker runs Sluice workers: asynq task processing where each SMS
// and email task asks the limiter first and, when denied, comes back at the
// time the limiter gives.
//
//	worker --redis redis://localhost:6379/0 --policies policies.yaml --sms-webhook https://sms.example/send
//
// --redis names one server (redis://), a Redis Cluster (redis+cluster://)
// or a master through Sentinel (redis+sentinel://); see redisconn.Client.
//
// With --smtp-addr, email goes through that SMTP server (STARTTLS required by
// default). Secrets come only from the environment, never from flags:
// SLUICE_SMTP_PASSWORD and SLUICE_SMS_WEBHOOK_TOKEN, or the files named by
// SLUICE_SMTP_PASSWORD_FILE and SLUICE_SMS_WEBHOOK_TOKEN_FILE.
//
// SIGTERM or SIGINT stops fetching and lets running tasks finish within the
// shutdown timeout; SIGHUP reloads the policies file.
//
// With --demo it runs a demonstration that needs nothing but Go (see package
// internal/demo): an embedded Redis unless --redis or REDIS_URL names one,
// built-in policies unless --policies names a file, a burst of --demo-tasks
// SMS for three tenants, live progress, and a summary with a verdict. Exit
// status 0 when the verdict passes, 1 when it fails, 130 when interrupted
// (SIGINT or SIGTERM: the worker shuts down gracefully first).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/demo"
	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/policies"
)

const synopsis = `
usage: worker --redis URL --policies FILE [--sms-webhook URL]
              [--smtp-addr HOST:PORT --smtp-from ADDRESS] [flags]
       worker --demo [--demo-tasks N] [--redis URL] [--policies FILE]

Runs a Sluice worker: each task asks the limiter for every rule of the
policies file that applies to it, and a denied task comes back when a slot
frees. A flag shown with a variable can also be set from the environment.

The worker serves the queues of the task types it has a provider for:
--sms-webhook or --sms-log for SMS, --smtp-addr or --email-log for email.
With both it also serves the queue default, where Sluice 0.x put every
task. Without any it does not start (exit 2); --queues, which may name
queues holding either type, needs both.

Exit status: 0 after a clean shutdown; 1 when Redis, the policies file or
the worker failed; 2 for a usage error (a bad flag or value, an argument
left over after the flags, a bad --redis URL, a missing provider).

With --demo it needs nothing but Go: it runs its own Redis unless --redis is
set, sends a burst of SMS for three tenants through built-in policies, and
ends when every SMS is sent, or when its time is up (--demo-tasks says
when; it prints the time as it starts), with a summary and a verdict
(exit 0 when it passes, 1 when it fails, 130 when interrupted).
` + secretsHelpParagraph

var env = map[string]string{
	"redis":             "REDIS_URL",
	"policies":          "SLUICE_POLICIES",
	"sms-webhook":       "SLUICE_SMS_WEBHOOK",
	"sms-log":           "SLUICE_SMS_LOG",
	"email-log":         "SLUICE_EMAIL_LOG",
	"concurrency":       "SLUICE_CONCURRENCY",
	"shards":            "SLUICE_SHARDS",
	"queues":            "SLUICE_QUEUES",
	"prefix":            "SLUICE_PREFIX",
	"check-interval":    "SLUICE_CHECK_INTERVAL",
	"shutdown-timeout":  "SLUICE_SHUTDOWN_TIMEOUT",
	"fail-open":         "SLUICE_FAIL_OPEN",
	"decision-timeout":  "SLUICE_DECISION_TIMEOUT",
	"metrics-addr":      "SLUICE_METRICS_ADDR",
	"metrics-tenants":   "SLUICE_METRICS_TENANTS",
	"max-hold":          "SLUICE_MAX_HOLD",
	"fetch-interval":    "SLUICE_FETCH_INTERVAL",
	"provider-hold":     "SLUICE_PROVIDER_HOLD",
	"max-provider-hold": "SLUICE_MAX_PROVIDER_HOLD",
	"fairness":          "SLUICE_FAIRNESS",
	"log-level":         "SLUICE_LOG_LEVEL",
	"allow-eviction":    "SLUICE_ALLOW_EVICTION",
	"smtp-addr":         "SLUICE_SMTP_ADDR",
	"smtp-from":         "SLUICE_SMTP_FROM",
	"smtp-user":         "SLUICE_SMTP_USER",
	"smtp-starttls":     "SLUICE_SMTP_STARTTLS",
}

func main() {
	cli.Main(func(ctx context.Context, args []string) int {
		return tracing.Run(ctx, "sluice-worker", func() int { return run(ctx, args) })
	})
}

func run(ctx context.Context, args []string) int {
	f := newFlags()
	if err := cli.Parse(f.fs, args, env); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	// fail reports err and returns its exit status: 2 for the user's
	// mistake in a flag, 1 otherwise.
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return cli.ExitStatus(err)
	}
	level, err := f.level()
	if err != nil {
		return fail(err)
	}
	if *f.demo {
		return runDemo(ctx, *f.redisURL, *f.policies, *f.demoTasks, level)
	}
	logger := cli.JSONLogger(os.Stderr, level)
	cfg, err := f.config(logger)
	if err != nil {
		return fail(err)
	}
	var ops net.Listener
	if *f.metricsAddr != "" {
		// Listened on first, so that a port in use stops the worker at
		// once with a clear error.
		if ops, err = net.Listen("tcp", *f.metricsAddr); err != nil {
			return fail(cli.Usagef("--metrics-addr %s: %v", *f.metricsAddr, err))
		}
		defer ops.Close()
	}
	rdb, err := redisconn.Connect(ctx, *f.redisURL)
	if err != nil {
		return fail(err)
	}
	defer rdb.Close()
	if cfg.Shards, cfg.DrainingShards, err = f.layout(ctx, rdb); err != nil {
		return fail(err)
	}
	w, err := newWorker(rdb, cfg, ops, *f.metricsTenants)
	if err != nil {
		return fail(err)
	}
	defer w.close()
	if err := w.srv.CheckEviction(ctx); err != nil {
		return fail(err)
	}
	if err := w.srv.CheckLayout(ctx); err != nil {
		return fail(err)
	}
	reloadPolicies(ctx, cfg.Policies, w.srv.Unthrottled, logger)

	// The first line says what the worker enforces; a warning for each
	// task type left unthrottled and the operations server's line follow.
	logger.Info("worker started", "redis", redisconn.Describe(*f.redisURL), "enforces", cfg.Policies.Current().Summary(),
		"sms", providerName(cfg.SMS), "email", providerName(cfg.Email),
		"concurrency", cfg.Concurrency, "shards", cfg.Shards, "queues", strings.Join(w.srv.Queues(), ","), "max_hold", cfg.MaxHold, "provider_hold", *f.providerHold, "max_provider_hold", cfg.MaxProviderHold,
		"fairness", *f.fairness,
		"decision_timeout", cfg.DecisionTimeout, "fail_open", *f.failOpen, "metrics_addr", *f.metricsAddr)
	warnUnthrottled(logger, w.srv.Unthrottled())
	w.serveOps(logger)
	if err := w.srv.Run(ctx); err != nil {
		return fail(err)
	}
	logger.Info("worker stopped")
	return 0
}

// reloadPolicies reloads policyFile on each SIGHUP, caught before the
// worker's first line so that a reload sent as it appears does not end
// the worker (SIGHUP's default action), and whenever the file changes on
// disk (policies.File.Watch, docs/DAYONE.md), until ctx ends. Each reload
// is logged, and warns as at start for each task type unthrottled leaves.
func reloadPolicies(ctx context.Context, policyFile *policies.File, unthrottled func() []string, logger *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reloaded := func(why string) func(error) {
		return func(err error) {
			if err != nil {
				logger.Error("policies not reloaded; the previous ones stay in force", "on", why, "err", err)
				return
			}
			logger.Info("policies reloaded", "on", why, "enforces", policyFile.Current().Summary())
			warnUnthrottled(logger, unthrottled())
		}
	}
	go func() {
		for range hup {
			reloaded("SIGHUP")(policyFile.Reload())
		}
	}()
	go policyFile.Watch(ctx, 0, reloaded("a change of the file"))
}

// warnUnthrottled logs a warning for each of types, the task types the
// policies in force leave unthrottled.
func warnUnthrottled(logger *slog.Logger, types []string) {
	for _, t := range types {
		logger.Warn("task type runs unthrottled: the policies enforce no rule for it", "task_type", t)
	}
}

// runDemo runs the demo and returns its exit status.
func runDemo(ctx context.Context, redisURL, policiesPath string, tasks int, level slog.Level) int {
	if tasks < demo.MinTasks || tasks > demo.MaxTasks {
		fmt.Fprintf(os.Stderr, "worker: --demo-tasks %d: give %d to %d\n", tasks, demo.MinTasks, demo.MaxTasks)
		return 2
	}
	cfg := demo.Config{
		RedisURL: redisURL,
		Tasks:    tasks,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	}
	if policiesPath != "" {
		policyFile, err := policies.Open(policiesPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 1
		}
		cfg.Policies = policyFile
	}
	err := demo.Run(ctx, cfg)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, demo.ErrInterrupted): // the last line said so
		return 130
	case errors.Is(err, demo.ErrFailed): // the verdict said why
		return 1
	}
	fmt.Fprintln(os.Stderr, "worker:", err)
	return cli.ExitStatus(err)
}
