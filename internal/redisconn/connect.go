package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// connectTimeout is how long Connect gives Redis to answer.
const connectTimeout = 5 * time.Second

// Connect returns a client for rawURL, as RedisClient, once Redis answers
// a PING within 5 s. With a Sentinel URL it first asks the sentinels for
// the master, so that the error says which sentinel failed and how (the
// failover client itself retries until the time is up and reports only
// that). The caller closes the client.
//
// The error is one line that names the URL, its passwords hidden, and
// says what was found:
//
//   - "unreachable" only when nothing answered: the connection was
//     refused, or no reply came in time;
//   - a server that speaks TLS when the URL says redis://, or plain Redis
//     when it says rediss://, with the scheme to use instead (see probe);
//   - a server's refusal quoted, with what Sluice was doing: `Redis at
//     redis://127.0.0.1:6379/99: selecting database 99: the server replied
//     "ERR DB index is out of range"`;
//   - any other failure, such as a certificate that is not trusted, as
//     "connecting: " and the error.
//
// It matches cli.ErrUsage (errors.Is) when the URL is missing or cannot be
// read.
func Connect(ctx context.Context, rawURL string) (redis.UniversalClient, error) {
	cfg, err := redisURL(rawURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	what := "Redis at " + RedactURL(rawURL)
	if cfg.cluster != nil {
		what = "Redis Cluster at " + RedactURL(rawURL)
	}
	var master string // the master's address, with a Sentinel URL
	if o := cfg.failover; o != nil {
		err := cfg.watch(ctx, o.SentinelAddrs, "sentinel ", func(ctx context.Context) (err error) {
			master, err = findMaster(ctx, o)
			return err
		})
		if perr, ok := errors.AsType[*protocolError](err); ok {
			return nil, fmt.Errorf("%s: %v", what, perr)
		}
		if se, ok := errors.AsType[sentinelErrors](err); ok && !se.allUnreachable() {
			return nil, fmt.Errorf("%s: %v", what, err) // a sentinel answered
		}
		if err != nil {
			return nil, fmt.Errorf("%s unreachable: %v", what, err)
		}
	}
	rdb := cfg.client()
	err = cfg.watch(ctx, cfg.named(), cfg.role(), func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
	if err == nil {
		return rdb, nil
	}
	_ = rdb.Close()
	return nil, fmt.Errorf("%s%s", what, cfg.explain(ctx, err, master))
}

// named returns the addresses of the servers that c's URL names and that
// Connect's PING reaches: the server's, or the cluster nodes'. A Sentinel
// URL names only sentinels, and a unix socket speaks no TLS: none.
func (c redisConfig) named() []string {
	switch {
	case c.cluster != nil:
		return c.cluster.Addrs
	case c.single != nil && c.single.Network != "unix":
		return []string{c.single.Addr}
	}
	return nil
}

// role is what an error calls a server of named() before its address.
func (c redisConfig) role() string {
	if c.cluster != nil {
		return "node "
	}
	return ""
}

// explain returns the end of Connect's error, after the words that name
// the URL, for err, the error of its PING; master is the master's
// address with a Sentinel URL.
func (c redisConfig) explain(ctx context.Context, err error, master string) string {
	if perr, ok := errors.AsType[*protocolError](err); ok {
		return ": " + perr.Error()
	}
	if reply, ok := errors.AsType[redis.Error](err); ok {
		where, step, refusal := c.diagnose(ctx, master)
		if refusal == nil { // not refused again: say only what it replied
			return fmt.Sprintf(": connecting: the server replied %q", reply.Error())
		}
		return fmt.Sprintf(": %s%s: the server replied %q%s", where, step, refusal.Error(), c.hint(step, refusal))
	}
	if unreachable(err) {
		return " unreachable: " + err.Error()
	}
	return ": connecting: " + err.Error()
}

// unreachable reports whether err says that nothing answered: a dial that
// failed, or a wait that timed out.
func unreachable(err error) bool {
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "dial" {
		return true
	}
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return true
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}

// slotsStep names the step that reads a cluster's slots, for hint.
const slotsStep = "reading the cluster's slots"

// hint returns what to do about refusal, the server's reply to step,
// when Sluice knows better than the reply says: "" otherwise.
func (c redisConfig) hint(step string, refusal error) string {
	if step == slotsStep && strings.Contains(refusal.Error(), "cluster support disabled") {
		return ": it is not a cluster node; use " + toggle(c.scheme, "+cluster", "") + " for a single server"
	}
	return ""
}

// toggle returns scheme with old replaced by new, and "://".
func toggle(scheme, old, new string) string {
	return strings.Replace(scheme, old, new, 1) + "://"
}

// watch runs op, which reaches the servers at addrs (as the URL names
// them; role, such as "node ", goes before an address in an error) with
// ctx, and returns its error. When op has not returned after probeAfter,
// or has failed as mayBeProtocol says, it probes addrs, and returns a *protocolError, without waiting any
// longer for op, when one speaks TLS where c does not, or the reverse.
func (c redisConfig) watch(ctx context.Context, addrs []string, role string, op func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // an op left running returns at once
	done := make(chan error, 1)
	go func() { done <- op(ctx) }()
	timer := time.NewTimer(probeAfter)
	defer timer.Stop()
	select {
	case err := <-done:
		if err == nil || !mayBeProtocol(err) {
			return err
		}
		if perr := probe(ctx, addrs, role, c.scheme); perr != nil {
			return perr
		}
		return err
	case <-timer.C:
		if perr := probe(ctx, addrs, role, c.scheme); perr != nil {
			return perr
		}
		return <-done
	}
}

// mayBeProtocol reports whether err, the error of a call to Redis, is one
// that a server speaking TLS where the client does not, or the reverse,
// causes at once: a TLS server closes or resets a connection that does
// not start with a TLS handshake, and a client's handshake fails when the
// reply is not TLS. (A plain Redis that receives a handshake says nothing:
// watch probes when a call takes longer than probeAfter.)
func mayBeProtocol(err error) bool {
	if _, ok := errors.AsType[*tls.RecordHeaderError](err); ok {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// findMaster asks the sentinels of o in turn for the address of the
// master o names, and returns it once one gives it. The error holds what
// each sentinel did (errors.Is and errors.As see them).
func findMaster(ctx context.Context, o *redis.FailoverOptions) (string, error) {
	var errs sentinelErrors
	for _, addr := range o.SentinelAddrs {
		sc := redis.NewSentinelClient(&redis.Options{
			Addr: addr, Username: o.SentinelUsername, Password: o.SentinelPassword,
			TLSConfig: o.TLSConfig, DialTimeout: o.DialTimeout, MaxRetries: -1,
		})
		master, err := sc.GetMasterAddrByName(ctx, o.MasterName).Result()
		_ = sc.Close()
		switch {
		case err == nil && len(master) == 2:
			return net.JoinHostPort(master[0], master[1]), nil
		case err == nil:
			return "", nil // an address the failover client will read as it can
		case errors.Is(err, redis.Nil):
			errs = append(errs, fmt.Errorf("sentinel %s monitors no master named %q", addr, o.MasterName))
		default:
			errs = append(errs, fmt.Errorf("sentinel %s: %w", addr, err))
		}
	}
	return "", fmt.Errorf("no sentinel gave the address of master %q: %w", o.MasterName, errs)
}

// sentinelErrors are the errors of the sentinels that findMaster asked, in
// turn, on one line.
type sentinelErrors []error

func (e sentinelErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e sentinelErrors) Unwrap() []error { return e }

// allUnreachable reports whether no sentinel answered: each error is one of
// a dial or a wait.
func (e sentinelErrors) allUnreachable() bool {
	for _, err := range e {
		if !unreachable(err) {
			return false
		}
	}
	return true
}
