package main

import (
	"context"
	"flag"
	"io"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/throttle"
)

// redisFlags are the flags that say where a command finds Redis and the
// workers' keys.
type redisFlags struct {
	url    *string // --redis
	prefix *string // --prefix; nil for a command that reads no key of the limiter
}

// addRedisFlags defines --redis and --prefix on fs.
func addRedisFlags(fs *flag.FlagSet) redisFlags {
	f := addRedisURLFlag(fs)
	f.prefix = fs.String("prefix", throttle.DefaultPrefix, "prefix of the limiter's Redis keys, as the workers' --prefix")
	return f
}

// addRedisURLFlag defines --redis alone on fs, for a command that reads no
// key of the limiter.
func addRedisURLFlag(fs *flag.FlagSet) redisFlags {
	return redisFlags{url: fs.String("redis", "", redisconn.RedisURLHelp)}
}

// checkPrefix refuses a --prefix with a brace (the limiter places the hash
// tag itself), before the command reads a file or Redis. ok is false when
// the command should return code, the error printed.
func (f redisFlags) checkPrefix(name string, stderr io.Writer) (code int, ok bool) {
	if f.prefix != nil && keyspace.CheckPrefix(*f.prefix) != nil {
		return failf(stderr, 2, name, "--prefix %q: may not contain a brace", *f.prefix), false
	}
	return 0, true
}

// conn is a command's connection to Redis.
type conn struct {
	rdb    redis.UniversalClient
	prefix string // --prefix; DefaultPrefix for a command without it
}

// connect checks --prefix and connects to --redis (see
// redisconn.Connect). ok is false when the command should return code,
// the error printed: 2 for a bad flag or URL, 1 when Redis failed. The
// caller closes the connection.
func (f redisFlags) connect(ctx context.Context, name string, stderr io.Writer) (c *conn, code int, ok bool) {
	if code, ok := f.checkPrefix(name, stderr); !ok {
		return nil, code, false
	}
	rdb, err := redisconn.Connect(ctx, *f.url)
	if err != nil {
		return nil, failf(stderr, cli.ExitStatus(err), name, "%v", err), false
	}
	c = &conn{rdb: rdb, prefix: throttle.DefaultPrefix}
	if f.prefix != nil {
		c.prefix = *f.prefix
	}
	return c, 0, true
}

// limiter returns a limiter on the workers' keys.
func (c *conn) limiter() *throttle.Limiter {
	return throttle.NewLimiter(c.rdb, throttle.WithPrefix(c.prefix))
}

// inspector returns an inspector of asynq's queues on c's client, of no
// use once c is closed.
func (c *conn) inspector() *asynq.Inspector {
	return asynq.NewInspectorFromRedisClient(c.rdb)
}

// Close closes the connection.
func (c *conn) Close() error { return c.rdb.Close() }
