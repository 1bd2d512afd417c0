package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
)

// maxHolds is how many times one run of a task may wait in the worker
// (for a provider hold or its place in line) before it goes back through
// the retry set: a waiting task can lose its place to a newcomer and be
// placed again. A run waits at most maxHolds × MaxHold in all.
const maxHolds = 3

// holdRefresh is how long a worker trusts what it read of a provider hold.
// Other workers see a new hold at most this late, and each worker reads a
// hold key at most this often.
const holdRefresh = 250 * time.Millisecond

// Throttle is the asynq middleware that asks the limiter before each task.
// It is safe for concurrent use.
type Throttle struct {
	limiter  *throttle.Limiter
	policies *policies.File
	logger   *slog.Logger
	mode     throttle.FailureMode
	backoff  time.Duration
	timeout  time.Duration // DecisionTimeout
	maxHold  time.Duration
	lead     time.Duration
	scope    HoldScope
	holdCap  time.Duration // MaxProviderHold
	holds    *holdCache
	adaptive *adaptiveLimits

	onDecision func(DecisionEvent) // ThrottleConfig.OnDecision, or nil
	tracer     trace.Tracer        // of ThrottleConfig.TracerProvider

	fair   *shards               // nil: first come, first served
	layout layout.Layout         // the shards; on more than one, global rules are leased
	queues redis.UniversalClient // ThrottleConfig.QueueRedis

	outage *throttle.Outage // logs the limiter going down and up, once each way
	damage *damage          // Redis refusing calls: a damaged key, memory full

	stopOnce sync.Once
	stopping chan struct{}
}

// NewThrottle returns the middleware for limiter and the policies of
// policyFile; a nil cfg takes every default.
func NewThrottle(limiter *throttle.Limiter, policyFile *policies.File, cfg *ThrottleConfig) (*Throttle, error) {
	if limiter == nil || policyFile == nil || policyFile.Current() == nil {
		return nil, errors.New("worker: NewThrottle needs a limiter and loaded policies")
	}
	if cfg == nil {
		cfg = &ThrottleConfig{}
	}
	t := &Throttle{
		limiter:  limiter,
		policies: policyFile,
		logger:   cfg.Logger,
		mode:     cfg.FailureMode,
		backoff:  cfg.LimiterRetry,
		timeout:  cfg.DecisionTimeout,
		maxHold:  cfg.MaxHold,
		scope:    cfg.ProviderHold,
		holdCap:  cfg.MaxProviderHold,
		holds:    &holdCache{limiter: limiter, m: map[string]holdEntry{}},
		adaptive: &adaptiveLimits{m: map[string]*adaptiveEntry{}},
		stopping: make(chan struct{}),

		onDecision: cfg.OnDecision,
		tracer:     tracerOf(cfg.TracerProvider),
	}
	if t.logger == nil {
		t.logger = slog.Default()
	}
	what := "tasks wait and come back (fail-closed)"
	if t.mode == throttle.FailOpen {
		what = "tasks run without a decision (fail-open)"
	}
	t.outage = throttle.NewOutage(t.logger, "limiter unavailable: "+what, "limiter available again")
	t.damage = &damage{logger: t.logger, forget: damageForget, most: damageBackoff}
	if t.backoff <= 0 {
		t.backoff = DefaultLimiterRetry
	}
	if t.maxHold == 0 {
		t.maxHold = DefaultMaxHold
	}
	if t.holdCap <= 0 {
		t.holdCap = DefaultMaxProviderHold
	}
	if t.timeout <= 0 {
		t.timeout = DefaultDecisionTimeout
	}
	interval := cfg.DelayedTaskCheckInterval
	if interval <= 0 {
		interval = asynqDelayedTaskCheckInterval
	}
	fetch := cfg.FetchInterval
	if fetch <= 0 {
		fetch = asynqTaskCheckInterval
	}
	// A task due at second S moves to its queue between S and S+interval,
	// is fetched within the fetch interval, and asynq rounds S down: aim S
	// one second plus both intervals (and 50 ms) before the place, so that
	// the task is in the worker before its place.
	t.lead = max(0, min(t.maxHold, time.Second+interval+fetch+50*time.Millisecond))
	lay, err := shardLayout(cfg, policyFile)
	if err != nil {
		return nil, err
	}
	t.layout, t.queues = lay, cfg.QueueRedis
	if cfg.Fairness == FairnessOn && cfg.QueueRedis != nil {
		t.fair = newShards(lay, policyFile.Current(), t.linesOf(limiter, cfg, fetch))
	}
	return t, nil
}

