package throttle

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/keyspace"
)

// Limiter makes rate-limit decisions against Redis. It holds no state of its
// own beyond its configuration, so any number of Limiters in any number of
// processes agree as long as they share the Redis, the prefix and the group
// function. It is safe for concurrent use.
type Limiter struct {
	rdb           redis.UniversalClient
	prefix        string
	group         func(key string) string
	linesGroup    string // the group of the Lines: DefaultGroup, or InGroup's
	lineTolerance time.Duration
	batch         *batcher // nil: one script call per decision
	err           error    // set by a bad configuration; returned by every call
}

// Option configures a Limiter. The last of two options that set the same
// thing wins.
type Option interface {
	apply(*Limiter)
}

type optionFunc func(*Limiter)

func (f optionFunc) apply(l *Limiter) { f(l) }

// WithPrefix sets the string every Redis key the limiter writes starts with;
// the default is DefaultPrefix, "sluice:". The prefix may not contain "{" or
// "}": the limiter places the Redis Cluster hash tag itself. Limiters that
// share keys must share the prefix.
func WithPrefix(prefix string) Option {
	return optionFunc(func(l *Limiter) {
		if err := keyspace.CheckPrefix(prefix); err != nil {
			l.err = fmt.Errorf("throttle: %w: %w", ErrInvalidConfig, err)
			return
		}
		l.prefix = prefix
	})
}

// WithGroup sets the function that names the group of a key. Keys of one
// group share a Redis Cluster hash slot, and AllowMulti only combines keys of
// one group. The default puts every key in DefaultGroup: any keys combine, and
// on a Redis Cluster all limiter keys live on one node. To spread keys over a
// cluster, group them by what calls combine, for example by tenant when every
// call checks only one tenant's keys; KeyGroup gives every key its own group.
// The function must be deterministic and shared by all Limiters that share
// keys: the group is part of the Redis key. It must not return "".
func WithGroup(group func(key string) string) Option {
	return optionFunc(func(l *Limiter) {
		if group == nil {
			l.err = fmt.Errorf("throttle: %w: WithGroup(nil)", ErrInvalidConfig)
			return
		}
		l.group = group
	})
}

// InGroup returns a Limiter that shares l's client, prefix and settings
// and puts every key in group g, whose fair lines its Lines serve: with a
// layout of shards, the Limiter of one shard (docs/SCALING.md). An empty g
// gives a Limiter whose every call fails with ErrInvalidConfig.
func (l *Limiter) InGroup(g string) *Limiter {
	c := *l
	if g == "" && c.err == nil {
		c.err = fmt.Errorf("throttle: %w: InGroup(\"\")", ErrInvalidConfig)
	}
	c.group = func(string) string { return g }
	c.linesGroup = g
	return &c
}

// DefaultLineTolerance is how late a caller in line may come back and still
// be admitted as of its place, unless WithLineTolerance says otherwise.
const DefaultLineTolerance = 10 * time.Millisecond

// WithLineTolerance sets how late after its place an AllowInLine caller may
// come back and still be admitted as of its place, rather than placed again
// behind everyone. Its admission is recorded at its place, so a send can
// follow the one before it by up to d less than the policy says: keep d well
// below the margin that the windows are widened by (policies.DefaultMargin,
// 50 ms). The default is DefaultLineTolerance; d may be 0, not negative.
func WithLineTolerance(d time.Duration) Option {
	return optionFunc(func(l *Limiter) {
		if d < 0 {
			l.err = fmt.Errorf("throttle: %w: line tolerance %v is negative", ErrInvalidConfig, d)
			return
		}
		l.lineTolerance = d
	})
}

// NewLimiter returns a Limiter that keeps its windows in rdb: a single node,
// a Sentinel failover client or a Cluster client. The caller keeps ownership
// of rdb and closes it. A nil rdb or a bad option does not panic: every call
// of the Limiter returns an error wrapping ErrInvalidConfig. It batches
// decisions asked for at the same time (WithBatching's defaults) unless
// WithoutBatching is given.
func NewLimiter(rdb redis.UniversalClient, opts ...Option) *Limiter {
	l := &Limiter{
		rdb:           rdb,
		prefix:        DefaultPrefix,
		group:         func(string) string { return DefaultGroup },
		linesGroup:    DefaultGroup,
		lineTolerance: DefaultLineTolerance,
	}
	WithBatching(nil).apply(l)
	if rdb == nil {
		l.err = fmt.Errorf("throttle: %w: nil Redis client", ErrInvalidConfig)
	}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(l)
		}
	}
	return l
}

// Err returns the error every call of l returns when it was built wrong (a
// nil Redis client, a bad option), or nil.
func (l *Limiter) Err() error { return l.err }

// Allow decides whether one unit of cost on key fits policy p now, and
// records it if so. It is a shortcut for AllowN(ctx, key, p, 1).
func (l *Limiter) Allow(ctx context.Context, key string, p Policy) (Decision, error) {
	return l.AllowN(ctx, key, p, 1)
}

// AllowN decides whether n units of cost on key fit policy p now, and records
// all n if so. It records nothing when denied. n must be 1 to p.Limit.
func (l *Limiter) AllowN(ctx context.Context, key string, p Policy, n int) (Decision, error) {
	md, _, err := l.decide(ctx, "allow", modeAllow, "", []Check{{Key: key, Policy: p, Cost: n}})
	return md.Decision, err
}

// Peek returns the decision Allow would make now, without recording
// anything: Allowed and RetryAfter are for a cost of 1, Count is the number
// of units in the window. It prunes entries that have left the window.
func (l *Limiter) Peek(ctx context.Context, key string, p Policy) (Decision, error) {
	md, _, err := l.decide(ctx, "peek", modePeek, "", []Check{{Key: key, Policy: p, Cost: 1}})
	return md.Decision, err
}

// Reset empties key's window, whatever its policy and algorithm (places in
// line included), and lifts its hold.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if l.err != nil {
		return l.err
	}
	rk, err := l.redisKey(key)
	if err != nil {
		return fmt.Errorf("throttle: reset %s: %w", Quote(key), err)
	}
	if err := l.rdb.Del(ctx, rk.window, rk.frontier, rk.hold, rk.slidingWindow, rk.gcra, rk.fixedWindow).Err(); err != nil {
		return fmt.Errorf("throttle: reset %s: %w", Quote(key), err)
	}
	return nil
}
