package provider_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"math/big"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/textproto"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	gosmtp "github.com/emersion/go-smtp"
	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
)

// The test server's only account.
const (
	smtpUser     = "sluice"
	smtpPassword = "correct horse battery staple"
)

// smtpServerOptions says how a test SMTP server behaves.
type smtpServerOptions struct {
	tls     bool  // offer STARTTLS, with a self-signed certificate
	auth    bool  // require AUTH PLAIN as smtpUser before MAIL
	rcptErr error // the reply to RCPT TO, when not nil
	dataErr error // the reply to the message, when not nil
}

// smtpReceived is a message the test server took.
type smtpReceived struct {
	TLS  bool   // the session ran over TLS
	User string // who logged in, "" for nobody
	From string
	To   []string
	Data []byte
}

// smtpServer is a real SMTP server (github.com/emersion/go-smtp) on
// 127.0.0.1 that records what it receives.
type smtpServer struct {
	addr     string
	roots    *x509.CertPool // trusts the server's certificate; nil without TLS
	opts     smtpServerOptions
	accepted atomic.Int32 // TCP connections

	mu        sync.Mutex
	authTries []string // usernames that tried AUTH
	mails     int      // MAIL FROM commands
	got       []smtpReceived
}

// startSMTPServer starts a test server, closed when the test ends.
func startSMTPServer(t *testing.T, opts smtpServerOptions) *smtpServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.1: %v", err)
	}
	ts := &smtpServer{addr: l.Addr().String(), opts: opts}
	s := gosmtp.NewServer(gosmtp.BackendFunc(func(c *gosmtp.Conn) (gosmtp.Session, error) {
		_, isTLS := c.TLSConnectionState()
		return &smtpSession{srv: ts, tls: isTLS}, nil
	}))
	s.Domain = "localhost"
	s.ReadTimeout = 10 * time.Second
	s.WriteTimeout = 10 * time.Second
	s.ErrorLog = log.New(io.Discard, "", 0)
	if opts.tls {
		cert, roots := smtpTestCertificate(t)
		s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
		ts.roots = roots
	} else {
		// Let a client log in without TLS, so a test can see that it
		// did not.
		s.AllowInsecureAuth = true
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(smtpCountingListener{l, &ts.accepted})
	}()
	t.Cleanup(func() {
		s.Close()
		l.Close() // in case Serve had not yet registered it with s
		<-done
	})
	return ts
}

// received returns what the server took and how many MAIL FROM and AUTH
// attempts it saw.
func (ts *smtpServer) received() (got []smtpReceived, mails int, authTries []string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]smtpReceived(nil), ts.got...), ts.mails, append([]string(nil), ts.authTries...)
}

// only returns the one message the server took, failing the test otherwise.
func (ts *smtpServer) only(t *testing.T) smtpReceived {
	t.Helper()
	got, _, _ := ts.received()
	if len(got) != 1 {
		t.Fatalf("server received %d messages, want 1", len(got))
	}
	return got[0]
}

// client returns a provider for ts that trusts its certificate.
func (ts *smtpServer) client() *provider.SMTP {
	return &provider.SMTP{
		Addr:      ts.addr,
		Username:  smtpUser,
		Password:  smtpPassword,
		TLSConfig: &tls.Config{RootCAs: ts.roots},
		Timeout:   5 * time.Second,
	}
}

type smtpCountingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l smtpCountingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

type smtpSession struct {
	srv  *smtpServer
	tls  bool
	user string
	from string
	to   []string
}

func (s *smtpSession) AuthMechanisms() []string {
	if !s.srv.opts.auth {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *smtpSession) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		s.srv.mu.Lock()
		s.srv.authTries = append(s.srv.authTries, username)
		s.srv.mu.Unlock()
		if username != smtpUser || password != smtpPassword {
			return gosmtp.ErrAuthFailed // 535 5.7.8
		}
		s.user = username
		return nil
	}), nil
}