// linesOf returns the function that makes a group's fair lines, on
// limiter itself on one shard and in the group on more; fetch is the
// asynq server's fetch interval.
func (t *Throttle) linesOf(limiter *throttle.Limiter, cfg *ThrottleConfig, fetch time.Duration) func(string) *fairLines {
	park := cfg.Park
	if park <= 0 {
		park = throttle.DefaultPark
	}
	return func(group string) *fairLines {
		l := limiter
		if t.leased() {
			l = limiter.InGroup(group)
		}
		// A granted task reaches a worker within an idle worker's fetch
		// interval: its place is given that much ahead, and 50 ms more.
		lines := l.Lines(throttle.LinesConfig{Lead: fetch + 50*time.Millisecond, Rules: t.entryRules})
		return &fairLines{group: group, lines: lines, rdb: cfg.QueueRedis, park: park, logger: t.logger,
			nudge: make(chan struct{}, 1), idle: lineIdle, stand: newStanding()}
	}
}

// leased reports whether the layout has more than one shard, over which
// the global rules are leased (docs/SCALING.md).
func (t *Throttle) leased() bool { return t.layout.Shards > 1 }

// Stop ends every wait in progress and every later one: waiting tasks go
// back through the retry set at once, keeping their place in line, so that
// a worker shutting down does not wait for them. Call it before
// asynq.Server.Shutdown (Server.Run does). Safe to call more than once.
func (t *Throttle) Stop() { t.stopOnce.Do(func() { close(t.stopping) }) }

// Middleware wraps next: for each task it resolves the rules of the task's
// type and tenant, checks them all in one atomic limiter call, and runs next
// only if every rule allows.
//
// A denied task takes a place in line (see throttle.Limiter.AllowInLine), so
// a denied backlog comes back one free slot at a time. A place within
// MaxHold is waited for in the worker; a later one sends the task back
// through asynq's retry set, as a provider.ThrottledError timed to return
// shortly before the place, and the task is then held for the rest.
//
// The quota unit is spent when the task is admitted, whether or not the
// provider then succeeds: a provider call that fails after admission used a
// slot, as it did at the provider.
//
// When the provider answers 429 (a provider.ThrottledError with
// FromProvider), the task type's sends (or the tenant's, with HoldTenant)
// are held back in every worker until the provider's Retry-After.
//
// A task of type producer.TypeSMS or producer.TypeEmail whose payload is
// larger than producer.MaxPayload is archived before it reaches the limiter
// or the handler.
//
// Retry budget: the task's budget is the producer.HeaderMaxRetry header
// (asynq's MaxRetry minus one for tasks without it). A real failure with the
// budget spent is archived (asynq.SkipRetry); throttling never spends it.
func (t *Throttle) Middleware(next asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		ctx, span := t.startProcess(ctx, task)
		err := t.process(ctx, next, task)
		endProcess(span, err)
		return err
	})
}

