package throttle

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limiter makes rate-limit decisions against Redis. It holds no state of its
// own beyond its configuration, so any number of Limiters in any number of
// processes agree as long as they share the Redis, the prefix and the group
// function. It is safe for concurrent use.
type Limiter struct {
	rdb       redis.UniversalClient
	prefix    string
	group     func(key string) string
	lineGrace time.Duration
	batch     *batcher // nil: one script call per decision
	err       error    // set by a bad configuration; returned by every call
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
		if strings.ContainsAny(prefix, "{}") {
			l.err = fmt.Errorf("throttle: %w: prefix %q contains a brace; the limiter places the hash tag itself", ErrInvalidConfig, prefix)
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

// DefaultLineGrace is how long a place in line outlives its time unless
// WithLineGrace says otherwise.
const DefaultLineGrace = time.Minute

// WithLineGrace sets how long a place in an AllowInLine line is kept after
// its time has come, for a caller that comes back late; a place whose caller
// never comes back (a deleted task) is dropped after it. Callers normally
// leave the line themselves, by being admitted or denied again. The default
// is DefaultLineGrace; d must be positive.
func WithLineGrace(d time.Duration) Option {
	return optionFunc(func(l *Limiter) {
		if d <= 0 {
			l.err = fmt.Errorf("throttle: %w: line grace %v is not positive", ErrInvalidConfig, d)
			return
		}
		l.lineGrace = d
	})
}

// NewLimiter returns a Limiter that keeps its windows in rdb: a single node,
// a Sentinel failover client or a Cluster client. The caller keeps ownership
// of rdb and closes it. A nil rdb or a bad option does not panic: every call
// of the Limiter returns an error wrapping ErrInvalidConfig.
func NewLimiter(rdb redis.UniversalClient, opts ...Option) *Limiter {
	l := &Limiter{
		rdb:       rdb,
		prefix:    DefaultPrefix,
		group:     func(string) string { return DefaultGroup },
		lineGrace: DefaultLineGrace,
	}
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

// Allow decides whether one unit of cost on key fits policy p now, and
// records it if so. It is a shortcut for AllowN(ctx, key, p, 1).
func (l *Limiter) Allow(ctx context.Context, key string, p Policy) (Decision, error) {
	return l.AllowN(ctx, key, p, 1)
}

// AllowN decides whether n units of cost on key fit policy p now, and records
// all n if so. It records nothing when denied. n must be 1 to p.Limit.
func (l *Limiter) AllowN(ctx context.Context, key string, p Policy, n int) (Decision, error) {
	md, err := l.decide(ctx, "allow", modeAllow, "", []Check{{Key: key, Policy: p, Cost: n}})
	return md.Decision, err
}

// Peek returns the decision Allow would make now, without recording
// anything: Allowed and RetryAfter are for a cost of 1, Count is the number
// of units in the window. It prunes entries that have left the window.
func (l *Limiter) Peek(ctx context.Context, key string, p Policy) (Decision, error) {
	md, err := l.decide(ctx, "peek", modePeek, "", []Check{{Key: key, Policy: p, Cost: 1}})
	return md.Decision, err
}

// Reset empties key's window, whatever its policy, and lifts its line and
// its hold.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if l.err != nil {
		return l.err
	}
	rk, err := l.redisKey(key)
	if err != nil {
		return fmt.Errorf("throttle: reset %s: %w", quoteKey(key), err)
	}
	if err := l.rdb.Del(ctx, rk.window, rk.line, rk.hold).Err(); err != nil {
		return fmt.Errorf("throttle: reset %s: %w", quoteKey(key), err)
	}
	return nil
}
