package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
)

// fairLines is the part of a Throttle that serves tasks through the fair
// lines (docs/FAIRNESS.md): a task that cannot go at once waits in its
// tenant's line, parked in asynq's retry set, and a task given a slot is
// moved to the front of its queue.
type fairLines struct {
	group  string // its limiter group
	lines  *throttle.Lines
	rdb    redis.UniversalClient // the queues' Redis
	park   time.Duration
	logger *slog.Logger
	nudge  chan struct{} // wakes the dispatch loop: a task was parked
	idle   time.Duration // the longest the dispatch loop sleeps: lineIdle

	stand *standing // tasks waiting for a cap's slot at this worker
}

// moveRetries is how many times a granted task still active (its worker
// has not handed it back to asynq yet, or it stands there and has not
// claimed it yet) is tried again, moveRetryDelay apart, before its grant
// is taken back (Lines.Absent).
const (
	moveRetries    = 5
	moveRetryDelay = 10 * time.Millisecond
)

// move moves each granted task to the front of its queue. A task that no
// longer exists or cannot run (archived, completed) leaves the lines; one
// still active is tried again shortly, in the background, while its grant
// is still unclaimed.
func (f *fairLines) move(ctx context.Context, grants []throttle.Grant) {
	var elsewhere []string // running at another worker: maybe standing there
	for _, g := range grants {
		if f.stand.granted(g.ID) || f.moveOne(ctx, g) {
			continue
		}
		elsewhere = append(elsewhere, g.ID)
	}
	if len(elsewhere) > 0 {
		if err := f.lines.NotifyGranted(ctx, elsewhere...); err != nil {
			f.logger.Debug("could not tell the workers of their standing tasks' grants", "err", err)
		}
	}
	for _, g := range grants {
		if !slices.Contains(elsewhere, g.ID) {
			continue
		}
		go func() {
			ctx := context.WithoutCancel(ctx)
			for range moveRetries {
				time.Sleep(moveRetryDelay)
				// Claimed meanwhile (it was fetched, and sent), the task
				// must not be moved again: it may be waiting out a real
				// failure's backoff.
				if held, err := f.lines.Granted(ctx, g.ID); err != nil || !held || f.moveOne(ctx, g) {
					return
				}
			}
			// Neither claimed nor handed back: it stood at a worker that
			// died or stalled. Its grant goes to others now, and it waits
			// again at the tail of its flow, or, absent again, leaves.
			f.logger.Debug("a granted task stayed active; its grant is taken back", "task", g.ID, "queue", g.Queue)
			left, err := f.lines.Absent(ctx, g.ID)
			if err != nil {
				f.logger.Debug("could not take back the grant of a task that stayed active; it lapses", "task", g.ID, "err", err)
			}
			if left {
				f.bringBack(ctx, g)
			}
		}()
	}
}

// Once a task absent twice has left the lines, it is looked at
// bringBackTries times, bringBackDelay apart: if it stops running (its
// worker was alive after all, and parked it), it is moved to the front of
// its queue, to arrive again; else its worker died, and asynq brings it
// back when it recovers it.
const (
	bringBackTries = 20
	bringBackDelay = 250 * time.Millisecond
)

// bringBack moves g's task, which left the lines, to the front of its
// queue once it stops running.
func (f *fairLines) bringBack(ctx context.Context, g throttle.Grant) {
	for range bringBackTries {
		time.Sleep(bringBackDelay)
		res, err := toFront(ctx, f.rdb, g.Queue, g.ID)
		if err != nil || res != frontActive {
			return
		}
	}
}

