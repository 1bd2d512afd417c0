package throttle

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/keyspace"
)

// DefaultPrefix starts every Redis key the limiter writes unless WithPrefix
// says otherwise.
const DefaultPrefix = keyspace.DefaultPrefix

// DefaultGroup is the group of every key unless WithGroup says otherwise.
const DefaultGroup = keyspace.DefaultGroup

// MaxRawKeyLen is the longest key (or group) kept as it is in the Redis key;
// a longer one is replaced by "#" and its hex SHA-256.
const MaxRawKeyLen = keyspace.MaxRawKeyLen

// KeyGroup is a group function for WithGroup that puts every key in a group
// of its own, spreading keys over all the nodes of a Redis Cluster. With it,
// AllowMulti only accepts a single key.
func KeyGroup(key string) string { return key }

// encodeKeyPart returns s escaped for a Redis key (keyspace.Encode).
var encodeKeyPart = keyspace.Encode

// redisKeys are the Redis keys of one limiter key. After the hash tag each
// kind of key starts with a character of its own (":" "h" "s" "g" "f" "p"
// "e" "E" "i" "a", "q" for the fair lines, "layout" and "workers" alone), so no
// two kinds can meet whatever the body.
type redisKeys struct {
	group         string // the encoded group, the hash tag
	window        string // <prefix>{<group>}:<body>, the sliding-window log (SlidingLog)
	hold          string // <prefix>{<group>}hold:<body>, the hold of Hold
	frontier      string // <prefix>{<group>}p:<body>, the log's frontier note, which decide.lua writes and reads
	slidingWindow string // <prefix>{<group>}sw:<body>, the counts of SlidingWindow, a hash
	gcra          string // <prefix>{<group>}gcra:<body>, the arrival time of GCRA, a hash
	fixedWindow   string // <prefix>{<group>}fw:<body>, the count of FixedWindow, a hash
	lease         string // <prefix>{<group>}e:<body>, the group's share of a global rule, a hash (lease.go)
	moves         string // <prefix>{<group>}E:<body>, the moves of shares the group took, a sorted set
	slots         string // <prefix>{<group>}i:<body>, the slots of a Concurrency cap in flight, a sorted set
	adaptive      string // <prefix>{<group>}a:<body>, an adaptive rule's limit in force, a hash (adaptive.go)
}

// forAlgorithm returns the key that holds the state of algorithm a: the log
// for SlidingLog (and ""), a key of its own for each of the others, so that
// switching a policy's algorithm never meets a key of another type and no
// two algorithms share data. a must be valid (Policy.Validate checks it).
func (rk redisKeys) forAlgorithm(a Algorithm) string {
	switch a {
	case "", SlidingLog:
		return rk.window
	case SlidingWindow:
		return rk.slidingWindow
	case GCRA:
		return rk.gcra
	case FixedWindow:
		return rk.fixedWindow
	case Concurrency:
		return rk.slots
	}
	panic(fmt.Sprintf("throttle: no key for algorithm %q", string(a)))
}

// redisKey derives the Redis keys of key. This is the only place that builds
// a limiter key.
func (l *Limiter) redisKey(key string) (redisKeys, error) {
	if key == "" {
		return redisKeys{}, fmt.Errorf("%w: the key is empty", ErrInvalidKey)
	}
	g := l.group(key)
	if g == "" {
		return redisKeys{}, fmt.Errorf("%w: the key's group is empty", ErrInvalidKey)
	}
	group := encodeKeyPart(g)
	tag, body := l.prefix+"{"+group+"}", encodeKeyPart(key)
	return redisKeys{
		group:         group,
		window:        tag + ":" + body,
		hold:          tag + "hold:" + body,
		frontier:      tag + "p:" + body,
		slidingWindow: tag + "sw:" + body,
		gcra:          tag + "gcra:" + body,
		fixedWindow:   tag + "fw:" + body,
		slots:         tag + "i:" + body,
		adaptive:      tag + "a:" + body,
		lease:         tag + "e:" + body,
		moves:         tag + "E:" + body,
	}, nil
}

// RedisKey returns the Redis key that holds key's window, for inspection with
// redis-cli or the admin tools. It fails only for an empty key or group, or a
// Limiter with an invalid configuration.
func (l *Limiter) RedisKey(key string) (string, error) {
	if l.err != nil {
		return "", l.err
	}
	rk, err := l.redisKey(key)
	if err != nil {
		return "", fmt.Errorf("throttle: key %s: %w", Quote(key), err)
	}
	return rk.window, nil
}

// RedisKeyFor returns the Redis key that holds key's state under algorithm
// a, for inspection with redis-cli: RedisKey's sliding-window log for
// SlidingLog (and ""); for the others a hash in the same hash tag,
// <prefix>{<group>}sw:<body> (SlidingWindow), <prefix>{<group>}gcra:<body>
// (GCRA) or <prefix>{<group>}fw:<body> (FixedWindow), and the sorted set
// <prefix>{<group>}i:<body> of Concurrency's slots. It fails for an empty
// key or group, an unknown algorithm (ErrInvalidPolicy), or a Limiter with
// an invalid configuration.
func (l *Limiter) RedisKeyFor(key string, a Algorithm) (string, error) {
	if l.err != nil {
		return "", l.err
	}
	if !a.valid() {
		return "", fmt.Errorf("throttle: key %s: %w", Quote(key), errUnknownAlgorithm(a))
	}
	rk, err := l.redisKey(key)
	if err != nil {
		return "", fmt.Errorf("throttle: key %s: %w", Quote(key), err)
	}
	return rk.forAlgorithm(a), nil
}

// frontierOf returns the frontier note beside log, the log's key with 'p'
// after its hash tag (see redisKeys).
func frontierOf(log string) string {
	i := strings.LastIndex(log, "}")
	return log[:i+1] + "p" + log[i+1:]
}

// leaseOf returns the lease beside log, or beside a cap's slots
// (lease.go): the key with 'e' after its hash tag, in place of the slots'
// 'i'.
func leaseOf(log string) string {
	i := strings.LastIndex(log, "}")
	rest := log[i+1:]
	if strings.HasPrefix(rest, "i:") {
		rest = rest[1:]
	}
	return log[:i+1] + "e" + rest
}

// beside returns log and the keys beside it that the lines' scripts read:
// its frontier note and its lease.
func beside(log string) []string { return []string{log, frontierOf(log), leaseOf(log)} }

// withFrontiers returns keys followed by each one's frontier note: the
// KEYS of lua/decide.lua, which declares every key it touches.
func withFrontiers(keys []string) []string {
	all := make([]string, len(keys), 2*len(keys))
	copy(all, keys)
	for _, k := range keys {
		all = append(all, frontierOf(k))
	}
	return all
}
