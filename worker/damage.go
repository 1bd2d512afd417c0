package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Damage is not an outage: Redis answers, but refuses what Sluice asks of
// some key (a key of the wrong type, a field it cannot read, a script
// error on what it found, memory full). It does not pass by waiting, so
// it is shouted, once per kind, and backed off from.
const (
	// damageForget is how long after a kind of refusal was last seen it
	// counts as repaired: twice damageBackoff, so that one that lasts is
	// seen again, by a task back from it, before it is forgotten.
	damageForget = 2 * damageBackoff
	// damageBackoff is the longest the dispatch loop and a refused task
	// wait before trying again.
	damageBackoff = 30 * time.Second
)

// transientPrefixes are the error replies of a Redis that is starting,
// failing over or busy: they pass by themselves, as an outage does.
var transientPrefixes = []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY", "MOVED", "ASK"}

// isDamage reports whether err is Redis refusing a call, not Redis away.
func isDamage(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	return !slices.ContainsFunc(transientPrefixes, func(p string) bool { return redis.HasErrorPrefix(re, p) })
}

// damage keeps the kinds of refusal seen lately: each is logged at ERROR
// when first seen, and at INFO once it has not been seen for d.forget;
// Err reports them, for readiness.
type damage struct {
	logger       *slog.Logger
	forget, most time.Duration // damageForget and damageBackoff; tests shorten them
	mu           sync.Mutex
	seen         map[string]damageSeen // by the refusal's message
	// streak counts the dispatch loop's refusals in a row, for its backoff.
	streak int
}

type damageSeen struct {
	where       string
	first, last time.Time
	times       int
}

// note records a refusal of Redis in where (what was asked), logging it
// at ERROR the first time its kind is seen.
func (d *damage) note(where string, err error) {
	msg := redisMessage(err)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expire()
	if d.seen == nil {
		d.seen = map[string]damageSeen{}
	}
	now := time.Now()
	s, ok := d.seen[msg]
	if !ok {
		s = damageSeen{where: where, first: now}
		d.logger.Error("Redis refuses Sluice's calls: a key is damaged or Redis cannot write; "+
			"the tasks that use it wait (docs/OPERATING.md, \"Damaged keys\")", "in", where, "err", msg)
	}
	s.last, s.times = now, s.times+1
	d.seen[msg] = s
}

// expire forgets, with an INFO line, the refusals not seen lately.
func (d *damage) expire() {
	for msg, s := range d.seen {
		if time.Since(s.last) > d.forget {
			d.logger.Info("Redis no longer refuses Sluice's calls", "in", s.where, "err", msg, "refused", s.times, "for", s.last.Sub(s.first).Round(time.Millisecond))
			delete(d.seen, msg)
		}
	}
}

// Err returns an error naming the refusals seen lately, nil when none.
func (d *damage) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expire()
	if len(d.seen) == 0 {
		return nil
	}
	var parts []string
	for msg, s := range d.seen {
		parts = append(parts, fmt.Sprintf("%s: %s (%d times)", s.where, msg, s.times))
	}
	slices.Sort(parts)
	return fmt.Errorf("redis refuses Sluice's calls: %s", strings.Join(parts, "; "))
}

// backoff returns how long the dispatch loop waits after a refusal:
// base, doubled with each refusal in a row, at most d.most.
func (d *damage) backoff(base time.Duration) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.streak++
	return min(base<<min(d.streak-1, 16), d.most)
}

// ok ends the dispatch loop's streak of refusals.
func (d *damage) ok() {
	d.mu.Lock()
	d.streak = 0
	d.mu.Unlock()
}

// redisMessage is err's Redis reply, without what wraps it.
func redisMessage(err error) string {
	var re redis.Error
	if errors.As(err, &re) {
		return re.Error()
	}
	return err.Error()
}