func (s *smtpSession) Mail(from string, _ *gosmtp.MailOptions) error {
	s.srv.mu.Lock()
	s.srv.mails++
	s.srv.mu.Unlock()
	if s.srv.opts.auth && s.user == "" {
		return gosmtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *smtpSession) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	if s.srv.opts.rcptErr != nil {
		return s.srv.opts.rcptErr
	}
	s.to = append(s.to, to)
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if s.srv.opts.dataErr != nil {
		return s.srv.opts.dataErr
	}
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	s.srv.got = append(s.srv.got, smtpReceived{TLS: s.tls, User: s.user, From: s.from, To: s.to, Data: data})
	return nil
}

func (s *smtpSession) Reset()        { s.from, s.to = "", nil }
func (s *smtpSession) Logout() error { return nil }

// smtpTestCertificate returns a self-signed certificate for 127.0.0.1 and
// localhost, and a pool that trusts it.
func smtpTestCertificate(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sluice test SMTP"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("create certificate: %v", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse certificate: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, roots
}

// smtpStallingServer listens on 127.0.0.1 and accepts connections but never
// answers: no greeting, nothing.
func smtpStallingServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.1: %v", err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// smtpClosedAddr returns a 127.0.0.1 address nothing listens on.
func smtpClosedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.1: %v", err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func smtpTestEmail(id string) provider.Message[producer.Email] {
	return provider.Message[producer.Email]{
		ID:     id,
		Tenant: "acme",
		Payload: producer.Email{
			To:      "ada@example.com",
			From:    "team@example.com",
			Subject: "Welcome",
			Body:    "Hello Ada",
		},
	}
}

// smtpParseMail parses a received message and checks what every message must
// be: 7-bit ASCII with lines within RFC 5322's 998-byte limit.
func smtpParseMail(t *testing.T, data []byte) *mail.Message {
	t.Helper()
	for i, line := range bytes.Split(data, []byte("\r\n")) {
		if len(line) > 998 {
			t.Errorf("line %d is %d bytes, more than 998", i+1, len(line))
		}
		for _, c := range line {
			if c >= 0x80 || c == '\r' || c == '\n' {
				t.Fatalf("line %d has byte %#x: not 7-bit text with CRLF line ends: %q", i+1, c, line)
			}
		}
	}
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("parse received message: %v\n%s", err, data)
	}
	return msg
}

// smtpDecodedSubject returns the message's Subject, RFC 2047 words decoded.
func smtpDecodedSubject(t *testing.T, msg *mail.Message) string {
	t.Helper()
	s, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		t.Fatalf("decode Subject %q: %v", msg.Header.Get("Subject"), err)
	}
	return s
}