// process is one run of task through the Middleware.
func (t *Throttle) process(ctx context.Context, next asynq.Handler, task *asynq.Task) error {
	tenant := task.Headers()[producer.HeaderTenant]
	if err := producer.ValidateTenant(tenant); err != nil {
		return fmt.Errorf("%w: task %s: header %s: %v", asynq.SkipRetry, task.Type(), producer.HeaderTenant, err)
	}
	if typ := task.Type(); typ == producer.TypeSMS || typ == producer.TypeEmail {
		// Refused before the limiter: an oversized task must not
		// spend a slot of the tenant's quota, nor be decoded.
		if err := producer.CheckPayloadSize(task.Payload()); err != nil {
			return fmt.Errorf("%w: task %s: %v", asynq.SkipRetry, typ, err)
		}
	}
	holdKey := t.holdKey(task.Type(), tenant)
	ceilings := t.policies.Current().For(task.Type(), tenant)
	limiter := t.limiterOf(task.Type(), tenant)
	rules := t.inForce(ctx, limiter, ceilings)
	admit := func(ctx context.Context) error {
		return t.admit(ctx, holdKey, task.Type(), tenant, t.firstComeChecks(rules))
	}
	if t.fair != nil {
		admit = func(ctx context.Context) error { return t.admitFair(ctx, task, holdKey, tenant, rules) }
	}
	if err := traced(ctx, spanAdmit, trace.SpanKindInternal, admit); err != nil {
		return err
	}
	slots := t.slotsOf(ctx, task, tenant, rules)
	err := runHandler(ctx, next, task)
	slots.release()
	t.adapt(limiter, task.Type(), tenant, ceilings, err)
	var te *provider.ThrottledError
	if errors.As(err, &te) && te.FromProvider {
		if te.RetryAfter > t.holdCap {
			t.logger.Warn("a provider asked to hold sends longer than --max-provider-hold; holding them that long",
				"key", holdKey, "retry_after", te.RetryAfter.String(), "max_provider_hold", t.holdCap.String())
			te.RetryAfter = t.holdCap
		}
		if herr := t.holds.hold(ctx, holdKey, te.RetryAfter); herr != nil {
			t.logger.Warn("could not share the provider's hold with other workers", "key", holdKey, "err", herr)
		}
	}
	if err == nil || te != nil || errors.Is(err, asynq.SkipRetry) {
		return err
	}
	if retried, budget := retries(ctx, task); retried >= budget {
		return fmt.Errorf("%w: retry budget of %d spent: %w", asynq.SkipRetry, budget, err)
	}
	return err
}

// runHandler runs next, turning a panic into an error: asynq recovers
// panics outside the middleware, where the retry budget is not checked, so
// a panicking task would get one retry more than its budget.
func runHandler(ctx context.Context, next asynq.Handler, task *asynq.Task) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in the %s handler: %v\n%s", task.Type(), r, debug.Stack())
		}
	}()
	return next.ProcessTask(ctx, task)
}

// holdKey is the limiter key of the provider hold for a task.
func (t *Throttle) holdKey(taskType, tenant string) string {
	if t.scope == HoldTenant {
		return "provider/" + taskType + "/" + tenant
	}
	return "provider/" + taskType
}

// admit waits out a provider hold on holdKey, then asks the limiter for the
// applied rules (none: the task is not throttled); nil means run the task.
// taskType and tenant name the task to the OnDecision hook.
// The hold is read again before each question, as a hold can begin while a
// task waits for its place. All waits of one run together are at most
// maxHolds, each within MaxHold and within half the time left before the
// task's deadline: asynq counts a deadline that passes as a failure, which
// would spend the retry budget.
func (t *Throttle) admit(ctx context.Context, holdKey, taskType, tenant string, all []policies.Applied) error {
	applied, shadow, checks := splitShadow(all)
	id, _ := asynq.GetTaskID(ctx)
	slotWait := time.Duration(0) // waited for a full cap
	for waits := 0; ; waits++ {
		if err := ctx.Err(); err != nil {
			return &provider.ThrottledError{RetryAfter: t.backoff, By: "task cancelled while waiting", Err: err}
		}
		left, err := t.holdLeft(ctx, holdKey)
		if err != nil {
			// A hold that cannot be read counts as none: the limiter's own
			// failure mode then decides.
			t.logger.Debug("could not read the provider hold", "key", holdKey, "err", err)
		}
		if left > 0 {
			if waits < maxHolds && t.wait(ctx, left) {
				continue
			}
			return &provider.ThrottledError{RetryAfter: left, By: "provider hold"}
		}
		if len(checks) == 0 {
			t.shadowOnly(ctx, taskType, tenant, shadow)
			return nil
		}
		asked := time.Now()
		md, err := t.decide(ctx, t.limiterOf(taskType, tenant), id, checks)
		e := DecisionEvent{TaskType: taskType, Tenant: tenant, Decision: md, Err: err, Latency: time.Since(asked),
			FailedOpen: err != nil && ctx.Err() == nil && t.mode == throttle.FailOpen, At: md.At}
		if err == nil && md.Allowed && len(shadow) > 0 {
			e.Shadow = t.shadow(ctx, id, shadow)
		}
		t.decided(e, applied)
		if err != nil {
			return t.undecided(ctx, id, e)
		}
		t.outage.Observe(nil, "latency", e.Latency)
		if md.Allowed {
			recordAdmission(t.logger, id, md.At, applied)
			return nil
		}
		start := time.Now()
		if isCap(applied[md.Denied]) && slotWait+slotPoll <= t.maxHold && t.wait(ctx, min(md.RetryAfter, slotPoll)) {
			// A slot frees when a send ends: asked again shortly.
			slotWait += slotPoll
			waits--
			continue
		}
		if waits < maxHolds && t.wait(ctx, md.RetryAfter) {
			continue
		}
		// Not waited for, or the wait was cut short: back through the retry
		// set, shortly before the place; from a full cap, soon.
		back := md.RetryAfter - time.Since(start)
		if isCap(applied[md.Denied]) {
			back = min(back, t.backoff)
		} else if back > t.maxHold {
			back -= t.lead
		}
		return &provider.ThrottledError{RetryAfter: max(back, 0), By: "rule " + applied[md.Denied].Rule}
	}
}

