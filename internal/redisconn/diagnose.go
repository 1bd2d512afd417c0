package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// step is one command of what Connect has a server do before it answers,
// named for the error it may cause: "selecting database 2".
type step struct {
	what string
	run  func(context.Context, *redis.Conn) error
}

// diagnose finds which step a server refused, after Connect's PING got an
// error reply: the client's own connection setup (authentication, the
// database, a cluster's slots) runs in one go and its errors do not say
// which command failed. It goes through the steps again, one command at a
// time, on a connection of its own, and returns the first that a server
// refuses with the server's reply; where names the server ("node
// 127.0.0.1:7000: ") when the URL names several, or none. master is the
// master's address with a Sentinel URL ("" when not known). refusal is nil
// when no step is refused this time.
func (c redisConfig) diagnose(ctx context.Context, master string) (where, what string, refusal redis.Error) {
	switch {
	case c.single != nil:
		o := c.single
		what, refusal = refused(ctx, o.Network, o.Addr, o.TLSConfig, serverSteps(o.Username, o.Password, o.DB))
		return "", what, refusal
	case c.failover != nil && master != "":
		o := c.failover
		what, refusal = refused(ctx, "tcp", master, o.TLSConfig, serverSteps(o.Username, o.Password, o.DB))
		return "master " + master + ": ", what, refusal
	case c.cluster != nil:
		o := c.cluster
		steps := append(login(o.Username, o.Password), step{slotsStep, func(ctx context.Context, c *redis.Conn) error {
			return c.ClusterSlots(ctx).Err() //nolint:staticcheck // the command go-redis's cluster client reads, so the diagnosis replays it
		}})
		for _, addr := range o.Addrs {
			if what, refusal = refused(ctx, "tcp", addr, o.TLSConfig, steps); refusal != nil {
				if len(o.Addrs) > 1 {
					where = "node " + addr + ": "
				}
				return where, what, refusal
			}
		}
	}
	return "", "", nil
}

// serverSteps returns the steps of a connection to one server, as user
// with password, to database db, up to the PING.
func serverSteps(user, password string, db int) []step {
	steps := login(user, password)
	if db != 0 {
		steps = append(steps, step{fmt.Sprintf("selecting database %d", db), func(ctx context.Context, c *redis.Conn) error {
			return c.Select(ctx, db).Err()
		}})
	}
	return append(steps, step{"PING", func(ctx context.Context, c *redis.Conn) error {
		return c.Ping(ctx).Err()
	}})
}

// login returns the step that authenticates as user with password: none
// without a password, as go-redis then sends none.
func login(user, password string) []step {
	if password == "" {
		return nil
	}
	if user == "" {
		return []step{{"authenticating", func(ctx context.Context, c *redis.Conn) error {
			return c.Auth(ctx, password).Err()
		}}}
	}
	return []step{{fmt.Sprintf("authenticating as %q", user), func(ctx context.Context, c *redis.Conn) error {
		return c.AuthACL(ctx, user, password).Err()
	}}}
}

// refused runs steps in turn on a new connection to addr (over TLS with
// tc, unless it is nil) that authenticates as no one and selects no
// database, and returns the first step that the server refuses, with its
// reply. It returns a nil reply when the server refuses none, or when a
// step fails otherwise (the server could not be reached this time).
func refused(ctx context.Context, network, addr string, tc *tls.Config, steps []step) (string, redis.Error) {
	rdb := redis.NewClient(&redis.Options{
		Network: network, Addr: addr, TLSConfig: tc,
		Protocol: 2, DisableIdentity: true, // the fewest commands before the steps
		MaxRetries: -1, PoolSize: 1, ContextTimeoutEnabled: true,
	})
	defer rdb.Close()
	conn := rdb.Conn()
	defer conn.Close()
	for _, s := range steps {
		err := s.run(ctx, conn)
		if reply, ok := errors.AsType[redis.Error](err); ok {
			return s.what, reply
		}
		if err != nil {
			return "", nil
		}
	}
	return "", nil
}
