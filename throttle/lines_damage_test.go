package throttle_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// TestLinesDamageContained: a key of the lines or of a rule that Redis
// refuses (the wrong type) or that holds what the script cannot read (a
// log scored +inf) stops only the flows, or the class, that use it.
// Dispatch still gives the others their slots, and says what it set
// aside, naming the key when it is of the wrong type or scored +inf. The
// scene is lineScene's: acme and globex parked in sms, initech in email.
func TestLinesDamageContained(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		damage  func(ctx context.Context, rdb redis.UniversalClient, k keysOf) error
		healthy []string // tenants still given slots
		refused string   // in what Dispatch says it refused
	}{
		{"tenant log of the wrong type", func(ctx context.Context, rdb redis.UniversalClient, k keysOf) error {
			return rdb.Set(ctx, k.rule("own/acme"), "garbage", 0).Err()
		}, []string{"globex", "initech"}, "own/acme is a string, not a zset"},
		{"lines of the wrong type", func(ctx context.Context, rdb redis.UniversalClient, k keysOf) error {
			return replaceWithString(ctx, rdb, k.scan("qL:sms:3"))
		}, []string{"initech"}, "qL:sms:3 is a string, not a zset"},
		{"flow rules unreadable", func(ctx context.Context, rdb redis.UniversalClient, k keysOf) error {
			return rdb.HSet(ctx, k.scan("qF:sms"), "r3:acme", "{not json").Err()
		}, []string{"globex", "initech"}, "tenant acme"},
		{"shared log of the wrong type", func(ctx context.Context, rdb redis.UniversalClient, k keysOf) error {
			return rdb.Set(ctx, k.rule("provider/sms"), "garbage", 0).Err()
		}, []string{"initech"}, "provider/sms is a string, not a zset"},
		{"shared log scored +inf", func(ctx context.Context, rdb redis.UniversalClient, k keysOf) error {
			inf, key := math.Inf(1), k.rule("provider/sms")
			if err := rdb.ZAdd(ctx, key, redis.Z{Score: inf, Member: "x"}, redis.Z{Score: inf, Member: "y"}).Err(); err != nil {
				return err
			}
			return rdb.Persist(ctx, key).Err() // outlives the sleep below, as the string does
		}, []string{"initech"}, "provider/sms: a member scored inf"},
		{"class hash of the wrong type", func(ctx context.Context, rdb redis.UniversalClient, k keysOf) error {
			return replaceWithString(ctx, rdb, k.scan("q:sms*"))
		}, []string{"initech"}, "the lines of sms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
				ctx := context.Background()
				s := newLineScene(t, rdb, l, prefix)
				if err := tc.damage(ctx, rdb, s.keys); err != nil {
					t.Fatal(err)
				}
				time.Sleep(s.window.Window) // the windows of the tasks admitted at once pass
				turn, err := s.ls.Dispatch(ctx)
				if err != nil {
					t.Fatalf("Dispatch with a damaged key: %v", err)
				}
				given := map[string]bool{}
				for _, g := range turn.Granted {
					given[map[byte]string{'s': "sms", 'e': "email"}[g.ID[0]]+":"+g.ID] = true
				}
				for _, tn := range tc.healthy {
					prefixOf := map[string]string{"globex": "sms:s", "initech": "email:e"}[tn]
					found := false
					for id := range given {
						found = found || strings.HasPrefix(id, prefixOf) && (tn != "globex" || id >= "sms:se")
					}
					if !found {
						t.Errorf("%s given no slot: grants %v, refused %q", tn, turn.Granted, turn.Refused)
					}
				}
				if !strings.Contains(strings.Join(turn.Refused, "\n"), tc.refused) {
					t.Errorf("Dispatch refused %q, want a word of %q", turn.Refused, tc.refused)
				}
			})
		})
	}
}

// lineScene is the scene of the tests of damaged and reset lines: classes
// "sms" and "email", each with a shared rule of 2 per 500 ms (beyond the
// lead: a task that finds the window full is parked) and a rule of 100 a
// second of each tenant's own. Tenants acme (tasks sa to sd) and globex
// (se, sf) have arrived in sms, initech (ea to ee) in email.
type lineScene struct {
	t      *testing.T
	ls     *throttle.Lines
	window throttle.Policy // the shared rule of each class
	keys   keysOf
}

// newLineScene sets up the scene of lineScene under prefix.
func newLineScene(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) lineScene {
	t.Helper()
	s := lineScene{
		t:      t,
		ls:     l.Lines(throttle.LinesConfig{}),
		window: throttle.Policy{Limit: 2, Window: 500 * time.Millisecond},
		keys:   keysOf{t: t, rdb: rdb, l: l, prefix: prefix},
	}
	for i, tn := range []string{"acme", "acme", "acme", "acme", "globex", "globex"} {
		s.arrive("sms", tn, "s"+string(rune('a'+i)))
	}
	for i := range 5 {
		s.arrive("email", "initech", "e"+string(rune('a'+i)))
	}
	return s
}

// arrive brings task id of tenant to the lines of class.
func (s lineScene) arrive(class, tenant, id string) {
	s.t.Helper()
	checks := []throttle.LineCheck{
		{Check: throttle.Check{Key: "provider/" + class, Policy: s.window, Cost: 1}, Shared: true},
		{Check: throttle.Check{Key: "own/" + tenant, Policy: throttle.PerSecond(100), Cost: 1}},
	}
	a := throttle.Arrival{Class: class, Tenant: tenant, Queue: "q", ID: id, Checks: checks}
	if _, err := s.ls.Arrive(context.Background(), a); err != nil {
		s.t.Fatal(err)
	}
}

// keysOf finds the Redis keys of a test's lines and rules.
type keysOf struct {
	t      *testing.T
	rdb    redis.UniversalClient
	l      *throttle.Limiter
	prefix string
}

func (k keysOf) rule(key string) string { return redisKey(k.t, k.l, key) }

// scan returns the one key of the lines under the prefix that matches
// pattern (after the hash tag).
func (k keysOf) scan(pattern string) string {
	k.t.Helper()
	keys := scanKeys(k.t, k.rdb, k.prefix+"{*}"+pattern)
	if len(keys) != 1 {
		k.t.Fatalf("keys matching %s: %v, want one", pattern, keys)
	}
	return keys[0]
}

// replaceWithString replaces key with a string.
func replaceWithString(ctx context.Context, rdb redis.UniversalClient, key string) error {
	if err := rdb.Del(ctx, key).Err(); err != nil {
		return err
	}
	return rdb.Set(ctx, key, "garbage", 0).Err()
}