// undecided says what follows a limiter call that failed (e.Err): the
// outage (or Redis's refusal) is noted, and the task runs (nil, fail-open)
// or comes back later.
func (t *Throttle) undecided(ctx context.Context, id string, e DecisionEvent) error {
	err := e.Err
	refused := isDamage(err)
	switch {
	case refused:
		// Not an outage: Redis answers, but not for this task's keys.
		t.damage.note("the decision of a "+e.TaskType+" task of tenant "+e.Tenant, err)
	case ctx.Err() == nil:
		t.outage.Observe(err, "latency", e.Latency)
	}
	t.logger.Debug("limiter did not decide", "task", id, "latency", e.Latency, "err", err)
	switch {
	case ctx.Err() != nil:
		// Not the limiter's fault: never run a task without a decision
		// because its own context ended (asynq may have requeued it).
		return &provider.ThrottledError{RetryAfter: t.backoff, By: "task cancelled while waiting", Err: err}
	case t.mode == throttle.FailOpen:
		t.logger.Warn("limiter unavailable; running the task without a decision (fail-open)",
			"task", id, "type", e.TaskType, "tenant", e.Tenant, "latency", e.Latency, "err", err)
		return nil
	case refused:
		// Back later than from an outage: a damaged key stays damaged
		// until someone repairs it, and the task must not spin.
		return &provider.ThrottledError{RetryAfter: t.damage.most, By: "Redis refused the decision", Err: err}
	}
	return &provider.ThrottledError{RetryAfter: t.backoff, By: "limiter unavailable", Err: err}
}

// shadow asks the limiter for each rule in shadow mode, on its own and
// within the decision timeout: a shadow rule admits and records the task
// when its window has room, and never holds it back. Nothing waits for a
// place: shadow rules take none.
func (t *Throttle) shadow(ctx context.Context, id string, shadow []policies.Applied) []ShadowDecision {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	out := make([]ShadowDecision, len(shadow))
	for i, a := range shadow {
		var d throttle.Decision
		var err error
		if isCap(a) {
			// A slot is named by its holder, and freed when the send ends.
			var md throttle.MultiDecision
			md, err = t.limiter.AllowInLine(ctx, id, []throttle.Check{a.Check})
			d = md.Decision
		} else {
			d, err = t.limiter.AllowN(ctx, a.Check.Key, a.Check.Policy, a.Check.Cost)
		}
		out[i] = ShadowDecision{Rule: a.Rule, Allowed: err == nil && d.Allowed, Err: err}
		if err != nil {
			t.logger.Debug("shadow rule did not decide", "rule", a.Rule, "err", err)
		}
	}
	return out
}

// splitShadow returns the rules of all that are enforced, in order, those
// in shadow mode, and the limiter checks of the enforced ones.
func splitShadow(all []policies.Applied) (applied, shadow []policies.Applied, checks []throttle.Check) {
	for _, a := range all {
		if a.Shadow {
			shadow = append(shadow, a)
		} else {
			applied = append(applied, a)
			checks = append(checks, a.Check)
		}
	}
	return applied, shadow, checks
}

