package worker

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// holdCache shares providers' holds between workers through the limiter
// (throttle.Limiter.Hold), and remembers what it read for holdRefresh so
// that a worker reads each hold key at most that often, not once a task.
// It is safe for concurrent use.
type holdCache struct {
	limiter *throttle.Limiter

	mu sync.Mutex
	m  map[string]holdEntry
}

type holdEntry struct {
	until time.Time // when the hold ends; zero for none
	read  time.Time // when it was last read from Redis
}

// maxHoldEntries bounds the cache: past it, entries older than holdRefresh
// are dropped (they would be read again anyway).
const maxHoldEntries = 4096

// left returns how long key is held: what it read less than holdRefresh
// ago, or else what Redis says within timeout (the context with the
// deadline is made only then: most tasks read the cache).
func (c *holdCache) left(ctx context.Context, key string, timeout time.Duration) (time.Duration, error) {
	now := time.Now()
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && now.Sub(e.read) < holdRefresh {
		return max(0, e.until.Sub(now)), nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d, err := c.limiter.HeldFor(ctx, key)
	if err != nil {
		return 0, timedOut(ctx, err)
	}
	c.remember(key, now, d)
	return d, nil
}

// hold holds key for d in every worker, and at once in this one.
func (c *holdCache) hold(ctx context.Context, key string, d time.Duration) error {
	now := time.Now()
	c.mu.Lock()
	if e := c.m[key]; e.until.Before(now.Add(d)) {
		c.m[key] = holdEntry{until: now.Add(d), read: now}
	}
	c.mu.Unlock()
	return c.limiter.Hold(ctx, key, d)
}

func (c *holdCache) remember(key string, now time.Time, d time.Duration) {
	var until time.Time
	if d > 0 {
		until = now.Add(d)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxHoldEntries {
		for k, e := range c.m {
			if now.Sub(e.read) >= holdRefresh {
				delete(c.m, k)
			}
		}
	}
	// A read that began before this worker set a hold must not wipe it
	// out; one that began after it is the truth, shorter too (a hold
	// cleared by admin unhold).
	if e, ok := c.m[key]; ok && e.read.After(now) && e.until.After(until) {
		until = e.until
	}
	c.m[key] = holdEntry{until: until, read: now}
}
