package faultproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/faultproxy"
)

// echoServer answers each line with the same line, on loopback.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip writes a line on c and reads one back within wait.
func roundTrip(c net.Conn, wait time.Duration) error {
	if err := c.SetDeadline(time.Now().Add(wait)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("echoed " + line)
	}
	return nil
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestModes(t *testing.T) {
	t.Parallel()
	p, err := faultproxy.Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })

	open := dial(t, p.Addr())
	if err := roundTrip(open, 5*time.Second); err != nil {
		t.Fatalf("pass: %v", err)
	}

	// A partition: the open connection and new ones stay connected and
	// unanswered, until the client's own deadline.
	p.Set(faultproxy.Blackhole)
	for name, c := range map[string]net.Conn{"open": open, "new": dial(t, p.Addr())} {
		if err := roundTrip(c, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("blackhole, %s connection: %v, want a timeout", name, err)
		}
	}

	// Down: new connections are reset, which the client sees on its
	// first read or write, or, when the reset comes before its dial has
	// returned, as the dial's error.
	p.Set(faultproxy.Refuse)
	c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
		err = roundTrip(c, 5*time.Second)
	}
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("refuse: %v, want the connection reset or closed at once", err)
	}

	// Healed: the cut connection stays cut, a new one passes.
	p.Set(faultproxy.Pass)
	if err := roundTrip(open, 5*time.Second); err == nil {
		t.Errorf("pass after the cut: the connection cut by the blackhole still answers")
	}
	if err := roundTrip(dial(t, p.Addr()), 5*time.Second); err != nil {
		t.Errorf("pass after the cut, new connection: %v", err)
	}
	if got, want := p.Accepted(), int64(4); got != want {
		t.Errorf("Accepted() = %d, want %d", got, want)
	}
}

// TestRefuseCutsOpenConnections: a server going down resets its clients.
func TestRefuseCutsOpenConnections(t *testing.T) {
	t.Parallel()
	p, err := faultproxy.Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c := dial(t, p.Addr())
	if err := roundTrip(c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Set(faultproxy.Refuse)
	if err := roundTrip(c, 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("after Refuse: %v, want the connection reset or closed at once", err)
	}
}
