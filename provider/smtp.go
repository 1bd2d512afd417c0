package provider

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"strings"
	"time"

	"github.com/sluicehq/sluice/producer"
)

// SMTP sends email through an SMTP server: a provider's submission port
// (587, STARTTLS) or a relay. It opens one connection per message: greeting,
// EHLO, STARTTLS, AUTH PLAIN, MAIL, RCPT, DATA, QUIT.
//
// Errors follow the conventions of EmailProvider:
//
//   - a 4xx reply (421, 450, 451, 452, ...), a network error, a timeout, a
//     cancelled ctx, a server that does not offer the STARTTLS required or
//     whose certificate does not verify: an ordinary error, retried with
//     backoff (the last two can be an attacker on the path, who may leave);
//   - a 5xx reply (535 authentication failed, 550 no such mailbox, 553,
//     554, ...): permanent (asynq.SkipRetry), archived with the server's
//     reply;
//   - a message that cannot be written safely (a CR or LF in a header
//     field, no sender) or an invalid SMTP value: permanent, and nothing is
//     sent.
//
// Errors say "smtp: ", the server, the step and, for a reply, its code and
// text (a *textproto.Error that errors.As finds), for example
//
//	smtp: smtp.example.com:587: RCPT TO:<ada@example.com>: 550 "5.1.1 no such user"
//
// The message carries "Message-ID: <task id@sluice>" and "Idempotency-Key:
// <task id>", the ID with any byte outside RFC 5322 atext percent-encoded
// (UUIDs and IDs such as "otp-991" are unchanged). When the connection fails after the message was written but
// before the server's reply, the task is retried and the recipient may get
// the message twice: both copies have the same Message-ID, so a duplicate
// can be recognised.
//
// An SMTP is safe for concurrent use as long as its fields are not changed.
type SMTP struct {
	// Addr is the server, "host:port", for example "smtp.example.com:587".
	// Required.
	Addr string

	// From is the sender of messages whose payload has no From: a bare
	// address ("noreply@example.com") or one with a display name ("Acme
	// <noreply@example.com>"). Empty means none: a message without a From
	// of its own is then archived.
	From string

	// Username, when not empty, logs in with AUTH PLAIN as Username with
	// Password after STARTTLS. net/smtp sends credentials only over TLS or
	// to localhost, 127.0.0.1 or ::1; Validate rejects a Username with
	// StartTLSOff for any other host.
	Username string

	// Password is Username's password; it must be empty without Username.
	Password string

	// StartTLS says when the connection is upgraded with STARTTLS; empty
	// means StartTLSRequire.
	StartTLS StartTLSMode

	// TLSConfig configures STARTTLS; nil means the system's roots. When its
	// ServerName is empty the host of Addr is used. It is cloned, never
	// modified.
	TLSConfig *tls.Config

	// Timeout bounds each message, from dialing to the server's reply to
	// the message; zero means DefaultSMTPTimeout. A cancelled ctx, or one
	// whose deadline passes, ends the exchange at once.
	Timeout time.Duration

	// HelloName is the name sent with EHLO; empty means "localhost", as
	// net/smtp does. Some servers want this host's fully qualified name.
	HelloName string
}

var _ EmailProvider = (*SMTP)(nil)

// DefaultSMTPTimeout is the SMTP provider's Timeout when none is set (30 s).
const DefaultSMTPTimeout = 30 * time.Second

// StartTLSMode says when an SMTP connection is upgraded to TLS with
// STARTTLS. Its text forms are "require", "opportunistic" and "off", so it
// can be a flag (flag.TextVar) or a configuration field.
type StartTLSMode string

// STARTTLS modes.
const (
	// StartTLSRequire upgrades every connection and sends nothing, not
	// even credentials, to a server that does not offer STARTTLS. The
	// default: a server or a network that drops STARTTLS must not turn
	// the password and the messages into clear text.
	StartTLSRequire StartTLSMode = "require"

	// StartTLSOpportunistic upgrades when the server offers STARTTLS and
	// sends in clear otherwise: only for relays whose network is trusted.
	// Credentials still go only over TLS or to loopback (net/smtp).
	StartTLSOpportunistic StartTLSMode = "opportunistic"

	// StartTLSOff never upgrades, for a local relay without TLS.
	StartTLSOff StartTLSMode = "off"
)

// String returns the mode's text; the empty mode is "require".
func (m StartTLSMode) String() string {
	if m == "" {
		return string(StartTLSRequire)
	}
	return string(m)
}