func TestSMTPDelivers(t *testing.T) {
	t.Parallel()
	ts := startSMTPServer(t, smtpServerOptions{tls: true, auth: true})
	m := smtpTestEmail("task-1")
	m.Payload.Body = "Hello Ada,\n\n" +
		"Your code is 1234 = one two three four.\n" +
		".a line that starts with a dot\n" +
		"From the start of a line\n" +
		strings.Repeat("a long line ", 20) + "\n" +
		"Grüße aus Köln, 東京 🚀\n"
	before := time.Now()
	if err := ts.client().SendEmail(context.Background(), m); err != nil {
		t.Fatalf("SendEmail: %v", err)
	}

	got := ts.only(t)
	if !got.TLS {
		t.Error("the session did not run over TLS; want STARTTLS")
	}
	if got, want := got.User, smtpUser; got != want {
		t.Errorf("logged in as %q, want %q", got, want)
	}
	if got, want := got.From, "team@example.com"; got != want {
		t.Errorf("MAIL FROM %q, want %q", got, want)
	}
	if diff := cmp.Diff([]string{"ada@example.com"}, got.To); diff != "" {
		t.Errorf("RCPT TO (-want +got):\n%s", diff)
	}

	msg := smtpParseMail(t, got.Data)
	headers := map[string]string{}
	for name := range msg.Header {
		if name != "Date" {
			headers[name] = msg.Header.Get(name)
		}
	}
	want := map[string]string{
		"From":                      "<team@example.com>",
		"To":                        "<ada@example.com>",
		"Subject":                   "Welcome",
		"Message-Id":                "<task-1@sluice>",
		"Idempotency-Key":           "task-1",
		"X-Sluice-Tenant":           "acme",
		"Mime-Version":              "1.0",
		"Content-Type":              "text/plain; charset=utf-8",
		"Content-Transfer-Encoding": "quoted-printable",
	}
	if diff := cmp.Diff(want, headers); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	date, err := msg.Header.Date()
	if err != nil {
		t.Errorf("Date: %v", err)
	} else if date.Before(before.Truncate(time.Second)) || date.After(time.Now()) {
		t.Errorf("Date %v, want between %v and now", date, before)
	}

	body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if err != nil {
		t.Fatalf("decode quoted-printable body: %v", err)
	}
	// Lines end in CRLF on the wire, as SMTP wants.
	if diff := cmp.Diff(strings.ReplaceAll(m.Payload.Body, "\n", "\r\n"), string(body)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func TestSMTPSubject(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		subject string
	}{
		{"ascii", "Your code: 1234 (valid 10 min) = ok?"},
		{"latin", "Grüße aus Köln"},
		{"cjk and emoji", "東京 🚀 launch"},
		{"spaces kept", "  two  spaces  é "},
		{"longest latin", strings.Repeat("ü", producer.MaxSubject)},
		{"longest emoji", strings.Repeat("🚀", producer.MaxSubject)},
		{"looks encoded", "=?utf-8?q?caf=C3=A9?= in Köln"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := startSMTPServer(t, smtpServerOptions{tls: true, auth: true})
			m := smtpTestEmail("subject")
			m.Payload.Subject = tc.subject
			if err := ts.client().SendEmail(context.Background(), m); err != nil {
				t.Fatalf("SendEmail: %v", err)
			}
			msg := smtpParseMail(t, ts.only(t).Data)
			if got, want := smtpDecodedSubject(t, msg), tc.subject; got != want {
				t.Errorf("Subject decodes to %q, want %q", got, want)
			}
		})
	}
}

