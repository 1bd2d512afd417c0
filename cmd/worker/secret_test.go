package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/producer"
)

// The secrets of these tests: each must appear nowhere in what the worker
// writes.
const (
	smtpPassword = "smtp-s3cret-pw"
	webhookToken = "webhook-s3cret-token"
	urlUser      = "hook-s3cret-user"
	urlPassword  = "hook-s3cret-pw"
	urlAPIKey    = "hook-s3cret-key" // a query value of the webhook URL
)

// checkNoSecrets fails t if out shows any of the secrets.
func checkNoSecrets(t *testing.T, what, out string) {
	t.Helper()
	for _, s := range []string{smtpPassword, webhookToken, urlUser, urlPassword, urlAPIKey} {
		if strings.Contains(out, s) {
			t.Errorf("%s shows the secret %q:\n%s", what, s, out)
		}
	}
}

// writeSecret writes content to a file of its own and returns its path.
func writeSecret(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSecretErrors: a secret given twice, in an unreadable or empty file,
// or without its provider, stops the worker with one line that names the
// variables and shows no secret. --smtp-password is no flag.
func TestSecretErrors(t *testing.T) {
	t.Parallel()
	policies := filepath.Join("..", "..", "examples", "policies.yaml")
	empty := writeSecret(t, "\n")
	cases := []struct {
		name string
		env  []string
		args []string
		want string // stderr
	}{
		{"password flag", nil, []string{"--smtp-password", smtpPassword}, "worker: flag provided but not defined: -smtp-password\n"},
		{"password twice", []string{"SLUICE_SMTP_PASSWORD=" + smtpPassword, "SLUICE_SMTP_PASSWORD_FILE=" + empty}, nil,
			"worker: SLUICE_SMTP_PASSWORD and SLUICE_SMTP_PASSWORD_FILE are both set; give one\n"},
		{"token twice", []string{"SLUICE_SMS_WEBHOOK_TOKEN=" + webhookToken, "SLUICE_SMS_WEBHOOK_TOKEN_FILE=" + empty}, nil,
			"worker: SLUICE_SMS_WEBHOOK_TOKEN and SLUICE_SMS_WEBHOOK_TOKEN_FILE are both set; give one\n"},
		// The secret itself given by mistake as the file name.
		{"password file missing", []string{"SLUICE_SMTP_PASSWORD_FILE=" + smtpPassword}, nil,
			"worker: SLUICE_SMTP_PASSWORD_FILE: cannot read the file it names: no such file or directory\n"},
		{"token file empty", []string{"SLUICE_SMS_WEBHOOK_TOKEN_FILE=" + empty}, nil,
			"worker: SLUICE_SMS_WEBHOOK_TOKEN_FILE: the file it names is empty\n"},
		// Refused after maxSecretSize bytes, not read until memory runs out.
		{"token file without end", []string{"SLUICE_SMS_WEBHOOK_TOKEN_FILE=/dev/zero"}, nil,
			"worker: SLUICE_SMS_WEBHOOK_TOKEN_FILE: the file it names is more than the limit of 64 KiB\n"},
		{"password file too large", []string{"SLUICE_SMTP_PASSWORD_FILE=" + writeSecret(t, strings.Repeat("x", maxSecretSize+1))}, nil,
			"worker: SLUICE_SMTP_PASSWORD_FILE: the file it names is 65537 bytes, more than the limit of 64 KiB\n"},
		{"token file two newlines", []string{"SLUICE_SMS_WEBHOOK_TOKEN_FILE=" + writeSecret(t, webhookToken+"\n\n")}, nil,
			"worker: SLUICE_SMS_WEBHOOK_TOKEN_FILE: the file it names holds a control character (a second newline?) after its one trailing newline is removed\n"},
		{"password file CRLF twice", []string{"SLUICE_SMTP_PASSWORD_FILE=" + writeSecret(t, smtpPassword+"\r\n\r\n")}, nil,
			"worker: SLUICE_SMTP_PASSWORD_FILE: the file it names holds a control character (a second newline?) after its one trailing newline is removed\n"},
		{"token with tab", []string{"SLUICE_SMS_WEBHOOK_TOKEN=" + webhookToken + "\t"}, nil,
			"worker: SLUICE_SMS_WEBHOOK_TOKEN holds a control character\n"},
		{"password without SMTP", []string{"SLUICE_SMTP_PASSWORD=" + smtpPassword}, nil,
			"worker: --smtp-from, --smtp-user, --smtp-starttls and SLUICE_SMTP_PASSWORD need --smtp-addr (SLUICE_SMTP_ADDR)\n"},
		{"token without webhook", []string{"SLUICE_SMS_WEBHOOK_TOKEN_FILE=" + writeSecret(t, webhookToken)}, nil,
			"worker: SLUICE_SMS_WEBHOOK_TOKEN needs --sms-webhook (SLUICE_SMS_WEBHOOK)\n"},
		{"bad webhook URL", nil, []string{"--sms-webhook", urlUser + ":" + urlPassword + "@sms.example/send"},
			`worker: --sms-webhook: webhook: URL "xxxxx@sms.example/send": want http:// or https:// and a host` + "\n"},
		{"webhook URL not parsed", nil, []string{"--sms-webhook", "http://" + urlUser + ":" + urlPassword + "@sms.example/\x7f"},
			`worker: --sms-webhook: webhook: URL "http://xxxxx@sms.example/\x7f": net/url: invalid control character in URL` + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--redis", unreachable, "--policies", policies}, tc.args...)
			r := runWorkerEnv(t, tc.env, args...)
			checkError(t, r, 2, tc.want)
			checkNoSecrets(t, "stderr", r.stderr)
		})
	}
}