// moveOne moves one granted task, and reports whether that is settled
// (moved, dropped, or an error logged); false means the task is still
// active and may be tried again.
func (f *fairLines) moveOne(ctx context.Context, g throttle.Grant) bool {
	res, err := toFront(ctx, f.rdb, g.Queue, g.ID)
	switch {
	case err != nil:
		f.logger.Debug("could not move a granted task to the front of its queue; its grant will be taken back",
			"task", g.ID, "queue", g.Queue, "err", err)
	case res == frontGone || res == frontCannotRun:
		if err := f.lines.Drop(ctx, g.ID); err != nil {
			f.logger.Debug("could not drop a task that cannot run from the lines", "task", g.ID, "err", err)
		}
	case res == frontActive:
		return false
	}
	return true
}

// Lines returns the fair lines t serves tasks through; nil when it serves
// first come, first served (no ThrottleConfig.QueueRedis, or FairnessOff),
// and, for now, on more than one shard, where each shard has lines of its
// own (docs/SCALING.md, "Steps").
func (t *Throttle) Lines() *throttle.Lines {
	if t.fair == nil || t.leased() {
		return nil
	}
	return t.fair.group(throttle.DefaultGroup).lines
}

// AllLines returns the fair lines of every shard t serves tasks through,
// by group name: Lines alone on one shard; nil when it serves first come,
// first served. Lines made later, for a task type a reload gave rules,
// are not in it.
func (t *Throttle) AllLines() []*throttle.Lines {
	if t.fair == nil {
		return nil
	}
	if !t.leased() {
		return []*throttle.Lines{t.Lines()}
	}
	var out []*throttle.Lines
	for _, f := range t.fair.all() {
		out = append(out, f.lines)
	}
	return out
}

// wake nudges the dispatch loop without waiting.
func (f *fairLines) wake() {
	select {
	case f.nudge <- struct{}{}:
	default:
	}
}

// lineIdle is the longest the dispatch loop sleeps when nothing waits:
// other workers' tasks may start waiting meanwhile, and their own loops and
// arrivals give their slots too.
const lineIdle = time.Second

