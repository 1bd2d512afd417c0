package redisconn

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

// summary is what a test checks of a redisConfig.
type summary struct {
	Kind                 string // "single", "cluster" or "failover"
	Addrs                []string
	Master               string
	DB                   int
	User, Password       string // the data nodes'
	SentinelPassword     string
	TLS                  bool
	MaxRetries, Protocol int
}

func summarize(c redisConfig) summary {
	switch {
	case c.cluster != nil:
		o := c.cluster
		return summary{Kind: "cluster", Addrs: o.Addrs, User: o.Username, Password: o.Password,
			TLS: o.TLSConfig != nil, MaxRetries: o.MaxRetries, Protocol: o.Protocol}
	case c.failover != nil:
		o := c.failover
		return summary{Kind: "failover", Addrs: o.SentinelAddrs, Master: o.MasterName, DB: o.DB,
			User: o.Username, Password: o.Password, SentinelPassword: o.SentinelPassword,
			TLS: o.TLSConfig != nil, MaxRetries: o.MaxRetries, Protocol: o.Protocol}
	case c.single != nil:
		o := c.single
		return summary{Kind: "single", Addrs: []string{o.Addr}, DB: o.DB, User: o.Username, Password: o.Password,
			TLS: o.TLSConfig != nil, MaxRetries: o.MaxRetries, Protocol: o.Protocol}
	}
	return summary{}
}

func TestParseRedisURL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		url  string
		want summary
	}{
		{"one server", "redis://localhost:6379/2",
			summary{Kind: "single", Addrs: []string{"localhost:6379"}, DB: 2}},
		{"one server, TLS, password", "rediss://:s3cret@redis.example:6380/0",
			summary{Kind: "single", Addrs: []string{"redis.example:6380"}, Password: "s3cret", TLS: true}},
		{"scheme in capitals", "REDIS://localhost:6379/0",
			summary{Kind: "single", Addrs: []string{"localhost:6379"}}},
		{"cluster, one node", "redis+cluster://10.0.0.1:7000",
			summary{Kind: "cluster", Addrs: []string{"10.0.0.1:7000"}}},
		{"cluster, three nodes", "redis+cluster://10.0.0.1:7000?addr=10.0.0.2:7001&addr=10.0.0.3:7002",
			summary{Kind: "cluster", Addrs: []string{"10.0.0.1:7000", "10.0.0.2:7001", "10.0.0.3:7002"}}},
		{"cluster, database 0, options", "redis+cluster://app:pw@10.0.0.1:7000/0?max_retries=5&protocol=2",
			summary{Kind: "cluster", Addrs: []string{"10.0.0.1:7000"}, User: "app", Password: "pw", MaxRetries: 5, Protocol: 2}},
		{"cluster, no port: Redis's", "redis+cluster://node1/",
			summary{Kind: "cluster", Addrs: []string{"node1:6379"}}},
		{"cluster, TLS", "rediss+cluster://node1:7000?addr=node2:7000",
			summary{Kind: "cluster", Addrs: []string{"node1:7000", "node2:7000"}, TLS: true}},
		{"sentinel", "redis+sentinel://10.0.0.1:26379/3?master_name=mymaster&addr=10.0.0.2:26379",
			summary{Kind: "failover", Addrs: []string{"10.0.0.1:26379", "10.0.0.2:26379"}, Master: "mymaster", DB: 3}},
		{"sentinel, passwords", "redis+sentinel://:sentinelpw@s1:26379?master_name=m&password=masterpw",
			summary{Kind: "failover", Addrs: []string{"s1:26379"}, Master: "m", Password: "masterpw", SentinelPassword: "sentinelpw"}},
		{"sentinel, TLS", "rediss+sentinel://s1:26379/0?master_name=m",
			summary{Kind: "failover", Addrs: []string{"s1:26379"}, Master: "m", TLS: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := parseRedisURL(tc.url)
			if err != nil {
				t.Fatalf("parseRedisURL(%q): %v", tc.url, err)
			}
			if diff := cmp.Diff(tc.want, summarize(cfg)); diff != "" {
				t.Errorf("parseRedisURL(%q) (-want +got):\n%s", tc.url, diff)
			}
		})
	}
}

func TestParseRedisURLErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, url, want string
	}{
		{"no scheme", "localhost:6379", "no scheme: use redis://, redis+cluster:// or redis+sentinel:// (rediss for TLS: rediss://, rediss+cluster://, rediss+sentinel://)"},
		{"other scheme", "http://localhost:6379", `scheme "http": use redis://, redis+cluster:// or redis+sentinel://`},
		{"unknown kind", "redis+ring://localhost:6379", `scheme "redis+ring": use redis://`},
		{"unix cluster", "unix+cluster:///tmp/redis.sock", `scheme "unix+cluster": use redis://`},
		{"cluster without node", "redis+cluster:///?addr=10.0.0.2:7000", "no cluster node: give host:port, as in redis+cluster://10.0.0.1:7000?addr=10.0.0.2:7000"},
		{"cluster database", "redis+cluster://10.0.0.1:7000/1", `database "1": a Redis Cluster has only database 0`},
		{"cluster bad option", "redis+cluster://10.0.0.1:7000?pool=3", "redis: unexpected option: pool"},
		{"cluster bad addr", "redis+cluster://10.0.0.1:7000?addr=10.0.0.2", "redis: unable to parse addr param: 10.0.0.2"},
		{"sentinel without master", "redis+sentinel://10.0.0.1:26379/0", "no master_name: name the master the sentinels monitor, as in redis+sentinel://10.0.0.1:26379/0?master_name=mymaster"},
		{"sentinel without address", "redis+sentinel:///0?master_name=m", "no sentinel: give host:port, as in redis+sentinel://10.0.0.1:26379/0?master_name=mymaster"},
		{"sentinel without port", "redis+sentinel://s1/0?master_name=m", "sentinel s1 has no port: give host:port (Sentinel's usual port is 26379)"},
		{"sentinel bad database", "redis+sentinel://s1:26379/x?master_name=m", `redis: invalid database number: "x"`},
		{"bad port", "redis://:pw@localhost:port/0", `invalid port ":port" after host`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseRedisURL(tc.url)
			if err == nil {
				t.Fatalf("parseRedisURL(%q): no error, want %q", tc.url, tc.want)
			}
			if got := err.Error(); !strings.HasPrefix(got, tc.want) || strings.Contains(got, "\n") {
				t.Errorf("parseRedisURL(%q) = %q, want one line starting %q", tc.url, got, tc.want)
			}
			if strings.Contains(err.Error(), "pw") && !strings.Contains(tc.want, "pw") {
				t.Errorf("parseRedisURL(%q) = %q: the error shows the password", tc.url, err)
			}
		})
	}
}

