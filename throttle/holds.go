package throttle

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// HeldKey is a hold in force: the key given to Hold, and the time left.
type HeldKey struct {
	Key  string
	Left time.Duration
}

// keyUnescaper undoes keyspace.Encode's escaping. Reading left to right, "%" always starts
// one of the four escapes, so the result is the only string that escapes to
// its input.
var keyUnescaper = strings.NewReplacer("%25", "%", "%23", "#", "%7B", "{", "%7D", "}")

// globEscaper escapes what SCAN's MATCH would read as a pattern.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`)

// Holds returns the holds in force in the default group (every hold a
// worker makes), in the order SCAN finds them, at most most of them. A
// key longer than MaxRawKeyLen comes back as Redis holds it: "#" and its
// SHA-256. On a Redis Cluster it scans the master of the group's slot.
func (l *Limiter) Holds(ctx context.Context, most int) ([]HeldKey, error) {
	if l.err != nil {
		return nil, l.err
	}
	head := l.prefix + "{" + encodeKeyPart(DefaultGroup) + "}hold:"
	node, err := l.masterOf(ctx, head)
	if err != nil {
		return nil, fmt.Errorf("throttle: holds: %w", err)
	}
	var out []HeldKey
	it := node.Scan(ctx, 0, globEscaper.Replace(head)+"*", 1000).Iterator()
	for len(out) < most && it.Next(ctx) {
		k := it.Val()
		left, err := node.PTTL(ctx, k).Result()
		if err != nil {
			return out, fmt.Errorf("throttle: holds: %w", err)
		}
		if left > 0 {
			out = append(out, HeldKey{Key: keyUnescaper.Replace(strings.TrimPrefix(k, head)), Left: left})
		}
	}
	if err := it.Err(); err != nil {
		return out, fmt.Errorf("throttle: holds: %w", err)
	}
	return out, nil
}

// masterOf returns what SCAN should be sent to for the keys of key's slot:
// on a Redis Cluster the slot's master, which alone holds them; else the
// client itself.
func (l *Limiter) masterOf(ctx context.Context, key string) (redis.Cmdable, error) {
	if cc, ok := l.rdb.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return l.rdb, nil
}

// Unhold ends the hold of key at once, in every worker within their
// cache's 250 ms, and reports whether there was one.
func (l *Limiter) Unhold(ctx context.Context, key string) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	rk, err := l.redisKey(key)
	if err != nil {
		return false, fmt.Errorf("throttle: unhold %s: %w", Quote(key), err)
	}
	n, err := l.rdb.Del(ctx, rk.hold).Result()
	if err != nil {
		return false, fmt.Errorf("throttle: unhold %s: %w", Quote(key), err)
	}
	return n == 1, nil
}
