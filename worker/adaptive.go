package worker

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
)

// adaptiveLimits are what a worker knows of its adaptive rules' limits in
// force (docs/INFLIGHT.md, "Adaptive limits"): each read from Redis at
// most every holdRefresh, and moved by the provider's answers to this
// worker's sends. Safe for concurrent use.
type adaptiveLimits struct {
	mu      sync.Mutex
	m       map[string]*adaptiveEntry // by the rule's limiter key
	version atomic.Int64              // moves when a limit in force does
}

type adaptiveEntry struct {
	state    throttle.Adaptive
	read     time.Time // when state was read
	accepted time.Time // when this worker last reported an accepted send
}

// inForce returns rules with each adaptive rule's check held to its limit
// in force instead of its ceiling; rules itself when none adapts. A limit
// that cannot be read is the last one read, else where it starts.
// limiter is the one of the task's group.
func (t *Throttle) inForce(ctx context.Context, limiter *throttle.Limiter, rules []policies.Applied) []policies.Applied {
	var out []policies.Applied
	for i, a := range rules {
		if a.Min == 0 {
			continue
		}
		if out == nil {
			out = append([]policies.Applied(nil), rules...)
		}
		out[i].Check = t.limitInForce(ctx, t.stateOf(limiter, a), a)
	}
	if out == nil {
		return rules
	}
	return out
}

// limitInForce is adaptive rule a's check held to its limit in force, as
// limiter's group keeps it.
func (t *Throttle) limitInForce(ctx context.Context, limiter *throttle.Limiter, a policies.Applied) throttle.Check {
	c := a.Check
	c.Policy.Limit = min(c.Policy.Limit, max(a.Min, t.adaptive.get(ctx, t, limiter, a).InForce()))
	return c
}

// stateOf is the limiter whose group keeps adaptive rule a's state, for a
// task of limiter's group: the pool's for a global rule over shards, so
// that every shard is held to one limit in force (docs/INFLIGHT.md,
// "Across shards"); else the task's.
func (t *Throttle) stateOf(limiter *throttle.Limiter, a policies.Applied) *throttle.Limiter {
	if a.Shared && t.leased() {
		return t.limiter
	}
	return limiter
}

// get returns the state of a's rule, read again when older than
// holdRefresh.
func (al *adaptiveLimits) get(ctx context.Context, t *Throttle, limiter *throttle.Limiter, a policies.Applied) throttle.Adaptive {
	al.mu.Lock()
	e, ok := al.m[a.Check.Key]
	if ok && time.Since(e.read) < holdRefresh {
		defer al.mu.Unlock()
		return e.state
	}
	al.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	s, err := limiter.LimitInForce(rctx, a.Check, a.Min)
	if err != nil {
		t.logger.Debug("could not read an adaptive rule's limit in force", "rule", a.Rule, "err", err)
		if ok {
			return e.state
		}
		return throttle.Adaptive{Limit: throttle.AdaptiveStart(a.Check.Policy.Limit, a.Min)}
	}
	al.set(t, a, s, false)
	return s
}

// set records s, read or returned by Adapt, and says when the whole limit
// in force moved.
func (al *adaptiveLimits) set(t *Throttle, a policies.Applied, s throttle.Adaptive, accepted bool) {
	al.mu.Lock()
	defer al.mu.Unlock()
	e, ok := al.m[a.Check.Key]
	if !ok {
		e = &adaptiveEntry{}
		al.m[a.Check.Key] = e
	}
	if ok && e.state.InForce() != s.InForce() {
		al.version.Add(1)
		t.logger.Info("an adaptive rule's limit in force moved", "rule", a.Rule, "key", a.Check.Key,
			"from", e.state.InForce(), "to", s.InForce(), "ceiling", a.Check.Policy.Limit)
	}
	e.state, e.read = s, time.Now()
	if accepted {
		e.accepted = e.read
	}
}

// adapt reports to each adaptive rule of rules (at their ceilings) what
// the provider answered a send of taskType for tenant, err: a 429 or 503
// (or, for a cap, a timeout) lowers its limit in force; an accepted send
// may raise it, asked at most once a cooldown from this worker. limiter
// is the one of the task's group.
func (t *Throttle) adapt(limiter *throttle.Limiter, taskType, tenant string, rules []policies.Applied, err error) {
	for _, a := range rules {
		if a.Min == 0 || a.Shadow {
			continue
		}
		answer, ok := answerOf(a, err)
		if !ok {
			continue
		}
		cooldown := throttle.Cooldown(a.Check)
		if answer == throttle.Accepted && !t.adaptive.mayRise(a.Check.Key, cooldown) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
		s, aerr := t.report(ctx, limiter, t.layout.Group(taskType, tenant), a, answer)
		cancel()
		if aerr != nil {
			t.logger.Debug("could not report a provider's answer to an adaptive rule", "rule", a.Rule, "err", aerr)
			continue
		}
		t.adaptive.set(t, a, s, answer == throttle.Accepted)
	}
}

// report runs Adapt for a send of limiter's group, group: for a global
// rule over shards, in the pool, told whether the rule holds tasks back
// in the send's shard.
func (t *Throttle) report(ctx context.Context, limiter *throttle.Limiter, group string, a policies.Applied, answer throttle.Answer) (throttle.Adaptive, error) {
	pool := t.stateOf(limiter, a)
	if pool == limiter {
		return limiter.Adapt(ctx, a.Check, a.Min, answer)
	}
	heldBack := false
	if answer == throttle.Accepted {
		var err error
		if heldBack, err = t.limiter.Leases().HeldBack(ctx, t.limitInForce(ctx, pool, a), group); err != nil {
			return throttle.Adaptive{}, err
		}
	}
	return pool.AdaptHeldBack(ctx, a.Check, a.Min, answer, heldBack)
}

// mayRise reports whether an accepted send may raise the rule of key: a
// cooldown has passed since its limit last moved, as last read, and since
// this worker last asked.
func (al *adaptiveLimits) mayRise(key string, cooldown time.Duration) bool {
	al.mu.Lock()
	defer al.mu.Unlock()
	e, ok := al.m[key]
	if !ok {
		return true
	}
	last := e.accepted
	for _, at := range []time.Time{e.state.Fell, e.state.Rose} {
		if at.After(last) {
			last = at
		}
	}
	return time.Since(last) >= cooldown
}

// answerOf says what err, a send's outcome, tells adaptive rule a.
func answerOf(a policies.Applied, err error) (throttle.Answer, bool) {
	if err == nil {
		return throttle.Accepted, true
	}
	var te *provider.ThrottledError
	if errors.As(err, &te) {
		if te.FromProvider {
			return throttle.SlowDown, true
		}
		return "", false // held back here: the provider was not asked
	}
	if se, ok := errors.AsType[*provider.StatusError](err); ok && se.Code == http.StatusServiceUnavailable {
		return throttle.SlowDown, true
	}
	if a.Check.Policy.Algorithm == throttle.Concurrency {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			return throttle.SlowDown, true
		}
	}
	return "", false
}
