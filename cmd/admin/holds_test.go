package main

import (
	"context"
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
				if r.code != 0 || len(got) != len(want) {
					t.Fatalf("admin holds: exit %d, %q (stderr %q), want %d lines", r.code, got, r.stderr, len(want))
				}
				for _, w := range want {
					if !strings.Contains(r.stdout, w) {
						t.Errorf("admin holds: %q, want a line with %q", got, w)
					}
				}
				if strings.Contains(r.stdout, "\x1b") {
					t.Errorf("admin holds wrote an escape sequence: %q", r.stdout)
				}
			}
			holds(`"provider/sms:send" held for 10m more`, `"provider/sms:send/ac\x1b[2Jme" held for 1m more`)

			r := admin(t, "", "unhold", "--redis", b.url, "--prefix", prefix, "--key", "provider/sms:send")
			if r.code != 0 || r.stdout != "ended the hold \"provider/sms:send\": the workers send again within 250 ms\n" {
				t.Errorf("admin unhold: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
			if left, err := l.HeldFor(ctx, "provider/sms:send"); err != nil || left != 0 {
				t.Errorf("held for %v (%v) after unhold, want 0", left, err)
			}
			holds(`"provider/sms:send/ac\x1b[2Jme" held for 1m more`)
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
