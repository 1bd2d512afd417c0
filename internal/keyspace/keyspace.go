// Package keyspace names Sluice's Redis keys: the prefix, the group that
// is their hash tag, and the escaping of a part of a key. The limiter
// (package throttle) derives every key from it, and producer finds the
// fair lines' entrance with it without the limiter.
package keyspace

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// DefaultPrefix starts every Redis key of the limiter and the lines unless
// a prefix is given.
const DefaultPrefix = "sluice:"

// DefaultGroup is the group of every key unless another is given: the
// hash tag, and the group of the fair lines.
const DefaultGroup = "limits"

// MaxRawKeyLen is the longest key (or group) kept as it is in the Redis key;
// a longer one is replaced by "#" and its hex SHA-256.
const MaxRawKeyLen = 200

// escaper percent-encodes the characters that would let a key end the hash
// tag ("}"), open one ("{"), or pass for an escape ("%") or a hashed key ("#").
// Escaping is one-to-one, so distinct keys stay distinct.
var escaper = strings.NewReplacer("%", "%25", "#", "%23", "{", "%7B", "}", "%7D")

// Encode returns s escaped, or "#" and its hex SHA-256 when s is longer
// than MaxRawKeyLen. Escaped strings never contain "#", so the two forms
// cannot meet.
func Encode(s string) string {
	if len(s) > MaxRawKeyLen {
		sum := sha256.Sum256([]byte(s))
		return "#" + hex.EncodeToString(sum[:])
	}
	return escaper.Replace(s)
}

// CheckPrefix refuses a prefix with a brace: the hash tag is placed after it.
func CheckPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("prefix %q contains a brace; the limiter places the hash tag itself", prefix)
	}
	return nil
}

// Base is the start of every key of group under prefix: "<prefix>{<group>}",
// the group escaped.
func Base(prefix, group string) string { return prefix + "{" + Encode(group) + "}" }

// LinesBase is the start of every key of the fair lines under prefix on
// one shard: "<prefix>{<DefaultGroup>}".
func LinesBase(prefix string) string { return Base(prefix, DefaultGroup) }

// LayoutKey is the key that names the layout of the deployment under
// prefix (package layout): "<prefix>{<DefaultGroup>}layout".
func LayoutKey(prefix string) string { return LinesBase(prefix) + "layout" }

// DrainingKey is the set of the layouts whose queues the workers still
// serve after a change of layout (package layout):
// "<prefix>{<DefaultGroup>}layout:draining".
func DrainingKey(prefix string) string { return LayoutKey(prefix) + ":draining" }

// WorkersKey is the sorted set of the workers running under prefix, each
// scored by when its presence lapses unless renewed (package layout):
// "<prefix>{<DefaultGroup>}workers".
func WorkersKey(prefix string) string { return LinesBase(prefix) + "workers" }