// smtpRejectingAuth is an SMTP server on loopback, without STARTTLS, that
// answers every AUTH with 535; it sends each AUTH PLAIN password it is
// given on passwords.
func smtpRejectingAuth(t *testing.T) (addr string, passwords <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 10)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
				r := bufio.NewReader(conn)
				_, _ = io.WriteString(conn, "220 test ESMTP\r\n")
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					verb, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
					switch strings.ToUpper(verb) {
					case "EHLO":
						_, _ = io.WriteString(conn, "250-test\r\n250 AUTH PLAIN\r\n")
					case "AUTH":
						// AUTH PLAIN base64("\x00user\x00password")
						_, initial, _ := strings.Cut(arg, " ")
						if b, err := base64.StdEncoding.DecodeString(initial); err == nil {
							if parts := strings.Split(string(b), "\x00"); len(parts) == 3 {
								got <- parts[2]
							}
						}
						_, _ = io.WriteString(conn, "535 5.7.8 authentication failed\r\n")
					case "QUIT":
						_, _ = io.WriteString(conn, "221 bye\r\n")
						return
					default:
						_, _ = io.WriteString(conn, "502 not here\r\n")
					}
				}
			})
		}
	})
	return ln.Addr().String(), got
}

// TestSecretsNeverLogged runs a worker at debug level whose providers fail
// with the secrets in play: an SMTP server that rejects the password (the
// email is archived) and a webhook that drops the connection, so that the
// error quotes the URL (the SMS is retried). The secrets reach the
// providers, and the worker's output shows none of them.
func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	queue := redistest.Queue(t, rdb)
	policies := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(policies, []byte("tasks: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	hookURL, authorizations := droppingWebhook(t)
	smtpAddr, passwords := smtpRejectingAuth(t)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := command(ctx, []string{
		"REDIS_URL=" + redistest.URL(t),
		"SLUICE_SMTP_PASSWORD_FILE=" + writeSecret(t, smtpPassword+"\n"),
		"SLUICE_SMS_WEBHOOK_TOKEN=" + webhookToken,
	}, "--policies", policies, "--queues", queue+"=1", "--prefix", redistest.Prefix(t), "--log-level", "debug",
		"--shutdown-timeout", "5s", "--sms-webhook", hookURL,
		"--smtp-addr", smtpAddr, "--smtp-starttls", "off", "--smtp-user", "ada", "--smtp-from", "team@example.com")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	pc := producer.NewClientFromRedisClient(rdb)
	if _, err := pc.EnqueueSMS(ctx, "acme", producer.SMS{To: "+15551234567", Body: "hi"}, asynq.Queue(queue)); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.EnqueueEmail(ctx, "acme", producer.Email{To: "ada@example.com", Subject: "Hi", Body: "hello"}, asynq.Queue(queue)); err != nil {
		t.Fatal(err)
	}

	// Read the log until it reports both failures, then stop the worker.
	var stderr bytes.Buffer
	smsFailed, emailArchived := readSendFailures(t, io.TeeReader(pipe, &stderr))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(&stderr, pipe)
	if err := cmd.Wait(); err != nil {
		t.Errorf("worker: %v", err)
	}
	if !smsFailed || !emailArchived {
		t.Fatalf("the log does not report both failures (SMS %t, email %t):\n%s", smsFailed, emailArchived, stderr.String())
	}

	if got, want := <-authorizations, "Bearer "+webhookToken; got != want {
		t.Errorf("the webhook got Authorization %q, want %q", got, want)
	}
	if got, want := <-passwords, smtpPassword; got != want {
		t.Errorf("the SMTP server got the password %q, want %q (the file's, without its newline)", got, want)
	}
	if want := `"sms":"webhook http://xxxxx@127.0.0.1:`; !strings.Contains(stderr.String(), want) {
		t.Errorf("the log does not name the webhook as %q:\n%s", want, stderr.String())
	}
	checkNoSecrets(t, "stdout", stdout.String())
	checkNoSecrets(t, "stderr", stderr.String())
}

// droppingWebhook is a webhook on loopback that drops every connection, so
// that the error quotes the URL; it returns its URL, with a user, password
// and API key, and sends each Authorization header it gets on the channel.
func droppingWebhook(t *testing.T) (hookURL string, authorizations <-chan string) {
	t.Helper()
	got := make(chan string, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close() // the client sees EOF: a network error, which quotes the URL
	}))
	t.Cleanup(hook.Close)
	return strings.Replace(hook.URL, "://", "://"+urlUser+":"+urlPassword+"@", 1) + "/send?api_key=" + urlAPIKey, got
}

// readSendFailures reads the worker's JSON log until it reports both the
// SMS failed and the email archived, and checks what each error quotes.
func readSendFailures(t *testing.T, log io.Reader) (smsFailed, emailArchived bool) {
	t.Helper()
	lines := bufio.NewScanner(log)
	for (!smsFailed || !emailArchived) && lines.Scan() {
		var rec struct{ Msg, Type, Err string }
		if json.Unmarshal(lines.Bytes(), &rec) != nil {
			continue
		}
		switch {
		case rec.Msg == "task failed; will retry" && rec.Type == producer.TypeSMS:
			smsFailed = true
			if !strings.Contains(rec.Err, "xxxxx@") {
				t.Errorf("the SMS error %q does not quote the URL redacted", rec.Err)
			}
		case rec.Msg == "task archived" && rec.Type == producer.TypeEmail:
			emailArchived = true
			if !strings.Contains(rec.Err, "AUTH PLAIN: 535") {
				t.Errorf("the email error %q is not the rejected AUTH", rec.Err)
			}
		}
	}
	return smsFailed, emailArchived
}
