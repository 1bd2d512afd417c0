package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// probeAfter is how long Connect waits for Redis before it also probes
// the servers that the URL names for the protocol the URL does not say
// (see probe). It is what makes rediss:// for a plain Redis fail at once
// rather than after connectTimeout: such a server takes the TLS handshake
// for the start of a command and waits for the end of its line, which
// never comes (Redis looks for it only before the first zero byte, and a
// handshake has one in its first bytes). A server that answers within
// probeAfter is not probed.
const probeAfter = 500 * time.Millisecond

// probeTimeout bounds a probe: a server that speaks what the probe sends
// answers within a round trip.
const probeTimeout = time.Second

// protocolError says that a server speaks TLS where the URL does not, or
// the reverse.
type protocolError struct {
	server string // "127.0.0.1:6379", "node 127.0.0.1:7000" or "sentinel 127.0.0.1:26379"
	tls    bool   // whether the server speaks TLS (and the URL does not)
	scheme string // the URL's, in lower case
}

func (e *protocolError) Error() string {
	if e.tls {
		return fmt.Sprintf("%s expects TLS (it completed a TLS handshake): use %s, not %s://",
			e.server, toggle(e.scheme, "redis", "rediss"), e.scheme)
	}
	return fmt.Sprintf("%s does not speak TLS (it answered a PING sent without TLS): use %s, not %s://",
		e.server, toggle(e.scheme, "rediss", "redis"), e.scheme)
}

// probe asks the servers at addrs, all at once, whether they speak the
// protocol that scheme does not say: with rediss, whether one answers a
// PING sent without TLS; with redis, whether one completes a TLS
// handshake. It returns the *protocolError of the first that does (role,
// such as "node ", goes before its address), or nil when none does within
// probeTimeout. It sends no password, and checks no certificate: it only
// looks for TLS, and sends nothing over it.
func probe(ctx context.Context, addrs []string, role, scheme string) *protocolError {
	isTLS := strings.HasPrefix(scheme, "rediss")
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel() // the probes still running return at once
	found := make(chan *protocolError, len(addrs))
	for _, addr := range addrs {
		go func() {
			other := false
			if isTLS {
				other = answersPlain(ctx, addr)
			} else {
				other = speaksTLS(ctx, addr)
			}
			if !other {
				found <- nil
				return
			}
			found <- &protocolError{server: role + addr, tls: !isTLS, scheme: scheme}
		}()
	}
	for range addrs {
		if perr := <-found; perr != nil {
			return perr
		}
	}
	return nil
}

// answersPlain reports whether the server at addr answers an inline PING
// sent without TLS as Redis does: with a simple string ("+PONG") or an
// error ("-NOAUTH ...", "-DENIED ..."). A server that listens for TLS
// closes the connection instead, or answers with a TLS alert.
func answersPlain(ctx context.Context, addr string) bool {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	first := make([]byte, 1)
	if _, err := io.ReadFull(conn, first); err != nil {
		return false
	}
	return first[0] == '+' || first[0] == '-'
}

// speaksTLS reports whether the server at addr completes a TLS handshake,
// or refuses it with a TLS alert (as a server that wants a client
// certificate may).
func speaksTLS(ctx context.Context, addr string) bool {
	host, _, _ := net.SplitHostPort(addr)
	d := tls.Dialer{Config: &tls.Config{
		ServerName: host,
		// Only whether the server speaks TLS matters here: nothing is
		// sent over the connection, which is closed at once.
		InsecureSkipVerify: true,
	}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		_ = conn.Close()
		return true
	}
	op, ok := errors.AsType[*net.OpError](err)
	return ok && op.Op == "remote error"
}
