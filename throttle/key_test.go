package throttle_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/throttle"
)

// TestHostileKeysHaveWindowsOfTheirOwn gives every hostile key a limit of
// one: each must be admitted once and denied after, so no two share a
// window, and each Redis key must start with the prefix.
func TestHostileKeysHaveWindowsOfTheirOwn(t *testing.T) {
	t.Parallel()
	keys := throttle.HostileKeys()
	p := throttle.PerMinute(1)
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		seen := map[string]string{}
		for _, k := range keys {
			rkey := redisKey(t, l, k)
			if !strings.HasPrefix(rkey, prefix+"{") {
				t.Errorf("Redis key %.80q of %.80q does not start with the prefix and hash tag", rkey, k)
			}
			if other, dup := seen[rkey]; dup {
				t.Errorf("keys %.80q and %.80q share the Redis key %.80q", k, other, rkey)
			}
			seen[rkey] = k
			if len(rkey) > len(prefix)+len(throttle.DefaultGroup)+3+3*throttle.MaxRawKeyLen {
				t.Errorf("Redis key of a %d-byte key is %d bytes", len(k), len(rkey))
			}
			if d := mustAllowN(t, l, k, p, 1); !d.Allowed {
				t.Errorf("first request of %.80q denied: another key used its window", k)
			}
		}
		for _, k := range keys {
			if d := mustAllowN(t, l, k, p, 1); d.Allowed {
				t.Errorf("second request of %.80q allowed", k)
			}
		}
		if c, ok := rdb.(*redis.ClusterClient); ok {
			// The hash tag, not the key, places a key: all share one slot.
			want := c.ClusterKeySlot(ctx, redisKey(t, l, "a")).Val()
			for _, k := range keys {
				if got := c.ClusterKeySlot(ctx, redisKey(t, l, k)).Val(); got != want {
					t.Errorf("key %.80q is in slot %d, want the group's slot %d", k, got, want)
				}
			}
		}
	})
}

// TestGroupsPlaceKeysInSlots: with a group function, keys of one group share
// a slot whatever their text, and the group cannot be forged by the key.
func TestGroupsPlaceKeysInSlots(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		c, ok := b.rdb.(*redis.ClusterClient)
		if !ok {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			byTenant := func(key string) string { tenant, _, _ := strings.Cut(key, "/"); return tenant }
			l := throttle.NewLimiter(c, throttle.WithGroup(byTenant))
			slot := func(key string) int64 { return c.ClusterKeySlot(ctx, redisKey(t, l, key)).Val() }
			if slot("acme/sms") != slot("acme/email") || slot("acme/}{x}") != slot("acme/sms") || slot("acme/{globex}") != slot("acme/sms") {
				t.Errorf("keys of tenant acme are in different slots")
			}
			// Braces in a tenant are part of its group, not a hash tag: these
			// keys name other tenants, and none lands in acme's slot.
			for _, forged := range []string{"{acme}/sms", "acme}/sms", "{acme/sms", "x{acme}/sms", "}{acme}/sms"} {
				if got, acme := slot(forged), slot("acme/sms"); got == acme {
					t.Errorf("key %q forged tenant acme's slot %d", forged, acme)
				}
			}
			slots := map[int64]bool{}
			for _, tenant := range []string{"acme", "globex", "initech", "umbrella", "hooli", "{acme}", "acme}"} {
				slots[slot(tenant+"/sms")] = true
			}
			if len(slots) < 3 {
				t.Errorf("7 tenants fell in %d slots: grouping does not spread keys", len(slots))
			}
		})
	}
}

func TestPrefixStartsEveryKey(t *testing.T) {
	t.Parallel()
	l := throttle.NewLimiter(redis.NewClient(&redis.Options{}))
	cases := []struct{ key, want string }{
		{"sms:acme", "sluice:{limits}:sms:acme"},
		{"{acme}", "sluice:{limits}:%7Bacme%7D"},
		{"50%#", "sluice:{limits}:50%25%23"},
		{strings.Repeat("k", 201), "sluice:{limits}:#"},
	}
	for _, tc := range cases {
		got, err := l.RedisKey(tc.key)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("RedisKey(%.20q) = %q, want %q", tc.key, got, tc.want)
		}
	}
	custom := throttle.NewLimiter(redis.NewClient(&redis.Options{}), throttle.WithPrefix("app:rl:"), throttle.WithGroup(throttle.KeyGroup))
	if got, _ := custom.RedisKey("a:b"); got != "app:rl:{a:b}:a:b" {
		t.Errorf("RedisKey with prefix and KeyGroup = %q", got)
	}
}
