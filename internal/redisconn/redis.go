package redisconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/readlimit"
)

// RedisURLHelp is the help of the commands' --redis flag: the URL forms
// that RedisClient accepts.
const RedisURLHelp = "Redis `URL`: redis://host:port/db; " +
	"redis+cluster://node:port?addr=node2:port for a Redis Cluster; " +
	"redis+sentinel://sentinel:26379/db?master_name=NAME&addr=sentinel2:26379 for Sentinel; " +
	"rediss, rediss+cluster or rediss+sentinel for TLS, trusting the CAs in the PEM file $" + RedisCAFileEnv + " when set"

// RedisCAFileEnv names the environment variable that holds the path of a
// PEM file of CA certificates: when it is set, a TLS URL (rediss://,
// rediss+cluster://, rediss+sentinel://) trusts those CAs, and only those,
// for the servers' certificates, rather than the system's. For a Redis
// whose certificate a private CA signed. URLs without TLS ignore it.
const RedisCAFileEnv = "SLUICE_REDIS_CA_FILE"

// quiet drops go-redis's own log lines (pool dial retries and the like):
// the commands report Redis errors once, in their own words.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// Client returns a client for rawURL, whose scheme says what it
// connects to:
//
//   - redis://, rediss:// (TLS) or unix://: one server, as redis.ParseURL
//     reads it (redis://[user:password@]host:port/db).
//   - redis+cluster:// or rediss+cluster://: a Redis Cluster, as
//     redis.ParseClusterURL reads the URL without "+cluster": the host and
//     each addr query parameter are nodes to start from, and the client
//     discovers the others. A cluster has only database 0.
//   - redis+sentinel:// or rediss+sentinel://: a master found through Redis
//     Sentinel, as redis.ParseFailoverURL reads the URL without "+sentinel":
//     the host and each addr parameter are sentinels (host:port, the port
//     required), master_name names the master they monitor (required), the
//     path is the database, the user and password are the sentinels', and
//     the query parameters username and password are the master's.
//
// Its clients honour the deadlines of contexts
// (ContextTimeoutEnabled): a call with a deadline returns by it, even when
// Redis has stopped answering, which is what bounds the worker's
// --decision-timeout.
//
// The error is one line that names the URL, its passwords hidden (see
// RedactURL), and what is wrong with it. It matches cli.ErrUsage (errors.Is)
// when the URL is missing or cannot be read.
func Client(rawURL string) (redis.UniversalClient, error) {
	cfg, err := redisURL(rawURL)
	if err != nil {
		return nil, err
	}
	return cfg.client(), nil
}

// CheckURL returns the error RedisClient would for rawURL, without
// making a client: for a command to refuse a bad --redis before it does
// anything else, such as read a file. It matches cli.ErrUsage.
func CheckURL(rawURL string) error {
	_, err := redisURL(rawURL)
	return err
}

// redisURL parses rawURL for RedisClient and Connect, with the CAs of the
// file that RedisCAFileEnv names.
func redisURL(rawURL string) (redisConfig, error) {
	redis.SetLogger(quiet{})
	if rawURL == "" {
		return redisConfig{}, cli.Usagef("no Redis: set --redis or REDIS_URL")
	}
	cfg, err := parseRedisURL(rawURL)
	if err != nil {
		return redisConfig{}, cli.Usagef("--redis %q: %v", RedactURL(rawURL), err)
	}
	if tc := cfg.tlsConfig(); tc != nil {
		if file := os.Getenv(RedisCAFileEnv); file != "" {
			if tc.RootCAs, err = readCAs(file); err != nil {
				return redisConfig{}, fmt.Errorf("%s: %v", RedisCAFileEnv, err)
			}
		}
	}
	return cfg, nil
}

// maxCAFile is the largest CA file read, in bytes: a system's whole
// bundle of roots is some 200 KiB.
const maxCAFile = 1 << 20

// readCAs returns a pool of the CA certificates in the PEM file at path.
func readCAs(path string) (*x509.CertPool, error) {
	data, err := readlimit.File(path, maxCAFile)
	if _, ok := errors.AsType[*readlimit.TooLargeError](err); ok {
		return nil, fmt.Errorf("%s %w", path, err)
	}
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// Describe says what rawURL connects to, without its passwords, for
// messages: "host:port db 2", "Redis Cluster at host:port, host2:port", or
// "master mymaster db 0 of the sentinels at host:26379, host2:26379". It
// returns "Redis" when the URL does not parse.
func Describe(rawURL string) string {
	cfg, err := parseRedisURL(rawURL)
	switch {
	case err != nil:
		return "Redis"
	case cfg.cluster != nil:
		return "Redis Cluster at " + strings.Join(cfg.cluster.Addrs, ", ")
	case cfg.failover != nil:
		o := cfg.failover
		return fmt.Sprintf("master %s db %d of the sentinels at %s", o.MasterName, o.DB, strings.Join(o.SentinelAddrs, ", "))
	}
	return fmt.Sprintf("%s db %d", cfg.single.Addr, cfg.single.DB)
}

// redisConfig is what a Redis URL says: exactly one of single, cluster
// and failover is set.
type redisConfig struct {
	scheme   string // as the URL spells it, in lower case: "rediss+cluster"
	single   *redis.Options
	cluster  *redis.ClusterOptions
	failover *redis.FailoverOptions
}

// tlsConfig returns the TLS configuration of c's connections, nil when
// they do not use TLS. The sentinels and the master share it.
func (c redisConfig) tlsConfig() *tls.Config {
	switch {
	case c.cluster != nil:
		return c.cluster.TLSConfig
	case c.failover != nil:
		return c.failover.TLSConfig
	}
	return c.single.TLSConfig
}

// clusterStateReload is how often a cluster client reads the cluster's
// slots again (CLUSTER SLOTS) while it is used. go-redis reloads them at
// once on a redirection (MOVED, ASK), which a dead master cannot send, and
// otherwise every 60 s by default: after a failover the workers would dial
// the dead master for up to a minute. With 5 s they find the promoted
// replica within 5 s of the promotion (TestFailoverUnderLoad/cluster), for
// one CLUSTER SLOTS every 5 s per process.
const clusterStateReload = 5 * time.Second

// client returns a new client of the kind c says, which honours the
// deadlines of contexts.
func (c redisConfig) client() redis.UniversalClient {
	switch {
	case c.cluster != nil:
		c.cluster.ContextTimeoutEnabled = true
		c.cluster.ClusterStateReloadInterval = clusterStateReload
		return redis.NewClusterClient(c.cluster)
	case c.failover != nil:
		c.failover.ContextTimeoutEnabled = true
		return redis.NewFailoverClient(c.failover)
	}
	c.single.ContextTimeoutEnabled = true
	return redis.NewClient(c.single)
}

// parseRedisURL reads a URL of one of the forms RedisClient documents.
func parseRedisURL(raw string) (redisConfig, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return redisConfig{}, fmt.Errorf("no scheme: %s", schemes)
	}
	base, kind, _ := strings.Cut(strings.ToLower(scheme), "+")
	if (base != "redis" && base != "rediss" && base != "unix") || (base == "unix" && kind != "") {
		return redisConfig{}, fmt.Errorf("scheme %q: %s", scheme, schemes)
	}
	// What go-redis reads: the URL with its own scheme, without "+kind".
	plain := base + "://" + rest
	cfg, err := parseKind(scheme, kind, plain)
	cfg.scheme = strings.ToLower(scheme)
	return cfg, err
}