// shadowOnly asks the limiter about a task whose rules are all in shadow
// mode, when it has any, and gives the decisions to OnDecision: the task
// is allowed whatever they say.
func (t *Throttle) shadowOnly(ctx context.Context, taskType, tenant string, shadow []policies.Applied) {
	if len(shadow) == 0 {
		return
	}
	asked := time.Now()
	e := DecisionEvent{TaskType: taskType, Tenant: tenant, Decision: throttle.MultiDecision{Decision: throttle.Decision{Allowed: true}, Denied: -1}}
	id, _ := asynq.GetTaskID(ctx)
	e.Shadow = t.shadow(ctx, id, shadow)
	e.Latency = time.Since(asked)
	t.decided(e, nil)
}

// holdLeft reads the provider hold on key within the decision timeout.
func (t *Throttle) holdLeft(ctx context.Context, key string) (time.Duration, error) {
	return t.holds.left(ctx, key, t.timeout)
}

// decide asks limiter for checks within the decision timeout.
func (t *Throttle) decide(ctx context.Context, limiter *throttle.Limiter, id string, checks []throttle.Check) (throttle.MultiDecision, error) {
	ctx, span, traced := child(ctx, spanDecide, trace.SpanKindInternal)
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	d, err := limiter.AllowInLine(ctx, id, checks)
	err = timedOut(ctx, err)
	if traced {
		endDecide(span, d.Allowed, d.RetryAfter, err)
	}
	return d, err
}

// limiterOf is the limiter that decides, first come, first served, the
// tasks of taskType for tenant: on more than one shard, that of their
// shard's group (docs/SCALING.md, "First come, first served over
// shards").
func (t *Throttle) limiterOf(taskType, tenant string) *throttle.Limiter {
	if !t.leased() {
		return t.limiter
	}
	return t.limiter.InGroup(t.layout.Group(taskType, tenant))
}

// firstComeChecks are rules with each global rule's check marked Leased
// on more than one shard.
func (t *Throttle) firstComeChecks(rules []policies.Applied) []policies.Applied {
	if !t.leased() {
		return rules
	}
	out := make([]policies.Applied, len(rules))
	for i, ap := range rules {
		out[i] = ap
		out[i].Check = t.leasedCheck(ap)
	}
	return out
}

// timedOut makes err, the error of a call made with ctx, match
// context.DeadlineExceeded when ctx's deadline has passed: the Redis client
// sets its connection's deadline from ctx's, and may report the deadline as
// the connection's i/o timeout rather than as ctx's error.
func timedOut(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, context.DeadlineExceeded)
}

// decided gives one limiter call, e without its Rules, to the OnDecision
// hook, if there is one.
func (t *Throttle) decided(e DecisionEvent, applied []policies.Applied) {
	if t.onDecision == nil {
		return
	}
	e.Rules, e.Limits = make([]string, len(applied)), make([]int, len(applied))
	for i, a := range applied {
		e.Rules[i], e.Limits[i] = a.Rule, a.Check.Policy.Limit
	}
	if e.Err != nil {
		e.Decision = throttle.MultiDecision{}
	}
	t.onDecision(e)
}

// wait waits d in the worker when d is within MaxHold and within half the
// time left before ctx's deadline, and reports whether it did; false when
// d is too long or the wait was cut short by ctx or by Stop.
func (t *Throttle) wait(ctx context.Context, d time.Duration) bool {
	if t.maxHold < 0 || d > t.maxHold {
		return false
	}
	if deadline, ok := ctx.Deadline(); ok && d > time.Until(deadline)/2 {
		return false
	}
	return t.sleep(ctx, d)
}

// sleep waits d, and reports whether it did: false when ctx ended or Stop
// was called first.
func (t *Throttle) sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
	case <-t.stopping:
	}
	return false
}

// retries returns how many real failures the task has had and its budget.
func retries(ctx context.Context, task *asynq.Task) (retried, budget int) {
	retried, _ = asynq.GetRetryCount(ctx)
	if n, err := strconv.Atoi(task.Headers()[producer.HeaderMaxRetry]); err == nil && n >= 0 {
		return retried, n
	}
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	return retried, max(maxRetry-1, 0)
}
