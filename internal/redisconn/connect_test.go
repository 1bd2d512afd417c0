package redisconn

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestConnectSentinel: a Sentinel URL names only sentinels, so a client
// that reaches the master found it through them.
func TestConnectSentinel(t *testing.T) {
	t.Parallel()
	sentinels, master := redistest.Sentinel(t, 1)
	ctx := t.Context()
	rdb, err := Connect(ctx, "redis+sentinel://"+sentinels[0]+"/2?master_name="+redistest.SentinelMaster)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	key := "test-" + t.Name()
	if err := rdb.Set(ctx, key, "through sentinel", 0).Err(); err != nil {
		t.Fatal(err)
	}
	direct := redis.NewClient(&redis.Options{Addr: master, DB: 2})
	defer direct.Close()
	if got, err := direct.Get(ctx, key).Result(); err != nil || got != "through sentinel" {
		t.Errorf("the master's database 2 holds %q (%v), want what was set through the sentinel", got, err)
	}

	url := "redis+sentinel://" + sentinels[0] + "/0?master_name=other"
	_, err = Connect(ctx, url)
	want := fmt.Sprintf(`Redis at %s: no sentinel gave the address of master "other": sentinel %s monitors no master named "other"`, url, sentinels[0])
	if err == nil || err.Error() != want {
		t.Errorf("Connect with an unknown master = %v, want %q", err, want)
	}
}

// TestConnectCluster: from one node of a URL, the client finds every master.
func TestConnectCluster(t *testing.T) {
	t.Parallel()
	addrs := redistest.ClusterAddrs(t)
	ctx := t.Context()
	rdb, err := Connect(ctx, "redis+cluster://"+addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("Connect gave a %T, want a *redis.ClusterClient", rdb)
	}
	var mu sync.Mutex
	var masters []string
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, c.Options().Addr)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(masters)
	want := slices.Sorted(slices.Values(addrs))
	if diff := cmp.Diff(want, masters); diff != "" {
		t.Errorf("masters the client found (-want +got):\n%s", diff)
	}
}

func TestConnectUnreachable(t *testing.T) {
	t.Parallel()
	cases := []struct{ url, want string }{
		{"redis://:s3cret@127.0.0.1:1/0", "Redis at redis://:xxxxx@127.0.0.1:1/0 unreachable: dial tcp 127.0.0.1:1: "},
		{"redis+cluster://127.0.0.1:1", "Redis Cluster at redis+cluster://127.0.0.1:1 unreachable: dial tcp 127.0.0.1:1: "},
		{"rediss://127.0.0.1:1/0", "Redis at rediss://127.0.0.1:1/0 unreachable: dial tcp 127.0.0.1:1: "},
		{"redis+sentinel://127.0.0.1:1/0?master_name=m&addr=127.0.0.1:2", `Redis at redis+sentinel://127.0.0.1:1/0?master_name=m&addr=127.0.0.1:2 unreachable: no sentinel gave the address of master "m": sentinel 127.0.0.1:1: dial tcp 127.0.0.1:1: `},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			_, err := Connect(t.Context(), tc.url)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Connect(%q) = %v, want an error starting %q", tc.url, err, tc.want)
			}
			if took := time.Since(start); took > 4*time.Second {
				t.Errorf("Connect(%q) took %v to give up on a refused connection", tc.url, took)
			}
		})
	}
}

// TestConnectRefused: a server that answers is never called unreachable.
// The error quotes its refusal and says what Sluice was doing, or says
// that the server does not speak TLS when the URL asks for it, with the
// scheme to use, and none of these errors is the user's typing mistake
// (ErrUsage).
func TestConnectRefused(t *testing.T) {
	t.Parallel()
	opt, err := redis.ParseURL(redistest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	if opt.TLSConfig != nil {
		t.Skip("the tests' Redis speaks TLS: these cases need one without")
	}
	addr := opt.Addr
	at := func(scheme, path string) string {
		u := url.URL{Scheme: scheme, Host: addr, Path: path}
		if opt.Password != "" {
			u.User = url.UserPassword(opt.Username, opt.Password)
		}
		return u.String()
	}
	cases := []struct {
		name, url, want string
	}{
		{"database out of range", at("redis", "/99"),
			`Redis at ` + RedactURL(at("redis", "/99")) + `: selecting database 99: the server replied "ERR DB index is out of range"`},
		{"cluster URL for one server", at("redis+cluster", ""),
			`Redis Cluster at ` + RedactURL(at("redis+cluster", "")) + `: reading the cluster's slots: the server replied "ERR This instance has cluster support disabled": it is not a cluster node; use redis:// for a single server`},
		{"TLS URL for a server without TLS", at("rediss", "/0"),
			`Redis at ` + RedactURL(at("rediss", "/0")) + `: ` + addr + ` does not speak TLS (it answered a PING sent without TLS): use redis://, not rediss://`},
		{"TLS cluster URL for a server without TLS", at("rediss+cluster", ""),
			`Redis Cluster at ` + RedactURL(at("rediss+cluster", "")) + `: node ` + addr + ` does not speak TLS (it answered a PING sent without TLS): use redis+cluster://, not rediss+cluster://`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb, err := Connect(t.Context(), tc.url)
			if err == nil {
				_ = rdb.Close()
				t.Fatalf("Connect(%q): no error, want %q", RedactURL(tc.url), tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("Connect(%q) =\n%s\nwant\n%s", RedactURL(tc.url), got, tc.want)
			}
			if errors.Is(err, cli.ErrUsage) {
				t.Errorf("Connect(%q) = %q matches ErrUsage: the URL was read, and Redis answered", RedactURL(tc.url), err)
			}
		})
	}
}

// TestURLErrorsAreUsage: a URL that is missing or cannot be read is the
// user's typing mistake (ErrUsage, exit 2), and its error reads as before,
// without the words "usage error".
func TestURLErrorsAreUsage(t *testing.T) {
	t.Parallel()
	cases := []struct{ url, want string }{
		{"", "no Redis: set --redis or REDIS_URL"},
		{"localhost:6379", `--redis "localhost:6379": no scheme: use redis://`},
		{"http://:s3cret@localhost:6379", `--redis "http://:xxxxx@localhost:6379": scheme "http": use redis://`},
		{"redis+sentinel://s1/0?master_name=m", `--redis "redis+sentinel://s1/0?master_name=m": sentinel s1 has no port`},
	}
	for _, tc := range cases {
		for name, connect := range map[string]func(string) error{
			"RedisClient": func(u string) error { _, err := Client(u); return err },
			"Connect":     func(u string) error { _, err := Connect(t.Context(), u); return err },
		} {
			err := connect(tc.url)
			if err == nil {
				t.Errorf("%s(%q): no error, want %q", name, tc.url, tc.want)
				continue
			}
			if !errors.Is(err, cli.ErrUsage) {
				t.Errorf("%s(%q) = %q, which does not match ErrUsage", name, tc.url, err)
			}
			if got := err.Error(); !strings.HasPrefix(got, tc.want) || strings.Contains(got, "usage error") {
				t.Errorf("%s(%q) = %q, want it to start %q and not say \"usage error\"", name, tc.url, got, tc.want)
			}
		}
	}
	if _, err := Connect(t.Context(), "redis://127.0.0.1:1/0"); errors.Is(err, cli.ErrUsage) {
		t.Errorf("Connect to a closed port = %q matches ErrUsage: the URL was read", err)
	}
}