func TestSMTPSender(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		payloadFrom  string
		defaultFrom  string
		wantEnvelope string
		wantHeader   mail.Address
	}{
		{
			name:         "payload",
			payloadFrom:  "team@example.com",
			wantEnvelope: "team@example.com",
			wantHeader:   mail.Address{Address: "team@example.com"},
		},
		{
			name:         "default with a display name",
			defaultFrom:  "Acme Alerts <noreply@acme.example>",
			wantEnvelope: "noreply@acme.example",
			wantHeader:   mail.Address{Name: "Acme Alerts", Address: "noreply@acme.example"},
		},
		{
			name:         "non-ASCII display name",
			defaultFrom:  "Zoë's Café <zoe@cafe.example>",
			wantEnvelope: "zoe@cafe.example",
			wantHeader:   mail.Address{Name: "Zoë's Café", Address: "zoe@cafe.example"},
		},
		{
			name:         "payload wins over default",
			payloadFrom:  "team@example.com",
			defaultFrom:  "noreply@acme.example",
			wantEnvelope: "team@example.com",
			wantHeader:   mail.Address{Address: "team@example.com"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := startSMTPServer(t, smtpServerOptions{tls: true, auth: true})
			p := ts.client()
			p.From = tc.defaultFrom
			m := smtpTestEmail("sender")
			m.Payload.From = tc.payloadFrom
			if err := p.SendEmail(context.Background(), m); err != nil {
				t.Fatalf("SendEmail: %v", err)
			}
			got := ts.only(t)
			if got, want := got.From, tc.wantEnvelope; got != want {
				t.Errorf("MAIL FROM %q, want %q", got, want)
			}
			from, err := smtpParseMail(t, got.Data).Header.AddressList("From")
			if err != nil {
				t.Fatalf("From header: %v", err)
			}
			if diff := cmp.Diff([]*mail.Address{&tc.wantHeader}, from); diff != "" {
				t.Errorf("From header (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSMTPMessageID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		id            string
		wantMessageID string
		wantKey       string
	}{
		{"uuid", "0b9f1c2e-7d4a-4f6e-9a51-2c8d3e4f5a6b", "<0b9f1c2e-7d4a-4f6e-9a51-2c8d3e4f5a6b@sluice>", "0b9f1c2e-7d4a-4f6e-9a51-2c8d3e4f5a6b"},
		{"caller's id", "otp-991", "<otp-991@sluice>", "otp-991"},
		{"dots, spaces, brackets, at", "order 7.<retry>@x", "<order%207%2E%3Cretry%3E%40x@sluice>", "order%207%2E%3Cretry%3E%40x"},
		{"percent", "50%", "<50%25@sluice>", "50%25"},
		{"line break", "x\r\nBcc: eve@example.com", "<x%0D%0ABcc%3A%20eve%40example%2Ecom@sluice>", "x%0D%0ABcc%3A%20eve%40example%2Ecom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := startSMTPServer(t, smtpServerOptions{tls: true, auth: true})
			p := ts.client()
			// Twice, as when a worker dies after the server took the
			// message: both copies must carry the same Message-ID.
			for range 2 {
				if err := p.SendEmail(context.Background(), smtpTestEmail(tc.id)); err != nil {
					t.Fatalf("SendEmail: %v", err)
				}
			}
			got, _, _ := ts.received()
			if len(got) != 2 {
				t.Fatalf("server received %d messages, want 2", len(got))
			}
			for i, r := range got {
				msg := smtpParseMail(t, r.Data)
				if got, want := msg.Header.Get("Message-ID"), tc.wantMessageID; got != want {
					t.Errorf("copy %d: Message-ID %q, want %q", i+1, got, want)
				}
				if got, want := msg.Header.Get("Idempotency-Key"), tc.wantKey; got != want {
					t.Errorf("copy %d: Idempotency-Key %q, want %q", i+1, got, want)
				}
				if got := msg.Header.Get("Bcc"); got != "" {
					t.Errorf("copy %d: the task ID injected a Bcc header %q", i+1, got)
				}
			}
		})
	}
}

// smtpErrorCase is a failing send and what its error must say.
type smtpErrorCase struct {
	name          string
	opts          smtpServerOptions
	down          bool   // nothing listens
	password      string // instead of smtpPassword
	wantPermanent bool
	wantCode      int      // the server's reply code, 0 for none
	wantText      []string // in the error
	wantAuthTries int
}

// smtpErrorCases are the failures of TestSMTPErrors: replies that ask to
// retry or refuse for good, no server, and a server without STARTTLS.
func smtpErrorCases() []smtpErrorCase {
	return []smtpErrorCase{
		{
			name:          "wrong password",
			opts:          smtpServerOptions{tls: true, auth: true},
			password:      "wrong",
			wantPermanent: true,
			wantCode:      535,
			wantText:      []string{"AUTH PLAIN", "535", "Authentication failed"},
			wantAuthTries: 1,
		},
		{
			name:          "451 on RCPT",
			opts:          smtpServerOptions{tls: true, auth: true, rcptErr: &gosmtp.SMTPError{Code: 451, EnhancedCode: gosmtp.EnhancedCode{4, 3, 0}, Message: "greylisted, try later"}},
			wantCode:      451,
			wantText:      []string{"RCPT TO:<ada@example.com>", "451", "greylisted, try later"},
			wantAuthTries: 1,
		},
		{
			name:          "452 on RCPT",
			opts:          smtpServerOptions{tls: true, auth: true, rcptErr: &gosmtp.SMTPError{Code: 452, EnhancedCode: gosmtp.EnhancedCode{4, 2, 2}, Message: "mailbox full"}},
			wantCode:      452,
			wantText:      []string{"452", "mailbox full"},
			wantAuthTries: 1,
		},
		{
			name:          "451 after DATA",
			opts:          smtpServerOptions{tls: true, auth: true, dataErr: &gosmtp.SMTPError{Code: 451, EnhancedCode: gosmtp.EnhancedCode{4, 3, 0}, Message: "local error in processing"}},
			wantCode:      451,
			wantText:      []string{"end of DATA", "451", "local error in processing"},
			wantAuthTries: 1,
		},
		{
			name:          "550 on RCPT",
			opts:          smtpServerOptions{tls: true, auth: true, rcptErr: &gosmtp.SMTPError{Code: 550, EnhancedCode: gosmtp.EnhancedCode{5, 1, 1}, Message: "no such user"}},
			wantPermanent: true,
			wantCode:      550,
			wantText:      []string{"RCPT TO:<ada@example.com>", "550", "no such user"},
			wantAuthTries: 1,
		},
		{
			name:          "554 after DATA",
			opts:          smtpServerOptions{tls: true, auth: true, dataErr: &gosmtp.SMTPError{Code: 554, EnhancedCode: gosmtp.EnhancedCode{5, 7, 1}, Message: "message refused as spam"}},
			wantPermanent: true,
			wantCode:      554,
			wantText:      []string{"end of DATA", "554", "message refused as spam"},
			wantAuthTries: 1,
		},
		{
			name:     "server down",
			down:     true,
			wantText: []string{"dial", "refused"},
		},
		{
			name:     "STARTTLS required, not offered",
			opts:     smtpServerOptions{tls: false, auth: true},
			wantText: []string{"STARTTLS", "nothing sent"},
			// The server would take the password in clear: the client
			// must not offer it.
			wantAuthTries: 0,
		},
	}
}

func TestSMTPErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range smtpErrorCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := startSMTPServer(t, tc.opts)
			p := ts.client()
			if tc.down {
				p.Addr = smtpClosedAddr(t)
			}
			if tc.password != "" {
				p.Password = tc.password
			}
			err := p.SendEmail(context.Background(), smtpTestEmail("fails"))
			if err == nil {
				t.Fatal("SendEmail succeeded, want an error")
			}
			if got, want := errors.Is(err, asynq.SkipRetry), tc.wantPermanent; got != want {
				t.Errorf("permanent (asynq.SkipRetry) = %v, want %v: %v", got, want, err)
			}
			if !strings.HasPrefix(err.Error(), "smtp: ") && !strings.Contains(err.Error(), ": smtp: ") {
				t.Errorf("error %q does not say smtp", err)
			}
			for _, s := range tc.wantText {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			var reply *textproto.Error
			switch {
			case tc.wantCode == 0 && errors.As(err, &reply):
				t.Errorf("error has reply %d, want none", reply.Code)
			case tc.wantCode != 0 && !errors.As(err, &reply):
				t.Errorf("error has no *textproto.Error, want reply %d", tc.wantCode)
			case tc.wantCode != 0 && reply.Code != tc.wantCode:
				t.Errorf("reply code %d, want %d", reply.Code, tc.wantCode)
			}
			got, _, authTries := ts.received()
			if len(got) != 0 {
				t.Errorf("server received %d messages, want none", len(got))
			}
			if got, want := len(authTries), tc.wantAuthTries; got != want {
				t.Errorf("%d AUTH attempts, want %d", got, want)
			}
		})
	}
}

