package throttle

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Moving a key's state from one group to another, for a change of layout
// (docs/SCALING.md, "Changing the layout"). Each step is one key or one
// pair of keys in two slots, so no step is atomic with the others: run it
// while no worker admits.

// Keys returns the limiter keys of l's group that start with head and
// hold a log or a counter, decoded, each once, in the order SCAN finds
// them. A key Redis holds hashed (longer than MaxRawKeyLen) starts with
// no head of a key short enough to be kept as it is.
func (l *Limiter) Keys(ctx context.Context, head string) ([]string, error) {
	if l.err != nil {
		return nil, l.err
	}
	rk, err := l.redisKey(head + "x")
	if err != nil {
		return nil, err
	}
	tag := l.prefix + "{" + rk.group + "}"
	node, err := l.masterOf(ctx, tag)
	if err != nil {
		return nil, fmt.Errorf("throttle: the keys of group %s: %w", rk.group, err)
	}
	var keys []string
	seen := map[string]bool{}
	it := node.Scan(ctx, 0, globEscaper.Replace(tag)+"*", 1000).Iterator()
	for it.Next(ctx) {
		rest := strings.TrimPrefix(it.Val(), tag)
		for _, kind := range []string{":", "p:", "sw:", "gcra:", "fw:"} {
			body, ok := strings.CutPrefix(rest, kind)
			if !ok {
				continue
			}
			if key := keyUnescaper.Replace(body); !seen[key] && strings.HasPrefix(key, head) {
				seen[key] = true
				keys = append(keys, key)
			}
			break
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("throttle: the keys of group %s: %w", rk.group, err)
	}
	return keys, nil
}

// MoveTo moves the state of key from l's group to to's: its log, the log's
// frontier and its counters, each with what is left of its expiry,
// replacing what to's group held under key. Nothing of key stays in l's
// group.
func (l *Limiter) MoveTo(ctx context.Context, key string, to *Limiter) error {
	fail := func(err error) error { return fmt.Errorf("throttle: move %s to another group: %w", Quote(key), err) }
	src, dst, err := l.keysIn(key, to)
	if err != nil {
		return fail(err)
	}
	if src.group == dst.group {
		return nil
	}
	pairs := [][2]string{{src.window, dst.window}, {src.frontier, dst.frontier},
		{src.slidingWindow, dst.slidingWindow}, {src.gcra, dst.gcra}, {src.fixedWindow, dst.fixedWindow}}
	for _, p := range pairs {
		if err := moveKey(ctx, l.rdb, p[0], p[1]); err != nil {
			return fail(err)
		}
	}
	return nil
}

// keysIn returns the Redis keys of key in l's group and in to's.
func (l *Limiter) keysIn(key string, to *Limiter) (src, dst redisKeys, err error) {
	if err = errors.Join(l.err, to.err); err != nil {
		return src, dst, err
	}
	if src, err = l.redisKey(key); err == nil {
		dst, err = to.redisKey(key)
	}
	return src, dst, err
}

// moveKey moves the key src to dst (DUMP, RESTORE with what is left of its
// expiry, DEL), replacing dst; an absent src changes nothing.
func moveKey(ctx context.Context, rdb redis.UniversalClient, src, dst string) error {
	data, err := rdb.Dump(ctx, src).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dump %s: %w", src, err)
	}
	left, err := rdb.PTTL(ctx, src).Result()
	switch {
	case err != nil:
		return fmt.Errorf("pttl %s: %w", src, err)
	case left == -2 || left == 0:
		return nil // expired, or about to
	case left < 0:
		left = 0 // no expiry
	}
	if err := rdb.RestoreReplace(ctx, dst, left, data).Err(); err != nil {
		return fmt.Errorf("restore %s as %s: %w", src, dst, err)
	}
	if err := rdb.Del(ctx, src).Err(); err != nil {
		return fmt.Errorf("delete %s: %w", src, err)
	}
	return nil
}

// MergeLogInto adds the entries of key's log in l's group to key's log in
// into's group, each named after l's group so that no two groups' entries
// meet and a merge run again adds nothing, and deletes the log in l's
// group with its frontier, lease and moves; it returns the entries added.
// into's log lives at least as long as l's did, and its frontier is
// deleted: it may no longer hold. The log should hold no places: the
// lines that gave them are reset first (a place merged would count as an
// admission at its time, never less).
func (l *Limiter) MergeLogInto(ctx context.Context, key string, into *Limiter) (int, error) {
	fail := func(err error) (int, error) {
		return 0, fmt.Errorf("throttle: merge the log of %s into another group's: %w", Quote(key), err)
	}
	src, dst, err := l.keysIn(key, into)
	if err != nil {
		return fail(err)
	}
	if src.group == dst.group {
		return 0, nil
	}
	entries, err := l.rdb.ZRangeWithScores(ctx, src.window, 0, -1).Result()
	if err != nil {
		return fail(err)
	}
	if len(entries) > 0 {
		for i := range entries {
			entries[i].Member = fmt.Sprint(entries[i].Member) + "~" + src.group
		}
		left, err := l.rdb.PTTL(ctx, src.window).Result()
		if err != nil {
			return fail(err)
		}
		had, err := l.rdb.PTTL(ctx, dst.window).Result() // -2 when absent
		if err != nil {
			return fail(err)
		}
		if err := l.rdb.ZAdd(ctx, dst.window, entries...).Err(); err != nil {
			return fail(err)
		}
		// into's log lives at least as long as l's: no expiry when l's
		// has none (-1), else no shorter than l's.
		switch {
		case left == -1 && had != -1:
			err = l.rdb.Persist(ctx, dst.window).Err()
		case left > 0 && (had == -2 || had >= 0 && had < left):
			err = l.rdb.PExpire(ctx, dst.window, left).Err()
		}
		if err != nil {
			return fail(err)
		}
	}
	for _, k := range []string{src.window, src.frontier, src.lease, src.moves, dst.frontier} {
		if err := l.rdb.Del(ctx, k).Err(); err != nil {
			return fail(err)
		}
	}
	return len(entries), nil
}

// Drop deletes group g's lease of the rule of key and the moves it took:
// a change of layout starts the leases again from the pool (Open).
func (ls *Leases) Drop(ctx context.Context, key, g string) error {
	k, err := ls.l.InGroup(g).redisKey(key)
	if err == nil {
		err = ls.l.rdb.Del(ctx, k.lease).Err()
	}
	if err == nil {
		err = ls.l.rdb.Del(ctx, k.moves).Err()
	}
	if err != nil {
		return fmt.Errorf("throttle: drop the lease of %s in %s: %w", Quote(key), g, err)
	}
	return nil
}
