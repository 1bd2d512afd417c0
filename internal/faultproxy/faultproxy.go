// Package faultproxy is a TCP proxy on loopback that tests put between
// Sluice and Redis to cut the connection at will: Redis refusing
// connections (a crashed server) or a network partition (every byte
// dropped, nothing answered), then healed. It counts the connections
// clients open, so that a test can tell a client that retries calmly from
// one that spins.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Mode is what the proxy does with connections.
type Mode int

const (
	// Pass forwards connections to the upstream server. The default.
	Pass Mode = iota
	// Refuse resets every connection at once, open ones included: a
	// server that is down.
	Refuse
	// Blackhole accepts connections and keeps them open, but forwards
	// nothing and answers nothing: a network partition, which a client
	// sees only through its own timeouts. Open connections go quiet.
	Blackhole
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Refuse:
		return "refuse"
	case Blackhole:
		return "blackhole"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Proxy forwards TCP connections from its loopback address to an upstream
// address, until told otherwise. It is safe for concurrent use.
type Proxy struct {
	ln       net.Listener
	upstream string
	accepted atomic.Int64

	mu    sync.Mutex
	mode  Mode
	conns map[net.Conn]bool // every open connection: true for a client's, false for one to upstream
	wg    sync.WaitGroup
}

// Start returns a proxy listening on 127.0.0.1 (a port of its own) that
// forwards to upstream, a host:port. Close stops it.
func Start(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, upstream: upstream, conns: map[net.Conn]bool{}}
	p.wg.Go(p.serve)
	return p, nil
}

// Addr is the proxy's host:port, for clients.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted is how many connections clients have opened to the proxy so far,
// in every mode.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Set changes the mode. Refuse and Blackhole cut the open connections: reset
// for Refuse, silent for Blackhole (their clients' reads hang until their
// own deadlines). Back to Pass, the connections cut stay cut: clients open
// new ones, as after a real outage.
func (p *Proxy) Set(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m == p.mode {
		return
	}
	p.mode = m
	for c, client := range p.conns {
		switch {
		case m != Blackhole:
			reset(c)
			delete(p.conns, c)
		case !client:
			// The forwarding stops; the client's side is read and dropped
			// by the goroutine that forwarded it.
			_ = c.Close()
			delete(p.conns, c)
		}
	}
}

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.mode = Refuse
	for c := range p.conns {
		reset(c)
		delete(p.conns, c)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.accepted.Add(1)
		p.wg.Go(func() { p.handle(c) })
	}
}

// handle serves one client connection in the mode of the moment.
func (p *Proxy) handle(client net.Conn) {
	p.mu.Lock()
	mode := p.mode
	if mode == Refuse {
		p.mu.Unlock()
		reset(client)
		return
	}
	p.conns[client] = true
	p.mu.Unlock()
	defer p.forget(client)
	if mode == Blackhole {
		_, _ = io.Copy(io.Discard, client)
		return
	}

	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		reset(client)
		return
	}
	p.mu.Lock()
	if mode = p.mode; mode != Pass { // cut while dialling
		p.mu.Unlock()
		_ = up.Close()
		if mode == Blackhole {
			_, _ = io.Copy(io.Discard, client)
		}
		return
	}
	p.conns[up] = false
	p.mu.Unlock()
	defer p.forget(up)

	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(client, up) // ends when up is closed or cut
	}()
	_, err = io.Copy(up, client)
	// client is gone, or up was cut: in Blackhole the client stays
	// connected and unanswered.
	if errors.Is(err, net.ErrClosed) || err == nil {
		p.mu.Lock()
		blackhole := p.mode == Blackhole
		p.mu.Unlock()
		if blackhole {
			_, _ = io.Copy(io.Discard, client)
		}
	}
	_ = up.Close()
	<-done
}

// forget closes c and drops it from the open connections.
func (p *Proxy) forget(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// reset closes c with a TCP reset rather than a clean close, as a port
// where nothing listens answers.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
