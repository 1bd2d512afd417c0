package redisconn

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// TestConnectTLS connects over TLS to a Redis whose certificate a CA made
// for the test signed, trusted through RedisCAFileEnv, as the ACL user with
// redistest.SluiceACL: the limiter decides and asynq enqueues, a wrong
// password or an untrusted certificate fails in clear words, and the user
// can touch no key outside its patterns. Not parallel: it sets the
// environment.
func TestConnectTLS(t *testing.T) {
	srv := redistest.StartTLS(t)
	ctx := t.Context()
	url := srv.URL(srv.User, srv.Password)
	prefix := "sluice:" + redistest.Prefix(t)

	t.Run("untrusted", func(t *testing.T) {
		t.Setenv(RedisCAFileEnv, "")
		_, err := Connect(ctx, url)
		want := "Redis at " + RedactURL(url) + ": connecting: tls: failed to verify certificate: x509: certificate signed by unknown authority"
		if err == nil || err.Error() != want {
			t.Errorf("Connect without the CA = %v, want %q", err, want)
		}
	})

	// The server speaks only TLS: the URL's scheme is the mistake, whatever
	// the CAs.
	t.Run("plain URL", func(t *testing.T) {
		plain := strings.Replace(url, "rediss://", "redis://", 1)
		_, err := Connect(ctx, plain)
		want := "Redis at " + RedactURL(plain) + ": " + srv.Addr + " expects TLS (it completed a TLS handshake): use rediss://, not redis://"
		if err == nil || err.Error() != want {
			t.Errorf("Connect(%q) = %v, want %q", RedactURL(plain), err, want)
		}
		if strings.Contains(err.Error(), srv.Password) {
			t.Errorf("Connect(%q) = %q: the error shows the password", RedactURL(plain), err)
		}
	})

	t.Setenv(RedisCAFileEnv, srv.CAFile)

	t.Run("allow and enqueue", func(t *testing.T) { checkAllowAndEnqueue(ctx, t, srv, url, prefix) })

	t.Run("wrong password", func(t *testing.T) {
		const wrong = "not-the-password"
		_, err := Connect(ctx, srv.URL(srv.User, wrong))
		if err == nil {
			t.Fatal("Connect with a wrong password: no error")
		}
		if want := `: authenticating as "` + srv.User + `": the server replied "WRONGPASS `; !strings.Contains(err.Error(), want) {
			t.Errorf("Connect with a wrong password = %q, want it to say %s...", err, want)
		}
		if strings.Contains(err.Error(), wrong) {
			t.Errorf("Connect with a wrong password = %q: the error shows the password", err)
		}
		if want := "rediss://" + srv.User + ":xxxxx@"; !strings.Contains(err.Error(), want) {
			t.Errorf("Connect with a wrong password = %q, want it to name the URL as %s...", err, want)
		}
	})

	t.Run("least privilege", func(t *testing.T) { checkLeastPrivilege(ctx, t, srv, url, prefix) })
}

// checkAllowAndEnqueue connects to srv at url: the limiter decides, holds
// and resets under prefix, and asynq enqueues.
func checkAllowAndEnqueue(ctx context.Context, t *testing.T, srv *redistest.TLS, url, prefix string) {
	t.Helper()
	rdb, err := Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	lim := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	p := throttle.Policy{Limit: 1, Window: time.Minute}
	for i, want := range []bool{true, false} {
		d, err := lim.Allow(ctx, "tenant-a", p)
		if err != nil {
			t.Fatalf("allow %d: %v", i+1, err)
		}
		if d.Allowed != want {
			t.Errorf("allow %d of a limit of 1: allowed %v, want %v", i+1, d.Allowed, want)
		}
	}
	if _, err := lim.AllowInLine(ctx, "task-1", []throttle.Check{{Key: "tenant-b", Policy: p, Cost: 1}}); err != nil {
		t.Errorf("allow in line: %v", err)
	}
	if err := lim.Hold(ctx, "provider", time.Minute); err != nil {
		t.Errorf("hold: %v", err)
	}
	if d, err := lim.HeldFor(ctx, "provider"); err != nil || d <= 0 {
		t.Errorf("held for %v (%v) after a hold of a minute", d, err)
	}
	for _, key := range []string{"tenant-a", "tenant-b", "provider"} {
		if err := lim.Reset(ctx, key); err != nil {
			t.Errorf("reset %s: %v", key, err)
		}
	}
	queue := redistest.Queue(t, srv.Admin)
	info, err := asynq.NewClientFromRedisClient(rdb).EnqueueContext(ctx, asynq.NewTask("sms:send", []byte(`{}`)), asynq.Queue(queue))
	if err != nil {
		t.Fatalf("enqueue as %s: %v", srv.User, err)
	}
	if n, err := srv.Admin.LLen(ctx, "asynq:{"+queue+"}:pending").Result(); err != nil || n != 1 {
		t.Errorf("queue %s holds %d pending tasks (%v) after enqueuing %s, want 1", queue, n, err, info.ID)
	}
	srv.CheckACLLog(t)
}