func TestSMTPRefusesUnsafeMessages(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		edit      func(*provider.SMTP, *provider.Message[producer.Email])
		wantField string // in the error
	}{
		{"CRLF in subject", func(_ *provider.SMTP, m *provider.Message[producer.Email]) {
			m.Payload.Subject = "Hi\r\nBcc: eve@example.com"
		}, "subject"},
		{"LF in subject", func(_ *provider.SMTP, m *provider.Message[producer.Email]) {
			m.Payload.Subject = "Hi\nBcc: eve@example.com"
		}, "subject"},
		{"CRLF in to", func(_ *provider.SMTP, m *provider.Message[producer.Email]) {
			m.Payload.To = "ada@example.com\r\nBcc: eve@example.com"
		}, "to"},
		{"CR in from", func(_ *provider.SMTP, m *provider.Message[producer.Email]) {
			m.Payload.From = "team@example.com\rBcc: eve@example.com"
		}, "from"},
		{"CRLF in default sender", func(p *provider.SMTP, m *provider.Message[producer.Email]) {
			m.Payload.From = ""
			p.From = "Acme <noreply@acme.example>\r\nBcc: eve@example.com"
		}, "default sender"},
		{"CRLF in tenant", func(_ *provider.SMTP, m *provider.Message[producer.Email]) {
			m.Tenant = "acme\r\nX-Evil: 1"
		}, "tenant"},
		{"no sender", func(_ *provider.SMTP, m *provider.Message[producer.Email]) {
			m.Payload.From = ""
		}, "no sender"},
		{"no task ID", func(_ *provider.SMTP, m *provider.Message[producer.Email]) {
			m.ID = ""
		}, "task ID"},
		{"invalid UTF-8 body", func(_ *provider.SMTP, m *provider.Message[producer.Email]) {
			m.Payload.Body = "caf\xe9"
		}, "body"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := startSMTPServer(t, smtpServerOptions{tls: true, auth: true})
			p := ts.client()
			m := smtpTestEmail("unsafe")
			tc.edit(p, &m)
			err := p.SendEmail(context.Background(), m)
			if err == nil {
				t.Fatal("SendEmail succeeded, want an error")
			}
			if !errors.Is(err, asynq.SkipRetry) {
				t.Errorf("error is not permanent (asynq.SkipRetry): %v", err)
			}
			if !strings.Contains(err.Error(), tc.wantField) {
				t.Errorf("error %q does not name %q", err, tc.wantField)
			}
			if got := ts.accepted.Load(); got != 0 {
				t.Errorf("the server saw %d connections, want none", got)
			}
		})
	}
}

