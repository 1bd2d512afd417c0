// Command worker runs Sluice workers: asynq task processing where each SMS
// and email task asks the limiter first and, when denied, comes back at the
// time the limiter gives.
//
//	worker --redis redis://localhost:6379/0 --policies policies.yaml --sms-webhook https://sms.example/send
//
// --redis names one server (redis://), a Redis Cluster (redis+cluster://)
// or a master through Sentinel (redis+sentinel://); see cli.RedisClient.
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
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	asynqmetrics "github.com/hibiken/asynq/x/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/demo"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

const synopsis = `
usage: worker --redis URL --policies FILE [--sms-webhook URL]
              [--smtp-addr HOST:PORT --smtp-from ADDRESS] [flags]
       worker --demo [--demo-tasks N] [--redis URL] [--policies FILE]

Runs a Sluice worker: each task asks the limiter for every rule of the
policies file that applies to it, and a denied task comes back when a slot
frees. A flag shown with a variable can also be set from the environment.

The worker fetches SMS and email tasks alike from its queues, so it needs
a provider for each: --sms-webhook or --sms-log, and --smtp-addr or
--email-log. Without one it does not start (exit 2), rather than archive
that type's tasks unsent.

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
	"decision-timeout": "SLUICE_DECISION_TIMEOUT",
	"metrics-addr":     "SLUICE_METRICS_ADDR",
	"metrics-tenants":  "SLUICE_METRICS_TENANTS",
	"max-hold":         "SLUICE_MAX_HOLD",
	"fetch-interval":   "SLUICE_FETCH_INTERVAL",
	"provider-hold":    "SLUICE_PROVIDER_HOLD",
	"log-level":        "SLUICE_LOG_LEVEL",
	"smtp-addr":        "SLUICE_SMTP_ADDR",
	"smtp-from":        "SLUICE_SMTP_FROM",
	"smtp-user":        "SLUICE_SMTP_USER",
	"smtp-starttls":    "SLUICE_SMTP_STARTTLS",
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:]))
}

func run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	redisURL := fs.String("redis", "", cli.RedisURLHelp)
	policiesPath := fs.String("policies", "", "policies `file` (YAML)")
	smsWebhook := fs.String("sms-webhook", "", "SMS provider webhook `URL`; a bearer token comes from SLUICE_SMS_WEBHOOK_TOKEN or SLUICE_SMS_WEBHOOK_TOKEN_FILE")
	smsLog := fs.Bool("sms-log", false, "log SMS instead of sending them")
	emailLog := fs.Bool("email-log", false, "log email instead of sending it")
	smtpAddr := fs.String("smtp-addr", "", "send email through the SMTP server at `host:port` (such as smtp.example.com:587)")
	smtpFrom := fs.String("smtp-from", "", "sender `address` of email whose task has no from; a display name may come with it: \"Acme <noreply@acme.example>\"")
	smtpUser := fs.String("smtp-user", "", "SMTP `username` for AUTH PLAIN; the password comes from SLUICE_SMTP_PASSWORD or SLUICE_SMTP_PASSWORD_FILE")
	smtpStartTLS := worker.StartTLSRequire
	fs.TextVar(&smtpStartTLS, "smtp-starttls", worker.StartTLSRequire, "STARTTLS `mode`: require, opportunistic (only if offered) or off")
	concurrency := fs.Int("concurrency", worker.DefaultConcurrency, "tasks run at once in this process")
	queues := fs.String("queues", "default=1", "queues and priorities, `name=prio,...`")
	prefix := fs.String("prefix", throttle.DefaultPrefix, "prefix of the limiter's Redis keys")
	checkInterval := fs.Duration("check-interval", worker.DefaultCheckInterval, "how often due retries move to their queue")
	fetchInterval := fs.Duration("fetch-interval", worker.DefaultFetchInterval, "how often an idle worker looks for tasks in its empty queues")
	shutdownTimeout := fs.Duration("shutdown-timeout", worker.DefaultShutdownTimeout, "how long running tasks may finish at shutdown")
	failOpen := fs.Bool("fail-open", false, "run tasks without a decision when Redis cannot decide (default: they wait)")
	decisionTimeout := fs.Duration("decision-timeout", worker.DefaultDecisionTimeout, "longest a task waits for Redis to decide; past it --fail-open says what follows")
	maxHold := fs.Duration("max-hold", worker.DefaultMaxHold, "longest a denied task waits in the worker for its place in line, instead of the retry set (negative: never; 0: the default)")
	providerHold := fs.String("provider-hold", "account", "whose sends a provider's 429 holds back in every worker: account (all tenants) or tenant")
	metricsAddr := fs.String("metrics-addr", "", "serve /metrics, /healthz, /readyz and the status page at `host:port` (such as 127.0.0.1:9464); none when empty")
	metricsTenants := fs.Bool("metrics-tenants", false, "add sluice_tenant_decisions_total, with a tenant label (a time series per tenant)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	demoRun := fs.Bool("demo", false, "run the demo (see above); of the other flags it uses only --redis, --policies, --demo-tasks and --log-level")
	demoTasks := fs.Int("demo-tasks", demo.DefaultTasks, fmt.Sprintf("how many SMS the demo enqueues, `N` from %d to %d; the built-in policies allow 5 a second, and the demo stops after %s", demo.MinTasks, demo.MaxTasks, demo.TimeoutRule))
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
	if *demoRun {
		return runDemo(ctx, *redisURL, *policiesPath, *demoTasks, level)
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{{"check-interval", *checkInterval}, {"fetch-interval", *fetchInterval}, {"shutdown-timeout", *shutdownTimeout}, {"decision-timeout", *decisionTimeout}} {
		if d.value <= 0 {
			fmt.Fprintf(os.Stderr, "worker: --%s %v: must be more than 0\n", d.name, d.value)
			return 2
		}
	}
	if *concurrency < 1 {
		fmt.Fprintf(os.Stderr, "worker: --concurrency %d: must be at least 1\n", *concurrency)
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
	smtpPassword, err := secret(envSMTPPassword)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	webhookToken, err := secret(envSMSWebhookToken)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	var webhook *worker.Webhook
	switch {
	case *smsWebhook != "":
		webhook = &worker.Webhook{URL: *smsWebhook, Token: webhookToken}
		if err := webhook.Validate(); err != nil {
			fmt.Fprintln(os.Stderr, "worker: --sms-webhook:", err)
			return 2
		}
	case webhookToken != "":
		fmt.Fprintf(os.Stderr, "worker: %s needs --sms-webhook (SLUICE_SMS_WEBHOOK)\n", envSMSWebhookToken)
		return 2
	}
	logger := cli.JSONLogger(os.Stderr, level)
	var smtpProvider *worker.SMTP
	switch {
	case *smtpAddr != "" && *emailLog:
		fmt.Fprintln(os.Stderr, "worker: --smtp-addr and --email-log both choose the email provider; give one")
		return 2
	case *smtpAddr != "":
		smtpProvider = &worker.SMTP{Addr: *smtpAddr, From: *smtpFrom, Username: *smtpUser, Password: smtpPassword, StartTLS: smtpStartTLS}
		if err := smtpProvider.Validate(); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 2
		}
	case *smtpFrom != "" || *smtpUser != "" || smtpPassword != "" || isSet(fs, "smtp-starttls"):
		fmt.Fprintln(os.Stderr, "worker: --smtp-from, --smtp-user, --smtp-starttls and SLUICE_SMTP_PASSWORD need --smtp-addr (SLUICE_SMTP_ADDR)")
		return 2
	}

	if webhook == nil && !*smsLog {
		fmt.Fprintf(os.Stderr, "worker: no SMS provider: set --sms-webhook URL (SLUICE_SMS_WEBHOOK), or --sms-log to log SMS instead; "+
			"without one the worker would archive every %s task unsent\n", producer.TypeSMS)
		return 2
	}
	if smtpProvider == nil && !*emailLog {
		fmt.Fprintf(os.Stderr, "worker: no email provider: set --smtp-addr HOST:PORT (SLUICE_SMTP_ADDR), or --email-log to log email instead; "+
			"without one the worker would archive every %s task unsent\n", producer.TypeEmail)
		return 2
	}

	// fail reports err and returns its exit status: 2 for the user's
	// mistake in a flag (a bad --redis URL), 1 otherwise.
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return cli.ExitStatus(err)
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
		ThrottleConfig: worker.ThrottleConfig{
			DelayedTaskCheckInterval: *checkInterval,
			FetchInterval:            *fetchInterval,
			DecisionTimeout:          *decisionTimeout,
			MaxHold:                  *maxHold,
			ProviderHold:             holdScope,
			Logger:                   logger,
		},
		Policies:        policies,
		Concurrency:     *concurrency,
		Queues:          qs,
		Prefix:          *prefix,
		ShutdownTimeout: *shutdownTimeout,
	}
	if *failOpen {
		cfg.FailureMode = throttle.FailOpen
	}
	switch {
	case webhook != nil:
		cfg.SMS = webhook
	case *smsLog:
		cfg.SMS = worker.LogProvider{Logger: logger}
	}
	switch {
	case smtpProvider != nil:
		cfg.Email = smtpProvider
	case *emailLog:
		cfg.Email = worker.LogProvider{Logger: logger}
	}

	var ops net.Listener
	if *metricsAddr != "" {
		// Listened on first, so that a port in use stops the worker at
		// once with a clear error.
		if ops, err = net.Listen("tcp", *metricsAddr); err != nil {
			fmt.Fprintf(os.Stderr, "worker: --metrics-addr %s: %v\n", *metricsAddr, err)
			return 2
		}
		defer ops.Close()
	}
	rdb, err := cli.Connect(ctx, *redisURL)
	if err != nil {
		return fail(err)
	}
	defer rdb.Close()
	reg := prometheus.NewRegistry()
	if ops != nil {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			asynqmetrics.NewQueueMetricsCollector(asynq.NewInspectorFromRedisClient(rdb)))
		if cfg.Metrics, err = worker.NewMetrics(reg, &worker.MetricsConfig{TenantLabel: *metricsTenants}); err != nil {
			return fail(err)
		}
		cfg.Activity = worker.NewActivity(nil)
	}
	srv, err := worker.NewServer(rdb, cfg)
	if err != nil {
		return fail(err)
	}
	var opsServer *http.Server
	if ops != nil {
		status, err := worker.StatusPage(rdb, worker.StatusConfig{
			Policies: policies,
			Activity: cfg.Activity,
			Queues:   slices.Collect(maps.Keys(qs)),
			Prefix:   *prefix,
		})
		if err != nil {
			return fail(err)
		}
		h, err := worker.OpsHandler(worker.OpsConfig{Gatherer: reg, Ready: srv.Ready, Status: status})
		if err != nil {
			return fail(err)
		}
		opsServer = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		defer opsServer.Close()
	}

	// SIGHUP is caught before the first line, so that a reload sent as it
	// appears does not end the worker (SIGHUP's default action).
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

	// The first line says what the worker enforces; a warning for each
	// task type left unthrottled and the operations server's line follow.
	logger.Info("worker started", "redis", cli.DescribeRedis(*redisURL), "enforces", policies.Current().Summary(),
		"sms", providerName(webhook), "email", emailProviderName(smtpProvider),
		"concurrency", *concurrency, "queues", *queues, "max_hold", *maxHold, "provider_hold", *providerHold,
		"decision_timeout", *decisionTimeout, "fail_open", *failOpen, "metrics_addr", *metricsAddr)
	for _, t := range srv.Unthrottled() {
		logger.Warn("task type runs unthrottled: the policies enforce no rule for it", "task_type", t)
	}
	if opsServer != nil {
		go func() {
			if err := opsServer.Serve(ops); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("operations server stopped", "err", err)
			}
		}()
		logger.Info("operations server listening", "addr", ops.Addr().String(),
			"endpoints", "/metrics /healthz /readyz /")
	}

	if err := srv.Run(ctx); err != nil {
		return fail(err)
	}
	logger.Info("worker stopped")
	return 0
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
		policies, err := worker.OpenPolicyFile(policiesPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 1
		}
		cfg.Policies = policies
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

// providerName names the SMS provider for the log, the webhook's URL
// redacted: the webhook when there is one, else the log (the worker does
// not start without either).
func providerName(webhook *worker.Webhook) string {
	if webhook != nil {
		return webhook.String()
	}
	return "log"
}

// emailProviderName names the email provider for the log, as providerName.
func emailProviderName(smtp *worker.SMTP) string {
	if smtp != nil {
		return fmt.Sprintf("smtp %s (STARTTLS %s)", smtp.Addr, smtp.StartTLS)
	}
	return "log"
}

// isSet reports whether the flag name of fs was set, on the command line
// or from the environment.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
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