// checkLeastPrivilege connects to srv at url: the user can touch no key
// outside its patterns, nor run admin commands, but reads its own under prefix.
func checkLeastPrivilege(ctx context.Context, t *testing.T, srv *redistest.TLS, url, prefix string) {
	t.Helper()
	rdb, err := Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	other := "other:" + redistest.Prefix(t)
	if err := srv.Admin.Set(ctx, other, "someone else's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Admin.Del(ctx, other).Err() })
	cases := []struct {
		name string
		cmd  func() error
	}{
		{"get a key of another application", func() error { return rdb.Get(ctx, other).Err() }},
		{"delete it", func() error { return rdb.Del(ctx, other).Err() }},
		{"a script on it", func() error { return rdb.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{other}).Err() }},
		{"flushall", func() error { return rdb.FlushAll(ctx).Err() }},
		{"config set", func() error { return rdb.ConfigSet(ctx, "maxmemory", "1").Err() }},
		{"keys", func() error { return rdb.Keys(ctx, "*").Err() }},
		{"acl setuser", func() error { return rdb.Do(ctx, "ACL", "SETUSER", "sluice", "+@all").Err() }},
	}
	for _, tc := range cases {
		err := tc.cmd()
		if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("%s as %s: %v, want NOPERM", tc.name, srv.User, err)
		}
	}
	if got, err := srv.Admin.Get(ctx, other).Result(); err != nil || got != "someone else's" {
		t.Errorf("the other application's key holds %q (%v), want it untouched", got, err)
	}
	if err := rdb.Get(ctx, prefix+"own").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("get a key under %s as %s: %v, want redis.Nil", prefix, srv.User, err)
	}
}

func TestRedisCAFileErrors(t *testing.T) {
	cases := []struct{ file, want string }{
		{"/no/such/ca.pem", RedisCAFileEnv + ": open /no/such/ca.pem: no such file or directory"},
		{"tls_test.go", RedisCAFileEnv + ": tls_test.go holds no PEM certificate"},
		{"/dev/zero", RedisCAFileEnv + ": /dev/zero is more than the limit of 1 MiB"},
	}
	for _, tc := range cases {
		t.Setenv(RedisCAFileEnv, tc.file)
		_, err := Client("rediss://127.0.0.1:1/0")
		if err == nil || err.Error() != tc.want {
			t.Errorf("RedisClient with %s=%s: %v, want %q", RedisCAFileEnv, tc.file, err, tc.want)
		}
		if errors.Is(err, cli.ErrUsage) { // a file that cannot be read: exit 1
			t.Errorf("RedisClient with %s=%s: %q matches ErrUsage", RedisCAFileEnv, tc.file, err)
		}
		// A URL without TLS does not read the file.
		rdb, err := Client("redis://127.0.0.1:1/0")
		if err != nil {
			t.Errorf("Client(redis://) with %s=%s: %v", RedisCAFileEnv, tc.file, err)
			continue
		}
		_ = rdb.Close()
	}
}

// TestDocsACL: the ACL user that docs/WORKERS.md tells users to create is
// the one the TLS tests run Sluice as.
func TestDocsACL(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/WORKERS.md")
	if err != nil {
		t.Fatal(err)
	}
	want := "ACL SETUSER " + redistest.SluiceUser + " reset on >PASSWORD " + redistest.SluiceACL + "\n"
	if !strings.Contains(string(doc), want) {
		t.Errorf("docs/WORKERS.md does not show the ACL user of the tests:\n%s", want)
	}
}
