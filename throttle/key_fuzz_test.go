package throttle

// This file is in package throttle, not throttle_test: the hold key has no
// exported accessor, and the fuzz target checks every kind of key.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// keyLimiters are limiters whose keys the fuzz target derives: the default
// prefix and group, a prefix of its own with a group per key (KeyGroup), and
// an empty prefix with a group per tenant, the part of the key before its
// first "/" (empty for a key that starts with "/"). None of them connects to
// Redis: deriving a key is pure.
func keyLimiters(tb testing.TB) map[string]*Limiter {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	tb.Cleanup(func() { _ = rdb.Close() })
	byTenant := func(key string) string { tenant, _, _ := strings.Cut(key, "/"); return tenant }
	return map[string]*Limiter{
		"default":      NewLimiter(rdb),
		"key group":    NewLimiter(rdb, WithPrefix("app:rl:"), WithGroup(KeyGroup)),
		"tenant group": NewLimiter(rdb, WithPrefix(""), WithGroup(byTenant)),
	}
}

// redisHashTag returns what Redis Cluster hashes to place key: the text
// between the first "{" and the first "}" after it, when that text is not
// empty; otherwise the whole key, and false.
func redisHashTag(key string) (string, bool) {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key, false
	}
	n := strings.IndexByte(key[open+1:], '}')
	if n <= 0 {
		return key, false
	}
	return key[open+1 : open+1+n], true
}

// all returns the five Redis keys of rk, named by kind.
func (rk redisKeys) all() map[string]string {
	return map[string]string{
		"window":         rk.window,
		"hold":           rk.hold,
		"sliding-window": rk.slidingWindow,
		"gcra":           rk.gcra,
		"fixed-window":   rk.fixedWindow,
	}
}

// checkKeyPart checks encodeKeyPart(s): no braces, so it can neither end nor
// open a hash tag; escaped text that decodes back to s, or, for a long s,
// "#" and the hex SHA-256 of s.
func checkKeyPart(t *testing.T, s string) {
	t.Helper()
	enc := encodeKeyPart(s)
	if strings.ContainsAny(enc, "{}") {
		t.Errorf("encodeKeyPart(%.80q) = %.80q holds a brace", s, enc)
	}
	if len(s) > MaxRawKeyLen {
		sum := sha256.Sum256([]byte(s))
		if want := "#" + hex.EncodeToString(sum[:]); enc != want {
			t.Errorf("encodeKeyPart of a %d-byte string = %.80q, want %q", len(s), enc, want)
		}
		return
	}
	if strings.Contains(enc, "#") {
		t.Errorf("encodeKeyPart(%.80q) = %.80q holds a '#', the mark of a hashed key", s, enc)
	}
	if got := keyUnescaper.Replace(enc); got != s {
		t.Errorf("encodeKeyPart(%.80q) = %.80q, which decodes to %.80q", s, enc, got)
	}
	if len(enc) > 3*MaxRawKeyLen {
		t.Errorf("encodeKeyPart(%.80q) is %d bytes, more than %d", s, len(enc), 3*MaxRawKeyLen)
	}
}

// checkRedisKeys derives the keys of key with l and checks each on its own:
// an empty key or group is refused with ErrInvalidKey; otherwise every kind
// of key starts with the prefix, its hash tag (for Redis Cluster) is exactly
// the encoded group, the kinds differ from each other, the exported
// accessors agree, and the body after the tag decodes back to key. It
// returns the keys, and false when key is refused.
func checkRedisKeys(t *testing.T, l *Limiter, key string) (redisKeys, bool) {
	t.Helper()
	rk, err := l.redisKey(key)
	if key == "" || l.group(key) == "" {
		if !errors.Is(err, ErrInvalidKey) {
			t.Errorf("redisKey(%.80q) with group %.80q: error %v, want ErrInvalidKey", key, l.group(key), err)
		}
		if _, err := l.RedisKey(key); !errors.Is(err, ErrInvalidKey) || strings.Contains(err.Error(), "\n") {
			t.Errorf("RedisKey(%.80q): error %q, want ErrInvalidKey on one line", key, err)
		}
		return redisKeys{}, false
	}
	if err != nil {
		t.Fatalf("redisKey(%.80q): %v", key, err)
	}
	group := l.group(key)
	checkKeyPart(t, group)
	checkKeyPart(t, key)
	if want := encodeKeyPart(group); rk.group != want {
		t.Errorf("group of %.80q = %.80q, want %.80q", key, rk.group, want)
	}
	tag := l.prefix + "{" + rk.group + "}"
	seen := map[string]string{}
	for kind, rkey := range rk.all() {
		if !strings.HasPrefix(rkey, tag) {
			t.Errorf("%s key of %.80q = %.80q does not start with the prefix and tag %.80q", kind, key, rkey, tag)
		}
		if got, ok := redisHashTag(rkey); !ok || got != rk.group {
			t.Errorf("%s key of %.80q = %.80q: Redis Cluster hashes %.80q, want the group %.80q", kind, key, rkey, got, rk.group)
		}
		if most := len(tag) + len("gcra:") + 3*MaxRawKeyLen; len(rkey) > most {
			t.Errorf("%s key of a %d-byte key is %d bytes, more than %d", kind, len(key), len(rkey), most)
		}
		if other, dup := seen[rkey]; dup {
			t.Errorf("%s and %s keys of %.80q are both %.80q", kind, other, key, rkey)
		}
		seen[rkey] = kind
	}
	body, ok := strings.CutPrefix(rk.window, tag+":")
	if !ok {
		t.Fatalf("window key %.80q does not start with %.80q", rk.window, tag+":")
	}
	if body != encodeKeyPart(key) {
		t.Errorf("window key %.80q of %.80q: body %.80q, want %.80q", rk.window, key, body, encodeKeyPart(key))
	}
	if got, err := l.RedisKey(key); err != nil || got != rk.window {
		t.Errorf("RedisKey(%.80q) = %.80q, %v; want %.80q", key, got, err, rk.window)
	}
	for _, a := range append(Algorithms(), "") {
		if got, err := l.RedisKeyFor(key, a); err != nil || got != rk.forAlgorithm(a) {
			t.Errorf("RedisKeyFor(%.80q, %q) = %.80q, %v; want %.80q", key, a, got, err, rk.forAlgorithm(a))
		}
	}
	return rk, true
}