// TestRedisClient: the kind of client follows the URL, and an error names
// the URL without its passwords.
func TestRedisClient(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url  string
		want string // the client's type
	}{
		{"redis://127.0.0.1:1/0", "*redis.Client"},
		{"redis+cluster://127.0.0.1:1", "*redis.ClusterClient"},
		{"redis+sentinel://127.0.0.1:1/0?master_name=m", "*redis.Client"},
	}
	for _, tc := range cases {
		rdb, err := Client(tc.url)
		if err != nil {
			t.Errorf("Client(%q): %v", tc.url, err)
			continue
		}
		if got := typeName(rdb); got != tc.want {
			t.Errorf("Client(%q) is a %s, want a %s", tc.url, got, tc.want)
		}
		_ = rdb.Close()
	}

	_, err := Client("redis+sentinel://:sentinelpw@127.0.0.1:26379/0?password=masterpw")
	if got, want := err.Error(), `--redis "redis+sentinel://:xxxxx@127.0.0.1:26379/0?password=xxxxx": no master_name`; !strings.HasPrefix(got, want) {
		t.Errorf("RedisClient error = %q, want it to start %q", got, want)
	}
	_, err = Client("redis://127.0.0.1:6379/0?Password=s3cret")
	if got, want := err.Error(), `--redis "redis://127.0.0.1:6379/0?Password=xxxxx": redis: unexpected option: Password`; got != want {
		t.Errorf("RedisClient error = %q, want %q", got, want)
	}
	if _, err := Client(""); err == nil || err.Error() != "no Redis: set --redis or REDIS_URL" {
		t.Errorf(`Client("") = %v, want "no Redis: set --redis or REDIS_URL"`, err)
	}
}

func typeName(rdb redis.UniversalClient) string {
	switch rdb.(type) {
	case *redis.Client:
		return "*redis.Client"
	case *redis.ClusterClient:
		return "*redis.ClusterClient"
	}
	return "other"
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	cases := []struct{ url, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://user@127.0.0.1:6379/0", "redis://user@127.0.0.1:6379/0"},
		{"redis://user:s3cret@127.0.0.1:6379/0", "redis://user:xxxxx@127.0.0.1:6379/0"},
		{"redis+sentinel://s1:26379/0?master_name=m&password=s3cret", "redis+sentinel://s1:26379/0?master_name=m&password=xxxxx"},
		{"redis+sentinel://:a@s1:26379/0?sentinel_password=b&master_name=m", "redis+sentinel://:xxxxx@s1:26379/0?sentinel_password=xxxxx&master_name=m"},
		{"redis+sentinel://s1:26379/0?addr=s2:26379&password=a&password=b", "redis+sentinel://s1:26379/0?addr=s2:26379&password=xxxxx&password=xxxxx"},
		{"redis://127.0.0.1:6379/0?Password=s3cret&PASSWORD=b&Sentinel_Password=c", "redis://127.0.0.1:6379/0?Password=xxxxx&PASSWORD=xxxxx&Sentinel_Password=xxxxx"},
		{"redis://127.0.0.1:6379/0?api_key=s3cret&auth_token=b&db=1", "redis://127.0.0.1:6379/0?api_key=xxxxx&auth_token=xxxxx&db=1"},
		{"redis://127.0.0.1:6379/0?pass%77ord=s3cret&%zz=b", "redis://127.0.0.1:6379/0?pass%77ord=xxxxx&%zz=xxxxx"},
		{"redis://:s3cret@host:port/0", "redis://xxxxx@host:port/0"}, // does not parse
		{"http://example.com/%zz", "http://example.com/%zz"},         // does not parse, no user
	}
	for _, tc := range cases {
		if got := RedactURL(tc.url); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}

func TestDescribeRedis(t *testing.T) {
	t.Parallel()
	cases := []struct{ url, want string }{
		{"redis://:s3cret@127.0.0.1:6379/2", "127.0.0.1:6379 db 2"},
		{"redis+cluster://:s3cret@10.0.0.1:7000?addr=10.0.0.2:7000", "Redis Cluster at 10.0.0.1:7000, 10.0.0.2:7000"},
		{"redis+sentinel://s1:26379/1?master_name=mymaster&addr=s2:26379&password=s3cret", "master mymaster db 1 of the sentinels at s1:26379, s2:26379"},
		{"http://127.0.0.1:6379", "Redis"},
	}
	for _, tc := range cases {
		if got := Describe(tc.url); got != tc.want {
			t.Errorf("Describe(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}
