package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/demo"
	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// flags are the worker's flags, as parsed.
type flags struct {
	fs                                     *flag.FlagSet
	redisURL, policies, smsWebhook         *string
	smsLog, emailLog                       *bool
	smtpAddr, smtpFrom, smtpUser           *string
	smtpStartTLS                           provider.StartTLSMode
	concurrency, shards                    *int
	queues, prefix                         *string
	checkInterval, fetchInterval, shutdown *time.Duration
	failOpen                               *bool
	decisionTimeout, maxHold, holdCap      *time.Duration
	providerHold, metricsAddr, logLevel    *string
	fairness                               *string
	metricsTenants, demo, allowEviction    *bool
	demoTasks                              *int
}

// newFlags defines the worker's flags on a new flag set, with their
// defaults: the packages' named defaults.
func newFlags() *flags {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	f := &flags{fs: fs, smtpStartTLS: provider.StartTLSRequire}
	f.redisURL = fs.String("redis", "", redisconn.RedisURLHelp)
	f.policies = fs.String("policies", "", "policies `file` (YAML)")
	f.smsWebhook = fs.String("sms-webhook", "", "SMS provider webhook `URL`; a bearer token comes from SLUICE_SMS_WEBHOOK_TOKEN or SLUICE_SMS_WEBHOOK_TOKEN_FILE")
	f.smsLog = fs.Bool("sms-log", false, "log SMS instead of sending them")
	f.emailLog = fs.Bool("email-log", false, "log email instead of sending it")
	f.smtpAddr = fs.String("smtp-addr", "", "send email through the SMTP server at `host:port` (such as smtp.example.com:587)")
	f.smtpFrom = fs.String("smtp-from", "", "sender `address` of email whose task has no from; a display name may come with it: \"Acme <noreply@acme.example>\"")
	f.smtpUser = fs.String("smtp-user", "", "SMTP `username` for AUTH PLAIN; the password comes from SLUICE_SMTP_PASSWORD or SLUICE_SMTP_PASSWORD_FILE")
	fs.TextVar(&f.smtpStartTLS, "smtp-starttls", provider.StartTLSRequire, "STARTTLS `mode`: require, opportunistic (only if offered) or off")
	f.concurrency = fs.Int("concurrency", worker.DefaultConcurrency, "tasks run at once in this process")
	f.queues = fs.String("queues", "", "queues and priorities, `name=prio,...`; default: the queues of the task types the worker has a provider for, and default when it has both")
	f.shards = fs.Int("shards", 0, fmt.Sprintf("shards of the layout, `N` from 1 to %d (docs/SCALING.md); 0: the layout Redis names, or when it names none one per master on a cluster, and 1 on a single Redis or Sentinel, or with --queues", layout.MaxShards))
	f.prefix = fs.String("prefix", throttle.DefaultPrefix, "prefix of the limiter's Redis keys")
	f.checkInterval = fs.Duration("check-interval", worker.DefaultCheckInterval, "how often due retries move to their queue")
	f.fetchInterval = fs.Duration("fetch-interval", worker.DefaultFetchInterval, "how often an idle worker looks for tasks in its empty queues")
	f.shutdown = fs.Duration("shutdown-timeout", worker.DefaultShutdownTimeout, "how long running tasks may finish at shutdown")
	f.failOpen = fs.Bool("fail-open", false, "run tasks without a decision when Redis cannot decide (default: they wait)")
	f.decisionTimeout = fs.Duration("decision-timeout", worker.DefaultDecisionTimeout, "longest a task waits for Redis to decide; past it --fail-open says what follows")
	f.maxHold = fs.Duration("max-hold", worker.DefaultMaxHold, "longest a denied task waits in the worker for its place in line, instead of the retry set (negative: never; 0: the default)")
	f.fairness = fs.String("fairness", "on", "on: tasks waiting for a shared limit are served fairly among tenants, by weight and priority (docs/FAIRNESS.md); off: first come, first served")
	f.providerHold = fs.String("provider-hold", "account", "whose sends a provider's 429 holds back in every worker: account (all tenants) or tenant")
	f.holdCap = fs.Duration("max-provider-hold", worker.DefaultMaxProviderHold, "longest a provider's 429 holds sends back; a longer Retry-After is cut to it, with a warning")
	f.metricsAddr = fs.String("metrics-addr", "", "serve /metrics, /healthz, /readyz and the status page at `host:port` (such as 127.0.0.1:9464); none when empty")
	f.metricsTenants = fs.Bool("metrics-tenants", false, "add sluice_tenant_decisions_total, with a tenant label (a time series per tenant)")
	f.allowEviction = fs.Bool("allow-eviction", false, "run on a Redis whose maxmemory-policy may evict keys (refused by default: an evicted log admits again what it counted, so limits are exceeded)")
	f.logLevel = fs.String("log-level", "info", "debug, info, warn or error")
	f.demo = fs.Bool("demo", false, "run the demo (see above); of the other flags it uses only --redis, --policies, --demo-tasks and --log-level")
	f.demoTasks = fs.Int("demo-tasks", demo.DefaultTasks, fmt.Sprintf("how many SMS the demo enqueues, `N` from %d to %d; the built-in policies allow 5 a second, and the demo stops after %s", demo.MinTasks, demo.MaxTasks, demo.TimeoutRule))
	fs.Usage = cli.Usage(fs, synopsis, env)
	return f
}

