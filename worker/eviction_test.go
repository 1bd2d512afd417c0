package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/syncbuf"
	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/worker"
)

// TestEviction: on a Redis of its own, a server refuses (Run and Ready
// alike) every maxmemory-policy that may evict keys, naming it and the
// fix, and accepts noeviction; AllowEviction runs anyway, with one
// warning however often Ready asks. A user that may not run INFO gets one
// warning, and the server goes on.
func TestEviction(t *testing.T) {
	t.Parallel()
	url := redistest.Own(t)
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(opt)
	t.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	p, err := policies.Parse(t.Name(), []byte(fairPolicies))
	if err != nil {
		t.Fatal(err)
	}
	server := func(rdb *redis.Client, allow bool) (*worker.Server, *syncbuf.Buffer) {
		t.Helper()
		logs := &syncbuf.Buffer{}
		srv, err := worker.NewServer(rdb, worker.Config{Policies: policies.Static(p), SMS: provider.LogProvider{}, Email: provider.LogProvider{},
			AllowEviction: allow, ThrottleConfig: worker.ThrottleConfig{Logger: slog.New(slog.NewJSONHandler(logs, nil))}})
		if err != nil {
			t.Fatal(err)
		}
		return srv, logs
	}
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "allkeys-lfu", "volatile-lfu", "allkeys-random", "volatile-random", "volatile-ttl", "noeviction"} {
		if err := admin.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		srv, _ := server(admin, false)
		for name, check := range map[string]func(context.Context) error{"CheckEviction": srv.CheckEviction, "Ready": srv.Ready, "Run": srv.Run} {
			if policy == "noeviction" {
				if name == "Run" {
					continue // it would run
				}
				if err := check(ctx); err != nil {
					t.Errorf("%s on %s: %v", name, policy, err)
				}
				continue
			}
			err := check(ctx)
			if !errors.Is(err, worker.ErrEvicting) || !strings.Contains(err.Error(), `"`+policy+`"`) || !strings.Contains(err.Error(), "noeviction") {
				t.Errorf("%s on %s: %v, want ErrEvicting naming the policy and noeviction", name, policy, err)
			}
		}
	}

	if err := admin.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	srv, logs := server(admin, true)
	for range 3 {
		if err := srv.Ready(ctx); err != nil {
			t.Errorf("Ready with AllowEviction: %v", err)
		}
	}
	if n := strings.Count(logs.String(), "maxmemory_policy"); n != 1 {
		t.Errorf("%d warnings of the eviction policy in three Ready calls with AllowEviction, want 1: %s", n, logs)
	}

	// A user without INFO: the server cannot tell, says so once, and goes on.
	if err := admin.Do(ctx, "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	limited := *opt
	limited.Username, limited.Password = "noinfo", "pw"
	rdb := redis.NewClient(&limited)
	t.Cleanup(func() { _ = rdb.Close() })
	srv, logs = server(rdb, false)
	for range 3 {
		if err := srv.Ready(ctx); err != nil {
			t.Errorf("Ready for a user without INFO: %v", err)
		}
	}
	if n := strings.Count(logs.String(), "could not check that Redis evicts no keys"); n != 1 {
		t.Errorf("%d warnings that the policy could not be read in three Ready calls, want 1: %s", n, logs)
	}
}