// parseKind reads plain, a URL with the scheme redis, rediss or unix, as
// kind says: "" for one server, "cluster" or "sentinel". scheme is the
// URL's as the user wrote it, for the errors.
func parseKind(scheme, kind, plain string) (redisConfig, error) {
	switch kind {
	case "":
		opt, err := redis.ParseURL(plain)
		return redisConfig{single: opt}, unwrapURLError(err)
	case "cluster":
		u, err := url.Parse(plain)
		if err != nil {
			return redisConfig{}, unwrapURLError(err)
		}
		if u.Hostname() == "" {
			return redisConfig{}, fmt.Errorf("no cluster node: give host:port, as in %s://10.0.0.1:7000?addr=10.0.0.2:7000", scheme)
		}
		if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
			return redisConfig{}, fmt.Errorf("database %q: a Redis Cluster has only database 0", p)
		}
		u.Path = ""
		opt, err := redis.ParseClusterURL(u.String())
		return redisConfig{cluster: opt}, unwrapURLError(err)
	case "sentinel":
		u, err := url.Parse(plain)
		if err != nil {
			return redisConfig{}, unwrapURLError(err)
		}
		if u.Hostname() == "" {
			return redisConfig{}, fmt.Errorf("no sentinel: give host:port, as in %s://10.0.0.1:26379/0?master_name=mymaster", scheme)
		}
		if u.Port() == "" {
			return redisConfig{}, fmt.Errorf("sentinel %s has no port: give host:port (Sentinel's usual port is 26379)", u.Hostname())
		}
		opt, err := redis.ParseFailoverURL(plain)
		if err != nil {
			return redisConfig{}, unwrapURLError(err)
		}
		if opt.MasterName == "" {
			return redisConfig{}, fmt.Errorf("no master_name: name the master the sentinels monitor, as in %s://%s/0?master_name=mymaster", scheme, u.Host)
		}
		return redisConfig{failover: opt}, nil
	}
	return redisConfig{}, fmt.Errorf("scheme %q: %s", scheme, schemes)
}

// schemes ends the error about a URL's scheme.
const schemes = "use redis://, redis+cluster:// or redis+sentinel:// (rediss for TLS: rediss://, rediss+cluster://, rediss+sentinel://)"

// unwrapURLError drops the URL that a *url.Error quotes: it may hold a
// password, and RedisClient names the URL itself, redacted.
func unwrapURLError(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}

// RedactURL returns rawURL with its passwords replaced by "xxxxx": the one
// in the user information and the value of each secret-like query parameter
// (secretParam), whatever its case. It is for messages and logs. A URL that
// does not parse loses everything between "://" and its last "@".
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		scheme, rest, ok := strings.Cut(rawURL, "://")
		if i := strings.LastIndex(rest, "@"); ok && i >= 0 {
			return scheme + "://xxxxx" + rest[i:]
		}
		return rawURL
	}
	redacted := false
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
		redacted = true
	}
	// Parameter by parameter, to keep the others as written.
	params := strings.Split(u.RawQuery, "&")
	for i, p := range params {
		k, _, _ := strings.Cut(p, "=")
		if k, err := url.QueryUnescape(k); err != nil || secretParam(k) {
			params[i], _, _ = strings.Cut(p, "=")
			params[i] += "=xxxxx"
			redacted = true
		}
	}
	u.RawQuery = strings.Join(params, "&")
	if !redacted {
		return rawURL // as the user wrote it
	}
	return u.String()
}

// secretWords are the parts of a query parameter's name that make its
// value a secret, compared in lower case: password, sentinel_password,
// Password, api_key and the like.
var secretWords = []string{"pass", "pwd", "secret", "token", "key", "auth", "cred"}

// secretParam reports whether the value of the query parameter name may be
// a secret.
func secretParam(name string) bool {
	name = strings.ToLower(name)
	return slices.ContainsFunc(secretWords, func(w string) bool { return strings.Contains(name, w) })
}