// MarshalText returns the mode's text, as String.
func (m StartTLSMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText sets m from "require", "opportunistic" or "off".
func (m *StartTLSMode) UnmarshalText(text []byte) error {
	mode := StartTLSMode(text)
	if err := mode.check(); err != nil {
		return err
	}
	*m = mode
	return nil
}

func (m StartTLSMode) check() error {
	switch m {
	case "", StartTLSRequire, StartTLSOpportunistic, StartTLSOff:
		return nil
	}
	return fmt.Errorf("smtp: STARTTLS mode %q: use require, opportunistic or off", string(m))
}

// Validate reports whether s is usable: Addr is host:port, StartTLS a known
// mode, From (when set) an address, Password only with Username, and
// Username not with StartTLSOff to a host other than loopback. SendEmail
// checks the same; call Validate to find a mistake at startup rather than
// at the first message.
func (s *SMTP) Validate() error {
	if s.Addr == "" {
		return errors.New("smtp: no server address (host:port)")
	}
	host, port, err := net.SplitHostPort(s.Addr)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("smtp: server address %q: want host:port, such as smtp.example.com:587", s.Addr)
	}
	if err := s.StartTLS.check(); err != nil {
		return err
	}
	if s.From != "" {
		if _, err := parseAddress("default sender", s.From); err != nil {
			return err
		}
	}
	switch {
	case s.Password != "" && s.Username == "":
		return errors.New("smtp: a password without a username")
	case s.Username != "" && s.StartTLS == StartTLSOff && !isLocalhost(host):
		return fmt.Errorf("smtp: STARTTLS off with a username: the password would cross the network to %s in clear; use require", host)
	case s.Timeout < 0:
		return fmt.Errorf("smtp: timeout %v is negative", s.Timeout)
	case strings.ContainsAny(s.HelloName, "\r\n "):
		return fmt.Errorf("smtp: EHLO name %q has a space or a line break", s.HelloName)
	}
	return nil
}

