package integration_test

import (
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/sluicehq/sluice/internal/redistest"
)

// capRelay is an SMTP relay of the test's own on 127.0.0.1: it takes
// `hold` over each message, and counts the sessions open from the
// connection to the end of the message (within the client's connection,
// so a subset of the time its slot is held).
type capRelay struct {
	addr string
	hold time.Duration

	mu    sync.Mutex
	open  int
	peak  int
	mails int
}

func startCapRelay(t *testing.T, hold time.Duration) *capRelay {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &capRelay{addr: l.Addr().String(), hold: hold}
	s := gosmtp.NewServer(gosmtp.BackendFunc(func(*gosmtp.Conn) (gosmtp.Session, error) {
		r.mu.Lock()
		r.open++
		r.peak = max(r.peak, r.open)
		r.mu.Unlock()
		return &relaySession{r: r}, nil
	}))
	s.Domain = "localhost"
	s.ReadTimeout, s.WriteTimeout = 10*time.Second, 10*time.Second
	s.ErrorLog = log.New(io.Discard, "", 0)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(l) }()
	t.Cleanup(func() { s.Close(); l.Close(); <-done })
	return r
}

type relaySession struct {
	r      *capRelay
	closed bool
}

func (s *relaySession) Mail(string, *gosmtp.MailOptions) error { return nil }
func (s *relaySession) Rcpt(string, *gosmtp.RcptOptions) error { return nil }
func (s *relaySession) Reset()                                 {}

// Data takes the message, then counts the session closed: what follows
// (the reply, QUIT) is within the client's connection.
func (s *relaySession) Data(r io.Reader) error {
	_, _ = io.Copy(io.Discard, r)
	time.Sleep(s.r.hold)
	s.r.mu.Lock()
	s.r.mails++
	s.r.open--
	s.r.mu.Unlock()
	s.closed = true
	return nil
}

func (s *relaySession) Logout() error {
	if !s.closed {
		s.r.mu.Lock()
		s.r.open--
		s.r.mu.Unlock()
	}
	return nil
}

// TestSMTPConnectionsUnderCap: email through a relay that takes 150 ms a
// message, under a rule of concurrency 3, from 2 workers at
// --concurrency 10: the relay never has more than 3 sessions open, and
// takes every message.
func TestSMTPConnectionsUnderCap(t *testing.T) {
	t.Parallel()
	const n = 40
	url, rdb := redistest.URL(t), redistest.Client(t)
	enqueueBin := buildCLIs(t)
	relay := startCapRelay(t, 150*time.Millisecond)
	queue, prefix := redistest.Queue(t, rdb), redistest.Prefix(t)
	policies := writePolicies(t, `
tasks:
  email:send:
    - { name: relay, scope: global, concurrency: 3 }
`)
	for _, tenant := range []string{"acme", "globex"} {
		enqueueEmail(t, enqueueBin, url, queue, tenant, n/2, "--prefix", prefix)
	}
	procs := startWorkers(t, 2, "--redis", url, "--policies", policies, "--smtp-addr", relay.addr, "--smtp-starttls", "off",
		"--smtp-from", "noreply@example.com", "--sms-log", "--queues", queue+"=1", "--prefix", prefix, "--concurrency", "10", "--log-level", "warn")
	waitFor(t, 60*time.Second, "every message at the relay", nil, func() bool {
		relay.mu.Lock()
		defer relay.mu.Unlock()
		return relay.mails >= n
	})
	stopWorkers(t, procs...)
	relay.mu.Lock()
	defer relay.mu.Unlock()
	if relay.peak > 3 || relay.peak < 2 {
		t.Errorf("the relay saw %d sessions open at once, want 3 at most (and the cap used: 2 or more)", relay.peak)
	}
	if relay.mails != n {
		t.Errorf("the relay took %d messages, want %d", relay.mails, n)
	}
	t.Logf("%d messages, at most %d sessions open at once", relay.mails, relay.peak)
}

// enqueueEmail runs cmd/enqueue (bin) to put n emails of tenant on queue.
func enqueueEmail(t *testing.T, bin, url, queue, tenant string, n int, more ...string) {
	t.Helper()
	runEnqueue(t, bin, append([]string{"email", "--redis", url, "--queue", queue, "--tenant", tenant, "--to", "user@example.com",
		"--subject", "hello", "--body", "hello", "--count", fmt.Sprint(n)}, more...)...)
}