// RunLines gives the slots of the fair lines to parked tasks, and moves
// them to the front of their queues, until ctx ends or Stop is called: a
// dispatch loop per shard's lines, and on more than one shard the
// balancing of the global rules' leases, first come, first served too.
// It returns at once when there is neither: on one shard, first come,
// first served (no ThrottleConfig.QueueRedis, or FairnessOff).
// Server.Run runs it; a server of your own should run it in a goroutine
// beside asynq.
func (t *Throttle) RunLines(ctx context.Context) {
	if t.fair == nil && !t.leased() {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if t.fair != nil {
		t.fair.serve(func(f *fairLines) { wg.Go(func() { t.runLines(ctx, f) }) })
	}
	if t.leased() {
		wg.Go(func() { t.runBalancers(ctx) })
	}
	select {
	case <-ctx.Done():
	case <-t.stopping:
	}
	if t.fair != nil {
		t.fair.serve(nil)
	}
	cancel()
	wg.Wait()
}

// runLines is the dispatch loop of one shard's lines, f.
func (t *Throttle) runLines(ctx context.Context, f *fairLines) {
	// Woken at once when another process makes room (a reset, a reload,
	// a grant dropped), not at the end of its sleep.
	woken, unsubscribe, err := f.lines.Wakeups(ctx)
	if err != nil {
		f.logger.Warn("the dispatch loop will not be woken by other processes, only by its own timer", "group", f.group, "err", err)
	} else {
		defer func() { _ = unsubscribe() }()
	}
	// Grants given elsewhere to tasks standing here (a cap's freed slot).
	if unsubscribe, err := f.lines.Grants(ctx, func(id string) { f.stand.granted(id) }); err != nil {
		f.logger.Warn("tasks standing for a slot will learn of their grants only at the end of their stand", "group", f.group, "err", err)
	} else {
		defer func() { _ = unsubscribe() }()
	}
	var refreshed *policies.Policies
	adapted := t.adaptive.version.Load()
	for {
		if cur := t.policies.Current(); cur != refreshed && t.refreshLines(ctx, f, cur) {
			refreshed = cur
			t.fair.ensure(cur) // a type the reload added: its shards' loops
		}
		// An adaptive limit in force moved: the waiting flows take it.
		if v := t.adaptive.version.Load(); v != adapted && refreshed != nil && t.refreshLines(ctx, f, refreshed) {
			adapted = v
		}
		dctx, cancel := context.WithTimeout(ctx, t.timeout)
		turn, err := f.lines.Dispatch(dctx)
		cancel()
		// Timed from the reply, not from the end of the moves below: a
		// step that wakes late gives its slots late, and the pace never
		// gets that time back.
		replied := time.Now()
		sleep := f.idle
		if err != nil {
			f.move(ctx, turn.Granted) // given by its first calls, before the error
		}
		switch {
		case isDamage(err):
			f.logger.Debug("could not dispatch the fair lines", "group", f.group, "err", err)
			t.damage.note("the fair lines' dispatch", err)
			sleep = t.damage.backoff(t.backoff)
		case err != nil:
			f.logger.Debug("could not dispatch the fair lines", "group", f.group, "err", err)
			sleep = t.backoff
		default:
			t.damage.ok()
			for _, r := range turn.Refused {
				t.damage.note("the fair lines' dispatch", errors.New(r))
			}
			f.move(ctx, turn.Granted)
			if turn.Wake >= 0 {
				sleep = min(turn.Wake, f.idle)
			}
		}
		if err != nil {
			replied = time.Now() // a backoff is a whole backoff
		}
		timer := time.NewTimer(time.Until(replied.Add(sleep)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-t.stopping:
			timer.Stop()
			return
		case <-f.nudge:
			timer.Stop()
		case <-woken:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// refreshLines gives the flows waiting in f the rules and weights of p,
// after a reload or at start (the flows keep the rules their last task
// brought), and reports whether it did.
func (t *Throttle) refreshLines(ctx context.Context, f *fairLines, p *policies.Policies) bool {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	flows, err := f.lines.Waiting(ctx, throttle.MaxFlows)
	if err != nil {
		t.logger.Debug("could not list the waiting flows to give them the policies' rules", "err", err)
		if isDamage(err) {
			t.damage.note("the fair lines' list of waiting flows", err)
		}
		return false
	}
	refresh := make([]throttle.FlowRules, 0, len(flows))
	for _, w := range flows {
		rules := t.inForce(ctx, t.limiterOf(w.Class, w.Tenant), p.For(w.Class, w.Tenant))
		refresh = append(refresh, throttle.FlowRules{Flow: w.Flow, Weight: p.Weight(w.Tenant), Checks: t.lineChecks(rules)})
	}
	err = f.lines.Refresh(ctx, refresh)
	switch {
	case errors.Is(err, throttle.ErrNotWoken):
		// Refreshed: only the other workers' loops were not told at once.
		t.logger.Warn("gave the waiting flows the policies' rules, but could not wake the other workers", "err", err)
	case err != nil:
		t.logger.Debug("could not give the waiting flows the policies' rules", "err", err)
		if isDamage(err) {
			t.damage.note("the fair lines' refresh of the policies' rules", err)
		}
		return false
	}
	return true
}

// lineChecks are the checks the lines keep of rules: those not in shadow
// mode; on more than one shard a global rule is held to its shard's lease.
func (t *Throttle) lineChecks(rules []policies.Applied) []throttle.LineCheck {
	var checks []throttle.LineCheck
	for _, ap := range rules {
		if !ap.Shadow {
			checks = append(checks, throttle.LineCheck{Check: t.leasedCheck(ap), Shared: ap.Shared})
		}
	}
	return checks
}

// leasedCheck is ap's check, marked Leased when it is a global rule
// enforced and the layout has more than one shard.
func (t *Throttle) leasedCheck(ap policies.Applied) throttle.Check {
	c := ap.Check
	c.Leased = ap.Shared && !ap.Shadow && t.leased()
	return c
}

// entryRules gives a task parked at enqueue the weight and checks of the
// policies in force, as its arrival would bring them.
func (t *Throttle) entryRules(class, tenant string) (float64, []throttle.LineCheck) {
	p := t.policies.Current()
	return p.Weight(tenant), t.lineChecks(t.inForce(context.Background(), t.limiterOf(class, tenant), p.For(class, tenant)))
}

// admitFair is admit through the fair lines: after any provider hold, the
// task arrives at its line, and is run at once, run at its place (a wait
// of at most the lines' lead), or parked in the retry set until a grant
// moves it to the front of its queue.
func (t *Throttle) admitFair(ctx context.Context, task *asynq.Task, holdKey, tenant string, all []policies.Applied) error {
	applied, shadow, _ := splitShadow(all)
	if len(applied) == 0 {
		return t.admit(ctx, holdKey, task.Type(), tenant, all)
	}
	f := t.fair.of(task.Type(), tenant) // made here, not for a type without rules
	priority, err := producer.TaskPriority(task)
	if err != nil {
		return fmt.Errorf("%w: task %s: %v", asynq.SkipRetry, task.Type(), err)
	}
	if err := t.waitHold(ctx, holdKey); err != nil {
		return err
	}
	id, _ := asynq.GetTaskID(ctx)
	queue, _ := asynq.GetQueueName(ctx)
	a := throttle.Arrival{Class: task.Type(), Priority: priority, Tenant: tenant,
		Weight: t.policies.Current().Weight(tenant), Queue: queue, ID: id, Checks: t.lineChecks(applied)}
	// A task of a concurrency rule stands here for its slot, up to
	// MaxHold, entered before it arrives: a grant given meanwhile is kept.
	var granted <-chan struct{}
	leave := func() {}
	if caps, _ := capsOf(applied); len(caps) > 0 && t.maxHold > 0 {
		granted, leave = f.stand.enter(id)
		defer leave()
	}
	stood, last := time.Duration(0), false
	for {
		turn, asked, err := t.arrive(ctx, f, a, applied, shadow)
		if err != nil {
			return err
		}
		switch turn.Outcome {
		case throttle.Admitted:
			return t.unsent(f, id, task.Type(), all, t.fresh(ctx, f, id, applied, a.Checks, asked))
		case throttle.Placed:
			if t.waitPlace(ctx, turn.Wait) {
				return t.unsent(f, id, task.Type(), all, t.fresh(ctx, f, id, applied, a.Checks, asked.Add(turn.Wait)))
			}
			// Its place passes unused: it comes back as a new arrival.
			return t.unsent(f, id, task.Type(), all, &provider.ThrottledError{RetryAfter: t.backoff,
				By: "place too close to the task's deadline, or task cancelled", Err: ctx.Err()})
		}
		f.wake()
		if granted != nil && !last {
			start := time.Now()
			came := stood < t.maxHold && t.standFor(ctx, granted, t.maxHold-stood)
			stood += time.Since(start)
			if came {
				continue // its grant came: it claims it
			}
			// Its stand is over: it asks once more, as its grant may have
			// come just now. It stands no more, so that a grant given
			// after that ask is moved to it, not told.
			if ctx.Err() == nil && !t.stopped() {
				leave()
				last = true
				continue
			}
		}
		return &provider.ThrottledError{RetryAfter: f.park, By: "rule " + applied[max(turn.By, 0)].Rule}
	}
}

// arrive asks f's lines for task a, once, and tells the OnDecision hook;
// an error is what the task returns (the limiter did not decide). It
// returns the turn and when it asked.
func (t *Throttle) arrive(ctx context.Context, f *fairLines, a throttle.Arrival, applied, shadow []policies.Applied) (throttle.Turn, time.Time, error) {
	asked := time.Now()
	sctx, span, traced := child(ctx, spanDecide, trace.SpanKindInternal)
	actx, cancel := context.WithTimeout(sctx, t.timeout)
	turn, err := f.lines.Arrive(actx, a)
	err = timedOut(actx, err)
	cancel()
	if traced {
		endTurn(span, turn, err)
	}
	e := DecisionEvent{TaskType: a.Class, Tenant: a.Tenant, Err: err, Latency: time.Since(asked), Outcome: turn.Outcome, At: turn.At,
		FailedOpen: err != nil && ctx.Err() == nil && t.mode == throttle.FailOpen}
	e.Decision = turnDecision(turn, len(applied), max(turn.By, 0), f.park)
	if err == nil && e.Decision.Allowed && len(shadow) > 0 {
		e.Shadow = t.shadow(ctx, a.ID, shadow)
	}
	t.decided(e, applied)
	if err != nil {
		if uerr := t.undecided(ctx, a.ID, e); uerr != nil {
			return turn, asked, uerr
		}
		// Fail-open: run without a decision.
		return throttle.Turn{Outcome: throttle.Admitted}, asked, nil
	}
	t.outage.Observe(nil, "latency", e.Latency)
	for _, r := range turn.Refused {
		t.damage.note("the fair lines, at an arrival", errors.New(r))
	}
	f.move(ctx, turn.Granted)
	if turn.Outcome == throttle.Admitted || turn.Outcome == throttle.Placed {
		recordAdmission(t.logger, a.ID, turn.At, applied)
	}
	return turn, asked, nil
}

// stopped reports whether Stop was called.
func (t *Throttle) stopped() bool {
	select {
	case <-t.stopping:
		return true
	default:
		return false
	}
}

// standFor waits for a grant on granted, at most d and at most half the
// time left before ctx's deadline (asynq counts a deadline that passes
// as a failure); false when it did not come, or ctx ended or Stop was
// called first.
func (t *Throttle) standFor(ctx context.Context, granted <-chan struct{}, d time.Duration) bool {
	if deadline, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(deadline)/2)
	}
	if d <= 0 {
		return false
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-granted:
		return true
	case <-timer.C:
	case <-ctx.Done():
	case <-t.stopping:
	}
	return false
}

// turnDecision is the limiter's decision that turn amounts to, for the
// OnDecision hook: allowed when the task runs (at once or at its place),
// denied by check denied (the rule it waits for) when it was parked.
func turnDecision(turn throttle.Turn, checks, denied int, park time.Duration) throttle.MultiDecision {
	md := throttle.MultiDecision{Denied: -1, Checks: make([]throttle.Decision, checks)}
	if turn.Outcome == throttle.Parked {
		md.Denied = denied
		md.RetryAfter = park
		return md
	}
	md.Allowed = true
	return md
}

// waitHold waits out a provider hold on holdKey, at most maxHolds times
// MaxHold; an error sends the task back until the hold ends.
func (t *Throttle) waitHold(ctx context.Context, holdKey string) error {
	for waits := 0; ; waits++ {
		left, err := t.holdLeft(ctx, holdKey)
		if err != nil {
			// A hold that cannot be read counts as none: the limiter's own
			// failure mode then decides.
			t.logger.Debug("could not read the provider hold", "key", holdKey, "err", err)
		}
		if left <= 0 {
			return nil
		}
		if waits >= maxHolds || !t.wait(ctx, left) {
			return &provider.ThrottledError{RetryAfter: left, By: "provider hold"}
		}
	}
}

// waitPlace waits d for a place the lines gave (at most their lead), unless
// it is more than half the time left before ctx's deadline, or ctx ends or
// Stop is called first.
func (t *Throttle) waitPlace(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	// As wait: asynq counts a deadline that passes as a failure.
	if deadline, ok := ctx.Deadline(); ok && d > time.Until(deadline)/2 {
		return false
	}
	return t.sleep(ctx, d)
}