func TestSMTPContext(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		timeout time.Duration                                // the provider's Timeout
		ctx     func() (context.Context, context.CancelFunc) // the call's
		wantIs  error
	}{
		{
			name:    "cancelled while waiting for the greeting",
			timeout: time.Minute,
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(100*time.Millisecond, cancel)
				return ctx, cancel
			},
			wantIs: context.Canceled,
		},
		{
			name:    "cancelled before the call",
			timeout: time.Minute,
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			},
			wantIs: context.Canceled,
		},
		{
			name:    "ctx deadline",
			timeout: time.Minute,
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 200*time.Millisecond)
			},
			wantIs: context.DeadlineExceeded,
		},
		{
			name:    "provider timeout",
			timeout: 200 * time.Millisecond,
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithCancel(context.Background())
			},
			wantIs: os.ErrDeadlineExceeded,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &provider.SMTP{Addr: smtpStallingServer(t), Timeout: tc.timeout, StartTLS: provider.StartTLSOff}
			ctx, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			err := p.SendEmail(ctx, smtpTestEmail("stalled"))
			if elapsed := time.Since(start); elapsed > 3*time.Second {
				t.Errorf("SendEmail took %v, want it to return promptly", elapsed)
			}
			if err == nil {
				t.Fatal("SendEmail succeeded, want an error")
			}
			if !errors.Is(err, tc.wantIs) {
				t.Errorf("error %q does not match %v", err, tc.wantIs)
			}
			if errors.Is(err, asynq.SkipRetry) {
				t.Errorf("error is permanent (asynq.SkipRetry), want retried: %v", err)
			}
		})
	}
}

func TestSMTPStartTLSModes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		mode     provider.StartTLSMode
		opts     smtpServerOptions
		login    bool
		wantTLS  bool
		wantUser string
	}{
		{"default is require", "", smtpServerOptions{tls: true, auth: true}, true, true, smtpUser},
		{"require", provider.StartTLSRequire, smtpServerOptions{tls: true, auth: true}, true, true, smtpUser},
		{"opportunistic, offered", provider.StartTLSOpportunistic, smtpServerOptions{tls: true, auth: true}, true, true, smtpUser},
		{"opportunistic, not offered", provider.StartTLSOpportunistic, smtpServerOptions{}, false, false, ""},
		{"off, offered", provider.StartTLSOff, smtpServerOptions{tls: true}, false, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := startSMTPServer(t, tc.opts)
			p := ts.client()
			p.StartTLS = tc.mode
			if !tc.login {
				p.Username, p.Password = "", ""
			}
			if err := p.SendEmail(context.Background(), smtpTestEmail("modes")); err != nil {
				t.Fatalf("SendEmail: %v", err)
			}
			got := ts.only(t)
			if got, want := got.TLS, tc.wantTLS; got != want {
				t.Errorf("session over TLS = %v, want %v", got, want)
			}
			if got, want := got.User, tc.wantUser; got != want {
				t.Errorf("logged in as %q, want %q", got, want)
			}
		})
	}
}

