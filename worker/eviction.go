package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ErrEvicting is returned, wrapped, when a Redis the worker uses has a
// maxmemory-policy that may evict keys: Sluice's logs carry TTLs, so a
// volatile-* policy evicts them first, and a log evicted admits again
// what it counted.
var ErrEvicting = errors.New("the Redis may evict Sluice's keys")

// errEvictionUnknown is returned, wrapped, when Redis will not say its
// maxmemory-policy (INFO is not allowed, or does not tell).
var errEvictionUnknown = errors.New("could not read maxmemory-policy")

// evictionPolicy returns the maxmemory-policy of every master of rdb that
// does not keep every key ("" when all do). It reads INFO memory, which
// an ACL user may be given where CONFIG GET would show secrets too.
func evictionPolicy(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	var mu sync.Mutex
	var bad []string
	read := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return fmt.Errorf("%w from %s: %w", errEvictionUnknown, c.Options().Addr, err)
		}
		p := infoField(info, "maxmemory_policy")
		if p == "" {
			return fmt.Errorf("%w from %s: INFO memory has no maxmemory_policy", errEvictionUnknown, c.Options().Addr)
		}
		if p != "noeviction" {
			mu.Lock()
			bad = append(bad, fmt.Sprintf("%q at %s", p, c.Options().Addr))
			mu.Unlock()
		}
		return nil
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, read)
	} else if c, ok := rdb.(*redis.Client); ok {
		err = read(ctx, c)
	} else {
		return "", fmt.Errorf("%w: a %T", errEvictionUnknown, rdb)
	}
	return strings.Join(bad, ", "), err
}

// infoField returns the value of field in an INFO reply, "" when absent.
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// CheckEviction returns an error wrapping ErrEvicting that names the
// policy and the fix when Redis may evict keys, unless AllowEviction; it
// logs the risk then, and, without AllowEviction, that it cannot tell when
// Redis will not say, once each. Run and Ready call it; the worker command calls it before
// its first line.
func (s *Server) CheckEviction(ctx context.Context) error {
	bad, err := evictionPolicy(ctx, s.rdb)
	switch {
	case errors.Is(err, errEvictionUnknown) && s.allowEviction:
		return nil // the risk is taken, whatever the policy
	case errors.Is(err, errEvictionUnknown):
		s.unknownEviction.Do(func() {
			s.logger.Warn("could not check that Redis evicts no keys; make sure its maxmemory-policy is noeviction (docs/OPERATING.md)", "err", err)
		})
		return nil
	case err != nil:
		return err
	case bad == "":
		return nil
	case s.allowEviction:
		s.allowedEviction.Do(func() {
			s.logger.Warn("Redis may evict Sluice's keys, and limits are then exceeded: running anyway (--allow-eviction)", "maxmemory_policy", bad)
		})
		return nil
	}
	return fmt.Errorf("%w: maxmemory-policy %s; set it to noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf), "+
		"or run with --allow-eviction to accept that an evicted log admits again what it counted (docs/OPERATING.md)", ErrEvicting, bad)
}
