package throttle

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Hold holds key back for d: until d has passed, HeldFor reports the time
// left. A hold is advice for callers that check it, such as the workers that
// got a 429 from a provider and want every other worker to wait too; it does
// not change what Allow decides. A hold already longer than d stays as it is:
// holds only ever grow. d is rounded up to a whole millisecond and capped at
// MaxWindow; d <= 0 does nothing. It needs Redis 7.0 or later (PEXPIRE GT);
// on an older Redis the MULTI is refused and Hold returns its error.
func (l *Limiter) Hold(ctx context.Context, key string, d time.Duration) error {
	if l.err != nil {
		return l.err
	}
	rk, err := l.redisKey(key)
	if err != nil {
		return fmt.Errorf("throttle: hold %s: %w", Quote(key), err)
	}
	if d <= 0 {
		return nil
	}
	d = min(d, MaxWindow)
	ms := (d + time.Millisecond - 1) / time.Millisecond * time.Millisecond
	// Both commands in one MULTI: the key is created with ms to live, or,
	// when it exists, its time to live grows to ms if shorter (GT).
	_, err = l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SetNX(ctx, rk.hold, 1, ms)
		p.Do(ctx, "PEXPIRE", rk.hold, ms.Milliseconds(), "GT")
		return nil
	})
	if err != nil {
		return fmt.Errorf("throttle: hold %s: %w", Quote(key), err)
	}
	return nil
}

// HeldFor returns how long key is still held by Hold, 0 when it is not.
func (l *Limiter) HeldFor(ctx context.Context, key string) (time.Duration, error) {
	if l.err != nil {
		return 0, l.err
	}
	rk, err := l.redisKey(key)
	if err != nil {
		return 0, fmt.Errorf("throttle: held for %s: %w", Quote(key), err)
	}
	ttl, err := l.rdb.PTTL(ctx, rk.hold).Result()
	if err != nil {
		return 0, fmt.Errorf("throttle: held for %s: %w", Quote(key), err)
	}
	// PTTL answers -2 for no key and -1 for a key without expiry, which Hold
	// never makes; go-redis returns them as durations of -2 and -1 ns.
	return max(ttl, 0), nil
}