// isLocalhost is net/smtp's test of a host it will send credentials to in
// clear.
func isLocalhost(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// SendEmail sends m to m.Payload.To through the server at s.Addr.
func (s *SMTP) SendEmail(ctx context.Context, m Message[producer.Email]) error {
	if err := s.Validate(); err != nil {
		return Permanent(err)
	}
	env, err := s.compose(m, time.Now())
	if err != nil {
		return Permanent(err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("smtp: %s: not sent: %w", s.Addr, err)
	}
	return s.send(ctx, env)
}

// envelope is a composed message: the SMTP envelope and the RFC 5322 text.
type envelope struct {
	from, to string
	data     []byte
}

// compose writes the message. It trusts nothing the producer checked: the
// payload is validated again, and no header value it writes holds a CR or
// an LF of the caller's.
func (s *SMTP) compose(m Message[producer.Email], now time.Time) (envelope, error) {
	if err := m.Payload.Validate(); err != nil {
		return envelope{}, fmt.Errorf("smtp: %w", err)
	}
	if m.ID == "" {
		return envelope{}, errors.New("smtp: the message has no task ID (its Message-ID and Idempotency-Key)")
	}
	if m.Tenant != "" {
		if err := producer.ValidateTenant(m.Tenant); err != nil {
			return envelope{}, fmt.Errorf("smtp: %w", err)
		}
	}
	fromText, fromField := m.Payload.From, "from"
	if fromText == "" {
		fromText, fromField = s.From, "default sender"
	}
	if fromText == "" {
		return envelope{}, errors.New("smtp: no sender: the payload has no from and no default sender is set")
	}
	from, err := parseAddress(fromField, fromText)
	if err != nil {
		return envelope{}, err
	}
	to, err := parseAddress("to", m.Payload.To)
	if err != nil {
		return envelope{}, err
	}
	id := escapeID(m.ID)

	var b bytes.Buffer
	header := func(name, value string) {
		b.WriteString(name + ": " + value + "\r\n")
	}
	header("Date", now.Format(time.RFC1123Z))
	header("From", from.String())
	header("To", to.String())
	header("Subject", encodeSubject(m.Payload.Subject))
	header("Message-ID", "<"+id+"@sluice>")
	header("Idempotency-Key", id)
	if m.Tenant != "" {
		header("X-Sluice-Tenant", m.Tenant)
	}
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	if _, err := qp.Write([]byte(m.Payload.Body)); err != nil {
		return envelope{}, fmt.Errorf("smtp: encode body: %w", err)
	}
	if err := qp.Close(); err != nil {
		return envelope{}, fmt.Errorf("smtp: encode body: %w", err)
	}
	return envelope{from: path(from), to: path(to), data: b.Bytes()}, nil
}

// parseAddress parses an address, with or without display name, refusing
// line breaks by name before net/mail sees them.
func parseAddress(field, s string) (*mail.Address, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, fmt.Errorf("smtp: %s %q contains a line break (CR or LF)", field, s)
	}
	a, err := mail.ParseAddress(s)
	if err != nil {
		return nil, fmt.Errorf("smtp: %s %q: %v", field, s, err)
	}
	return a, nil
}

// path returns a's address as an SMTP path without its brackets: the form
// mail.Address.String writes, with a local part quoted when it must be.
func path(a *mail.Address) string {
	return strings.TrimSuffix(strings.TrimPrefix((&mail.Address{Address: a.Address}).String(), "<"), ">")
}

// encodeSubject returns the Subject header's value: s itself when it is
// printable ASCII, else RFC 2047 encoded words, one per line (folded), so a
// 255-character subject in any script stays under the 998-byte line limit.
func encodeSubject(s string) string {
	enc := mime.QEncoding.Encode("utf-8", s)
	if enc == s {
		return s
	}
	// The encoder separates words with a space and encodes the subject's
	// own spaces, so every space here is between two encoded words.
	return strings.ReplaceAll(enc, " ", "\r\n ")
}

// escapeID returns the task ID in a form fit for a Message-ID's left part
// and a header value: each byte outside RFC 5322 atext, and '%' and '.',
// percent-encoded. IDs such as UUIDs or "otp-991" are unchanged, and the
// same ID always gives the same text.
func escapeID(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c != '%' && isAtext(c) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// isAtext reports whether c is an RFC 5322 atext character.
func isAtext(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-/=?^_`{|}~", c) >= 0
}

// send runs the SMTP session for env.
func (s *SMTP) send(ctx context.Context, env envelope) (err error) {
	host, _, _ := net.SplitHostPort(s.Addr)
	timeout := cmp.Or(s.Timeout, DefaultSMTPTimeout)
	dialer := net.Dialer{Timeout: timeout}
	conn, err := dialer.DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return s.fail(ctx, "dial", err)
	}
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		conn.Close()
		return s.fail(ctx, "set deadline", err)
	}
	// When ctx is cancelled or its deadline passes, any read or write in
	// progress ends (net/smtp takes no context): a deadline in the past
	// makes them fail at once.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return s.fail(ctx, "greeting", err)
	}
	defer func() {
		var reply *textproto.Error
		if errors.As(err, &reply) {
			_ = c.Quit() // the server is there and answering: say goodbye
		}
		c.Close()
	}()
	if err := c.Hello(cmp.Or(s.HelloName, "localhost")); err != nil {
		return s.fail(ctx, "EHLO", err)
	}
	if mode := s.StartTLS; mode != StartTLSOff {
		switch offered, _ := c.Extension("STARTTLS"); {
		case offered:
			if err := c.StartTLS(s.tlsConfig(host)); err != nil {
				return s.fail(ctx, "STARTTLS", err)
			}
		case mode == "" || mode == StartTLSRequire:
			// Retried, not archived: a misconfiguration, or someone on
			// the path removing STARTTLS; both can end.
			return fmt.Errorf("smtp: %s: the server does not offer STARTTLS, which is required; nothing sent", s.Addr)
		}
	}
	if s.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", s.Username, s.Password, host)); err != nil {
			return s.fail(ctx, "AUTH PLAIN", err)
		}
	}
	if err := c.Mail(env.from); err != nil {
		return s.fail(ctx, "MAIL FROM:<"+env.from+">", err)
	}
	if err := c.Rcpt(env.to); err != nil {
		return s.fail(ctx, "RCPT TO:<"+env.to+">", err)
	}
	w, err := c.Data()
	if err != nil {
		return s.fail(ctx, "DATA", err)
	}
	if _, err := w.Write(env.data); err != nil {
		return s.fail(ctx, "DATA", err)
	}
	if err := w.Close(); err != nil {
		return s.fail(ctx, "end of DATA", err)
	}
	// The server has taken the message; a failed QUIT changes nothing.
	_ = c.Quit() // the message is sent: a failed goodbye changes nothing
	return nil
}

// tlsConfig returns the STARTTLS configuration for host.
func (s *SMTP) tlsConfig(host string) *tls.Config {
	var cfg *tls.Config
	if s.TLSConfig != nil {
		cfg = s.TLSConfig.Clone()
	} else {
		cfg = &tls.Config{}
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	return cfg
}

// fail wraps err from step: permanent for a 5xx reply, an ordinary error
// (retried) for anything else, and ctx's error first when ctx is done,
// since that is then why the step failed.
func (s *SMTP) fail(ctx context.Context, step string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("smtp: %s: %s: %w: %w", s.Addr, step, ctxErr, err)
	}
	err = fmt.Errorf("smtp: %s: %s: %w", s.Addr, step, err)
	if reply := (*textproto.Error)(nil); errors.As(err, &reply) && reply.Code >= 500 && reply.Code <= 599 {
		return Permanent(err)
	}
	return err
}