// HostileKeys are keys that have broken key schemes: braces that would move
// the hash tag, colons, escapes, separators (the "/" of the tenant group of
// keyLimiters among them), control bytes, invalid UTF-8, and long keys on
// both sides of MaxRawKeyLen. It is exported for the tests of throttle_test.
func HostileKeys() []string {
	long := strings.Repeat("x", 10_000)
	edge := strings.Repeat("a", MaxRawKeyLen)
	return []string{
		"a", "A", "a ", " a", "a:b", "a::b", ":", "a b",
		"{", "}", "{}", "}{", "{a}", "a}b", "{limits}", "{limits}:a", "limits}:a",
		"%", "%25", "%7B", "%7D", "%23", "#", "##", "#" + strings.Repeat("0", 64),
		"é", "e\u0301", "日本語", "\x00", "a\x00b", "\xff\xfe", "\xc3", "line\nbreak", "tab\tx", "\r\n",
		"a/b", "a/", "/a", "{a}/b", "a/{b}", "a}/b",
		edge, edge + "a", edge[:len(edge)-1] + "%",
		long, long[:len(long)-1] + "y", long + "x",
		strings.Repeat("{", 1<<20),
	}
}

// TestRedisKeysOfHostileKeys checks every HostileKeys key with
// checkRedisKeys under each of keyLimiters, and that no two keys share a
// Redis key of any kind.
func TestRedisKeysOfHostileKeys(t *testing.T) {
	t.Parallel()
	keys := HostileKeys()
	for name, l := range keyLimiters(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			owner := map[string]string{} // Redis key -> the kind and key it holds
			for _, k := range keys {
				rk, ok := checkRedisKeys(t, l, k)
				if !ok {
					continue
				}
				for kind, rkey := range rk.all() {
					who := fmt.Sprintf("%s key of %.40q (%d bytes)", kind, k, len(k))
					if prev, dup := owner[rkey]; dup {
						t.Errorf("%s and %s are both %.80q", prev, who, rkey)
					}
					owner[rkey] = who
				}
			}
		})
	}
}

// FuzzRedisKey checks the derivation of Redis keys on a pair of limiter
// keys, under each of keyLimiters: each key's own properties
// (checkRedisKeys), and between two distinct keys, no Redis key of any
// kind in common, and the same hash tag exactly when their groups are the
// same. The seeds pair each of HostileKeys with the next, and a few keys
// with their escapes or their hashed form.
func FuzzRedisKey(f *testing.F) {
	keys := HostileKeys()
	for i := range keys {
		f.Add(keys[i], keys[(i+1)%len(keys)])
	}
	long := strings.Repeat("x", MaxRawKeyLen+1)
	sum := sha256.Sum256([]byte(long))
	for _, s := range [][2]string{
		{"", "a"}, {"{", "%7B"}, {"}", "%7D"}, {"%", "%25"}, {"#", "%23"},
		{"{limits}:a", "a"}, {"hold:a", "a"}, {":a", "a"}, {"sw:a", "a"},
		{"acme/{globex}", "globex/sms"}, {"/sms", "acme/"},
		{long, "#" + hex.EncodeToString(sum[:])},
	} {
		f.Add(s[0], s[1])
	}
	limiters := keyLimiters(f)
	f.Fuzz(func(t *testing.T, a, b string) {
		if encodeKeyPart(a) == encodeKeyPart(b) && a != b {
			t.Errorf("encodeKeyPart(%.80q) = encodeKeyPart(%.80q) = %.80q", a, b, encodeKeyPart(a))
		}
		for name, l := range limiters {
			rka, okA := checkRedisKeys(t, l, a)
			rkb, okB := checkRedisKeys(t, l, b)
			if !okA || !okB || a == b {
				continue
			}
			kindOf := map[string]string{}
			for kind, rkey := range rka.all() {
				kindOf[rkey] = kind
			}
			for kind, rkey := range rkb.all() {
				if other, dup := kindOf[rkey]; dup {
					t.Errorf("%s: %s key of %.80q and %s key of %.80q are both %.80q", name, other, a, kind, b, rkey)
				}
			}
			if sameGroup, sameTag := l.group(a) == l.group(b), rka.group == rkb.group; sameGroup != sameTag {
				t.Errorf("%s: groups %.80q and %.80q give the tags %.80q and %.80q", name, l.group(a), l.group(b), rka.group, rkb.group)
			}
		}
	})
}
