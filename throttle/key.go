package throttle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// DefaultPrefix starts every Redis key the limiter writes unless WithPrefix
// says otherwise.
const DefaultPrefix = "sluice:"

// DefaultGroup is the group of every key unless WithGroup says otherwise.
const DefaultGroup = "limits"

// MaxRawKeyLen is the longest key (or group) kept as it is in the Redis key;
// a longer one is replaced by "#" and its hex SHA-256.
const MaxRawKeyLen = 200

// KeyGroup is a group function for WithGroup that puts every key in a group
// of its own, spreading keys over all the nodes of a Redis Cluster. With it,
// AllowMulti only accepts a single key.
func KeyGroup(key string) string { return key }

// keyEscaper percent-encodes the characters that would let a key end the hash
// tag ("}"), open one ("{"), or pass for an escape ("%") or a hashed key ("#").
// Escaping is one-to-one, so distinct keys stay distinct.
var keyEscaper = strings.NewReplacer("%", "%25", "#", "%23", "{", "%7B", "}", "%7D")

// encodeKeyPart returns s escaped, or "#" and its hex SHA-256 when s is longer
// than MaxRawKeyLen. Escaped strings never contain "#", so the two forms
// cannot meet.
func encodeKeyPart(s string) string {
	if len(s) > MaxRawKeyLen {
		sum := sha256.Sum256([]byte(s))
		return "#" + hex.EncodeToString(sum[:])
	}
	return keyEscaper.Replace(s)
}

// redisKeys are the Redis keys of one limiter key.
type redisKeys struct {
	group  string // the encoded group, the hash tag
	window string // <prefix>{<group>}:<body>, the sliding-window log
	hold   string // <prefix>{<group>}hold:<body>, the hold of Hold
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
	return redisKeys{group: group, window: tag + ":" + body, hold: tag + "hold:" + body}, nil
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
		return "", fmt.Errorf("throttle: key %s: %w", quoteKey(key), err)
	}
	return rk.window, nil
}