// level returns the log level --log-level names.
func (f *flags) level() (slog.Level, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(*f.logLevel)); err != nil {
		return 0, cli.Usagef("--log-level %q: use debug, info, warn or error", *f.logLevel)
	}
	return level, nil
}

// config returns the worker's configuration as the flags give it, but for
// what needs Redis (the metrics, the activity): a usage error for a flag
// with a bad value or one that needs another, and for a missing provider.
// The policies file is read last: an error there is not a usage error.
func (f *flags) config(logger *slog.Logger) (worker.Config, error) {
	for _, d := range []struct {
		name  string
		value time.Duration
	}{{"check-interval", *f.checkInterval}, {"fetch-interval", *f.fetchInterval}, {"shutdown-timeout", *f.shutdown}, {"decision-timeout", *f.decisionTimeout}, {"max-provider-hold", *f.holdCap}} {
		if d.value <= 0 {
			return worker.Config{}, cli.Usagef("--%s %v: must be more than 0", d.name, d.value)
		}
	}
	if *f.concurrency < 1 {
		return worker.Config{}, cli.Usagef("--concurrency %d: must be at least 1", *f.concurrency)
	}
	if *f.shards < 0 || *f.shards > layout.MaxShards {
		return worker.Config{}, cli.Usagef("--shards %d: must be from 1 to %d, or 0 for the layout Redis names", *f.shards, layout.MaxShards)
	}
	hold, err := f.holdScope()
	if err != nil {
		return worker.Config{}, err
	}
	fairness := worker.FairnessOn
	switch *f.fairness {
	case "on":
	case "off":
		fairness = worker.FairnessOff
	default:
		return worker.Config{}, cli.Usagef("--fairness %q: use on or off", *f.fairness)
	}
	sms, email, err := f.providers(logger)
	if err != nil {
		return worker.Config{}, err
	}
	if *f.policies == "" {
		return worker.Config{}, cli.Usagef("no policies: set --policies or SLUICE_POLICIES")
	}
	qs, err := parseQueues(*f.queues)
	if err != nil {
		return worker.Config{}, err
	}
	cfg := worker.Config{
		ThrottleConfig: worker.ThrottleConfig{
			DelayedTaskCheckInterval: *f.checkInterval,
			FetchInterval:            *f.fetchInterval,
			DecisionTimeout:          *f.decisionTimeout,
			MaxHold:                  *f.maxHold,
			ProviderHold:             hold,
			MaxProviderHold:          *f.holdCap,
			Fairness:                 fairness,
			Logger:                   logger,
		},
		SMS: sms, Email: email,
		Concurrency:     *f.concurrency,
		Queues:          qs,
		Prefix:          *f.prefix,
		ShutdownTimeout: *f.shutdown,
		AllowEviction:   *f.allowEviction,
	}
	if *f.failOpen {
		cfg.FailureMode = throttle.FailOpen
	}
	cfg.Policies, err = policies.Open(*f.policies)
	return cfg, err
}

// layout returns the shards of the layout the worker runs (layout.Choose)
// and those of the older layouts whose queues it serves too.
func (f *flags) layout(ctx context.Context, rdb redis.UniversalClient) (shards int, draining []int, err error) {
	lay, err := layout.Choose(ctx, rdb, *f.prefix, f.askedShards(ctx, rdb))
	if err != nil {
		return 0, nil, err
	}
	olds, err := layout.Draining(ctx, rdb, *f.prefix)
	for _, d := range olds {
		draining = append(draining, d.Shards)
	}
	return lay.Shards, draining, err
}

// askedShards returns the shards to ask layout.Choose for: --shards; or,
// when it is 0 and Redis names no layout yet, 1 for --queues (the queues
// named by hand are where the producers put tasks, not a shard's).
func (f *flags) askedShards(ctx context.Context, rdb redis.UniversalClient) int {
	if *f.shards != 0 || *f.queues == "" {
		return *f.shards
	}
	if _, named, err := layout.Read(ctx, rdb, *f.prefix); err == nil && !named {
		return 1
	}
	return 0 // what Redis names; Choose reports an error reading it
}

