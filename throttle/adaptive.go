package throttle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/lua"
)

// An adaptive rule's limit is a ceiling: the limit in force follows what
// the provider answers, lowered on a 429 or 503 and raised back while
// sends succeed, between a floor and the ceiling (docs/INFLIGHT.md,
// "Adaptive limits"). It is kept in Redis beside the rule's key, in the
// hash <prefix>{<group>}a:<body>, so every worker holds the rule to it.

// Answer is what a provider said to a send of an adaptive rule.
type Answer string

// The answers Adapt takes.
const (
	// Accepted: the provider took the send.
	Accepted Answer = "ok"
	// SlowDown: the provider refused it for its rate or load (429, 503),
	// or, for a concurrency cap, did not answer in time.
	SlowDown Answer = "slow"
)

// Adaptive is the state of an adaptive rule.
type Adaptive struct {
	// Limit is the limit in force, a real number between the rule's floor
	// and its ceiling: the rule admits InForce of it.
	Limit float64
	// Fell and Rose are when Limit last fell and rose; zero for never.
	Fell, Rose time.Time
}

// InForce is the whole limit a check is held to: Limit rounded down.
func (a Adaptive) InForce() int { return int(a.Limit) }

// AdaptiveStart is where an adaptive rule's limit in force starts, with
// nothing in Redis: a quarter of its ceiling, and at least its floor.
func AdaptiveStart(ceiling, floor int) float64 {
	return math.Max(float64(floor), float64(ceiling)/4)
}

// Cooldown is how long after an adaptive rule's limit in force moved it
// may move again: the window of a rate, a fifth of a cap's lease. The
// answers to one overshoot come together, and must count once.
func Cooldown(c Check) time.Duration {
	if c.Policy.Algorithm == Concurrency {
		return c.Policy.Window / 5
	}
	return c.Policy.Window
}

// adaptiveKeys returns the Redis keys of c's state and of what it holds
// (its log or its slots), checking that c may adapt and floor fits.
func (l *Limiter) adaptiveKeys(c Check, floor int) (state, held string, err error) {
	if l.err != nil {
		return "", "", l.err
	}
	if err := c.Policy.Validate(); err != nil {
		return "", "", err
	}
	switch a := c.Policy.Algorithm; {
	case a != "" && a != SlidingLog && a != Concurrency:
		return "", "", fmt.Errorf("%w: an adaptive rule is a sliding log or a concurrency cap, not %s", ErrInvalidPolicy, a)
	case floor < 1 || floor > c.Policy.Limit:
		return "", "", fmt.Errorf("%w: the floor %d is not 1 to the ceiling %d", ErrInvalidPolicy, floor, c.Policy.Limit)
	}
	rk, err := l.redisKey(c.Key)
	if err != nil {
		return "", "", err
	}
	return rk.adaptive, rk.forAlgorithm(c.Policy.Algorithm), nil
}

// Adapt reports a provider's answer to a send held to check c, an
// adaptive rule whose ceiling is c.Policy.Limit and floor `floor`, and
// returns the rule's state after it. An accepted send raises the limit
// only while the rule holds tasks back, as its log or slots in l's group
// say. Safe for concurrent use.
func (l *Limiter) Adapt(ctx context.Context, c Check, floor int, answer Answer) (Adaptive, error) {
	return l.adapt(ctx, c, floor, answer)
}

// AdaptHeldBack is Adapt for a rule whose log or slots are elsewhere (a
// global rule over shards, its state in l's group, the pool's): the
// caller says whether it holds tasks back (Leases.HeldBack).
func (l *Limiter) AdaptHeldBack(ctx context.Context, c Check, floor int, answer Answer, heldBack bool) (Adaptive, error) {
	return l.adapt(ctx, c, floor, answer, b2i(heldBack))
}

// adapt runs adapt.lua for Adapt and AdaptHeldBack, given its last
// argument or none.
func (l *Limiter) adapt(ctx context.Context, c Check, floor int, answer Answer, heldBack ...any) (Adaptive, error) {
	state, held, err := l.adaptiveKeys(c, floor)
	if err != nil {
		return Adaptive{}, fmt.Errorf("throttle: adapt %s: %w", Quote(c.Key), err)
	}
	if answer != Accepted && answer != SlowDown {
		return Adaptive{}, fmt.Errorf("throttle: adapt %s: unknown answer %q", Quote(c.Key), answer)
	}
	window := int64(0)
	if c.Policy.Algorithm != Concurrency {
		window = c.Policy.Window.Microseconds()
	}
	args := append([]any{string(answer), c.Policy.Limit, floor,
		strconv.FormatFloat(AdaptiveStart(c.Policy.Limit, floor), 'g', -1, 64), Cooldown(c).Microseconds(), window}, heldBack...)
	reply, err := lua.Adapt.Run(ctx, l.rdb, []string{state, held}, args...).StringSlice()
	if err != nil {
		return Adaptive{}, fmt.Errorf("throttle: adapt %s: %w", Quote(c.Key), err)
	}
	a, err := readAdaptive(reply, c.Policy.Limit, floor)
	if err != nil {
		return Adaptive{}, fmt.Errorf("throttle: adapt %s: %w", Quote(c.Key), err)
	}
	return a, nil
}

// LimitInForce reads the state of check c, an adaptive rule of floor
// `floor`, without changing it: where it starts when Redis holds none.
// Safe for concurrent use.
func (l *Limiter) LimitInForce(ctx context.Context, c Check, floor int) (Adaptive, error) {
	state, _, err := l.adaptiveKeys(c, floor)
	if err != nil {
		return Adaptive{}, fmt.Errorf("throttle: the limit in force of %s: %w", Quote(c.Key), err)
	}
	h, err := l.rdb.HMGet(ctx, state, "l", "d", "u").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return Adaptive{}, fmt.Errorf("throttle: the limit in force of %s: %w", Quote(c.Key), err)
	}
	reply := []string{strconv.FormatFloat(AdaptiveStart(c.Policy.Limit, floor), 'g', -1, 64), "0", "0"}
	for i, v := range h {
		if s, ok := v.(string); ok {
			reply[i] = s
		}
	}
	a, err := readAdaptive(reply, c.Policy.Limit, floor)
	if err != nil {
		return Adaptive{}, fmt.Errorf("throttle: the limit in force of %s: %w", Quote(c.Key), err)
	}
	return a, nil
}

// readAdaptive reads {l, d, u} as adapt.lua writes them, held to [floor,
// ceiling] whatever Redis holds.
func readAdaptive(reply []string, ceiling, floor int) (Adaptive, error) {
	if len(reply) != 3 {
		return Adaptive{}, fmt.Errorf("the state has %d values, not 3", len(reply))
	}
	lim, err := strconv.ParseFloat(reply[0], 64)
	if err != nil || math.IsNaN(lim) {
		return Adaptive{}, fmt.Errorf("the limit in force %q is not a number", reply[0])
	}
	var at [2]time.Time
	for i, s := range reply[1:] {
		us, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Adaptive{}, fmt.Errorf("the time %q is not whole microseconds", s)
		}
		if us > 0 {
			at[i] = time.UnixMicro(us)
		}
	}
	lim = math.Min(float64(ceiling), math.Max(float64(floor), lim))
	return Adaptive{Limit: lim, Fell: at[0], Rose: at[1]}, nil
}
