package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// TestHolds: admin holds lists the holds in force, quoted (a tenant's
// escape sequence reaches no terminal), with the time left; unhold ends
// one, which the list and the limiter then no longer show, and says so of
// one that does not exist; a key that is not a hold is a usage error. On
// a single Redis and a cluster.
func TestHolds(t *testing.T) {
	t.Parallel()
	for _, b := range []struct {
		name string
		url  string
		rdb  redis.UniversalClient
	}{
		{"single", redistest.URL(t), redistest.Client(t)},
		{"cluster", "redis+cluster://" + redistest.ClusterAddrs(t)[0], redistest.Cluster(t)},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			prefix := redistest.Prefix(t)
			l := throttle.NewLimiter(b.rdb, throttle.WithPrefix(prefix))
			if err := l.Hold(ctx, "provider/sms:send", 10*time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := l.Hold(ctx, "provider/sms:send/ac\x1b[2Jme", time.Minute); err != nil {
				t.Fatal(err)
			}
			holds := func(want ...string) {
				t.Helper()
				r := admin(t, "", "holds", "--redis", b.url, "--prefix", prefix)
				got := lines(r.stdout)
				slices.Sort(got) // SCAN's order is not the keys'
				if r.code != 0 || len(got) != len(want) {
					t.Fatalf("admin holds: exit %d, %q (stderr %q), want %d lines", r.code, got, r.stderr, len(want))
				}
				// Each line: the key quoted, and a time left of more than 0
				// and at most the hold.
				for i, w := range want {
					key, rest, ok := strings.Cut(got[i], " held for ")
					left, err := time.ParseDuration(strings.TrimSuffix(rest, " more"))
					if !ok || key != w || err != nil || left <= 0 || left > 10*time.Minute {
						t.Errorf("admin holds: line %q, want %s held for a time left of at most 10m", got[i], w)
					}
				}
				if strings.Contains(r.stdout, "\x1b") {
					t.Errorf("admin holds wrote an escape sequence: %q", r.stdout)
				}
			}
			holds(`"provider/sms:send"`, `"provider/sms:send/ac\x1b[2Jme"`)

			r := admin(t, "", "unhold", "--redis", b.url, "--prefix", prefix, "--key", "provider/sms:send")
			if r.code != 0 || r.stdout != "ended the hold \"provider/sms:send\": the workers send again within 250 ms\n" {
				t.Errorf("admin unhold: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
			if left, err := l.HeldFor(ctx, "provider/sms:send"); err != nil || left != 0 {
				t.Errorf("held for %v (%v) after unhold, want 0", left, err)
			}
			holds(`"provider/sms:send/ac\x1b[2Jme"`)
			r = admin(t, "", "unhold", "--redis", b.url, "--prefix", prefix, "--key", "provider/sms:send")
			if r.code != 0 || r.stdout != "no hold \"provider/sms:send\": nothing to end\n" {
				t.Errorf("admin unhold of no hold: exit %d, stdout %q", r.code, r.stdout)
			}
			r = admin(t, "", "unhold", "--redis", b.url, "--prefix", prefix, "--key", "rule/sms:send/provider")
			if r.code != 2 || !strings.HasPrefix(r.stderr, "admin unhold: --key \"rule/sms:send/provider\": give a hold") {
				t.Errorf("admin unhold of a rule: exit %d, stderr %q", r.code, r.stderr)
			}
		})
	}
}