// holdScope returns the scope --provider-hold names.
func (f *flags) holdScope() (worker.HoldScope, error) {
	switch *f.providerHold {
	case "account":
		return worker.HoldAccount, nil
	case "tenant":
		return worker.HoldTenant, nil
	}
	return 0, cli.Usagef("--provider-hold %q: use account or tenant", *f.providerHold)
}

// providers returns the SMS and email providers the flags and the secrets
// choose; it refuses none at all, two for a type, settings of a provider
// not chosen, and --queues without both (the queues may hold either type).
func (f *flags) providers(logger *slog.Logger) (provider.SMSProvider, provider.EmailProvider, error) {
	sms, err := f.smsProvider(logger)
	if err != nil {
		return nil, nil, err
	}
	email, err := f.emailProvider(logger)
	switch {
	case err != nil:
		return nil, nil, err
	case sms == nil && email == nil:
		return nil, nil, cli.Usagef("no provider: set --sms-webhook URL (SLUICE_SMS_WEBHOOK) or --sms-log for SMS, " +
			"--smtp-addr HOST:PORT (SLUICE_SMTP_ADDR) or --email-log for email, or both")
	case *f.queues != "" && (sms == nil || email == nil):
		return nil, nil, cli.Usagef("--queues names the queues, which may hold %s and %s tasks alike: it needs a provider for each "+
			"(without --queues the worker serves only the queues of the types it has a provider for)", producer.TypeSMS, producer.TypeEmail)
	}
	return sms, email, nil
}

// smsProvider returns the SMS provider the flags choose, nil for none.

func (f *flags) smsProvider(logger *slog.Logger) (provider.SMSProvider, error) {
	token, err := secret(envSMSWebhookToken)
	switch {
	case err != nil:
		return nil, cli.Usagef("%v", err)
	case *f.smsWebhook != "" && *f.smsLog:
		return nil, cli.Usagef("--sms-webhook and --sms-log both choose the SMS provider; give one")
	case *f.smsWebhook != "":
		webhook := &provider.Webhook{URL: *f.smsWebhook, Token: token}
		if err := webhook.Validate(); err != nil {
			return nil, cli.Usagef("--sms-webhook: %v", err)
		}
		return webhook, nil
	case token != "":
		return nil, cli.Usagef("%s needs --sms-webhook (SLUICE_SMS_WEBHOOK)", envSMSWebhookToken)
	case *f.smsLog:
		return provider.LogProvider{Logger: logger}, nil
	}
	return nil, nil
}

// emailProvider returns the email provider the flags choose, nil for none.

func (f *flags) emailProvider(logger *slog.Logger) (provider.EmailProvider, error) {
	password, err := secret(envSMTPPassword)
	switch {
	case err != nil:
		return nil, cli.Usagef("%v", err)
	case *f.smtpAddr != "" && *f.emailLog:
		return nil, cli.Usagef("--smtp-addr and --email-log both choose the email provider; give one")
	case *f.smtpAddr != "":
		smtp := &provider.SMTP{Addr: *f.smtpAddr, From: *f.smtpFrom, Username: *f.smtpUser, Password: password, StartTLS: f.smtpStartTLS}
		if err := smtp.Validate(); err != nil {
			return nil, cli.Usagef("%v", err)
		}
		return smtp, nil
	case *f.smtpFrom != "" || *f.smtpUser != "" || password != "" || f.isSet("smtp-starttls"):
		return nil, cli.Usagef("--smtp-from, --smtp-user, --smtp-starttls and SLUICE_SMTP_PASSWORD need --smtp-addr (SLUICE_SMTP_ADDR)")
	case *f.emailLog:
		return provider.LogProvider{Logger: logger}, nil
	}
	return nil, nil
}

// isSet reports whether the flag name was set, on the command line or
// from the environment.
func (f *flags) isSet(name string) bool {
	set := false
	f.fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// parseQueues reads "name=prio,name=prio"; nil for "" (the default).
func parseQueues(s string) (map[string]int, error) {
	if s == "" {
		return nil, nil
	}
	qs := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		name, prio, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(prio)
		if !ok || name == "" || err != nil || n < 1 {
			return nil, cli.Usagef("--queues %q: want name=priority pairs such as default=1,critical=5", s)
		}
		if err := producer.ValidateQueue(name); err != nil {
			return nil, cli.Usagef("--queues: %v", err)
		}
		qs[name] = n
	}
	return qs, nil
}

// providerName names a provider for the start line: the webhook's URL
// redacted, SMTP's server and STARTTLS mode, or "log".
func providerName(p any) string {
	switch p := p.(type) {
	case *provider.Webhook:
		return p.String()
	case *provider.SMTP:
		return fmt.Sprintf("smtp %s (STARTTLS %s)", p.Addr, p.StartTLS)
	}
	return "log"
}