func TestSMTPUntrustedCertificate(t *testing.T) {
	t.Parallel()
	ts := startSMTPServer(t, smtpServerOptions{tls: true, auth: true})
	p := ts.client()
	p.TLSConfig = nil // the system's roots do not know the test certificate
	err := p.SendEmail(context.Background(), smtpTestEmail("untrusted"))
	if err == nil {
		t.Fatal("SendEmail succeeded with an unknown certificate, want an error")
	}
	if !strings.Contains(err.Error(), "STARTTLS") {
		t.Errorf("error %q does not say STARTTLS", err)
	}
	if errors.Is(err, asynq.SkipRetry) {
		t.Errorf("error is permanent (asynq.SkipRetry), want retried: %v", err)
	}
	if _, _, authTries := ts.received(); len(authTries) != 0 {
		t.Errorf("%d AUTH attempts after a failed handshake, want none", len(authTries))
	}
}

func TestSMTPValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		smtp    provider.SMTP
		wantErr string // "" for valid
	}{
		{"minimal", provider.SMTP{Addr: "smtp.example.com:587"}, ""},
		{"everything", provider.SMTP{Addr: "smtp.example.com:587", From: "Acme <noreply@acme.example>", Username: "u", Password: "p", StartTLS: provider.StartTLSOpportunistic, Timeout: time.Second, HelloName: "worker1.example.com"}, ""},
		{"login in clear to loopback", provider.SMTP{Addr: "127.0.0.1:25", Username: "u", Password: "p", StartTLS: provider.StartTLSOff}, ""},
		{"no address", provider.SMTP{}, "no server address"},
		{"no port", provider.SMTP{Addr: "smtp.example.com"}, "want host:port"},
		{"no host", provider.SMTP{Addr: ":587"}, "want host:port"},
		{"unknown mode", provider.SMTP{Addr: "smtp.example.com:587", StartTLS: "tls"}, `"tls": use require, opportunistic or off`},
		{"bad default sender", provider.SMTP{Addr: "smtp.example.com:587", From: "not an address"}, "default sender"},
		{"password without user", provider.SMTP{Addr: "smtp.example.com:587", Password: "p"}, "password without a username"},
		{"login in clear", provider.SMTP{Addr: "smtp.example.com:587", Username: "u", Password: "p", StartTLS: provider.StartTLSOff}, "in clear"},
		{"negative timeout", provider.SMTP{Addr: "smtp.example.com:587", Timeout: -time.Second}, "negative"},
		{"EHLO name with a line break", provider.SMTP{Addr: "smtp.example.com:587", HelloName: "a\r\nb"}, "EHLO name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.smtp.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate: %v, want an error containing %q", err, tc.wantErr)
			}
			// SendEmail archives at once, and dials nothing.
			err = tc.smtp.SendEmail(context.Background(), smtpTestEmail("invalid"))
			if !errors.Is(err, asynq.SkipRetry) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("SendEmail: %v, want a permanent error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestStartTLSModeText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		text    string
		want    provider.StartTLSMode
		wantErr bool
	}{
		{"require", provider.StartTLSRequire, false},
		{"opportunistic", provider.StartTLSOpportunistic, false},
		{"off", provider.StartTLSOff, false},
		{"", "", false},
		{"REQUIRE", "", true},
		{"tls", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			t.Parallel()
			var got provider.StartTLSMode
			err := got.UnmarshalText([]byte(tc.text))
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("UnmarshalText(%q) error %v, want error %v", tc.text, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("UnmarshalText(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
	if got, want := provider.StartTLSMode("").String(), "require"; got != want {
		t.Errorf("the empty mode's text is %q, want %q", got, want)
	}
}
