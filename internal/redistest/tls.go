package redistest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisproc"
)

// SluiceUser is the ACL user of the server that TLS starts.
const SluiceUser = "sluice"

// SluiceACL are the ACL rules of a Redis user that can run Sluice's
// workers and producers and nothing else, as for ACL SETUSER: the keys of
// the limiter under its default prefix "sluice:" and asynq's "asynq:", the
// Pub/Sub channels of asynq (task cancellation) and of the fair lines
// (their wake-ups), and the commands that
// asynq, the limiter's scripts and go-redis's connection setup send, found
// in their source and checked by the tests that run under this user, which
// fail when Redis logs a command the user was refused (see CheckACLLog).
// docs/WORKERS.md shows the same rules.
const SluiceACL = "resetkeys ~sluice:* ~asynq:* resetchannels &asynq:* &sluice:* -@all " +
	"+ping +hello +eval +evalsha +multi +exec +time +info +publish +subscribe +type " +
	"+get +set +setex +del +exists +expire +expireat +pexpire +pttl +incr " +
	"+hget +hmget +hgetall +hvals +hset +hdel +hexists +lpush +rpush +lpop +lindex +llen +lrange +lpos +lrem +rpoplpush +sadd +srem +smembers +sismember " +
	"+zadd +zrem +zcard +zcount +zlexcount +zscore +zrange +zrevrange +zrangebyscore +zremrangebyscore +zremrangebyrank"

// TLS is a redis-server of a test's own that listens only for TLS on
// loopback, with a certificate for 127.0.0.1 signed by a CA made for the
// test, and an ACL user with SluiceACL.
type TLS struct {
	// Addr is the server's host:port.
	Addr string
	// CAFile is the PEM file of the CA that signed the server's
	// certificate: a client that trusts it can connect.
	CAFile string
	// User and Password are those of the ACL user with SluiceACL.
	User, Password string
	// Admin is a client of the server's default user, who may do
	// anything, over TLS; closed when the test ends.
	Admin *redis.Client
}

// URL returns the rediss:// URL of the server's database 0 as user with
// password.
func (s *TLS) URL(user, password string) string {
	u := url.URL{Scheme: "rediss", User: url.UserPassword(user, password), Host: s.Addr, Path: "/0"}
	return u.String()
}

// StartTLS starts a TLS server of tb's own, stopped when tb ends. The
// binary is REDIS_SERVER, or redis-server on PATH. tb skips (fails when CI
// is "true") when redis-server was built without TLS.
func StartTLS(tb testing.TB) *TLS {
	tb.Helper()
	bin, err := serverBinary()
	if err != nil {
		unavailable(tb, "no redis-server for TLS tests: %v", err)
	}
	files, pool := writeCerts(tb, tb.TempDir())
	password := "pw-" + random()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The arguments of --user are the words of a user line of redis.conf.
	user := append([]string{"--user", SluiceUser, "reset", "on", ">" + password}, strings.Fields(SluiceACL)...)
	srv, err := redisproc.StartTLS(ctx, bin, files, user...)
	if err != nil {
		if strings.Contains(err.Error(), "tls-port") {
			unavailable(tb, "redis-server %s has no TLS: %v", bin, err)
		}
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1,
		TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	tb.Cleanup(func() { _ = admin.Close() })
	return &TLS{Addr: srv.Addr, CAFile: files.CA, User: SluiceUser, Password: password, Admin: admin}
}

// writeCerts writes to dir a CA's certificate and a certificate for the
// IP address 127.0.0.1 that it signs, with its key, valid for a day; it
// returns the files and a pool holding the CA.
func writeCerts(tb testing.TB, dir string) (redisproc.TLSFiles, *x509.CertPool) {
	tb.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "Sluice test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		tb.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	files := redisproc.TLSFiles{
		CA:   filepath.Join(dir, "ca.pem"),
		Cert: filepath.Join(dir, "server.pem"),
		Key:  filepath.Join(dir, "server-key.pem"),
	}
	for _, f := range []struct {
		path, kind string
		der        []byte
	}{{files.CA, "CERTIFICATE", caDER}, {files.Cert, "CERTIFICATE", der}, {files.Key, "PRIVATE KEY", keyDER}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return files, pool
}

// CheckACLLog fails tb, without stopping it, for each entry of the
// server's ACL LOG: a command, key or channel that a user was refused. A
// test that runs Sluice as the user with SluiceACL calls it at its end, so
// that a command missing from SluiceACL fails it even when Sluice retried
// its way past the refusal.
func (s *TLS) CheckACLLog(tb testing.TB) {
	tb.Helper()
	entries, err := s.Admin.ACLLog(context.Background(), 100).Result()
	if err != nil {
		tb.Fatalf("redistest: acl log: %v", err)
	}
	for _, e := range entries {
		tb.Errorf("Redis refused %s %s (%s) to user %s %d times", e.Reason, e.Object, e.Context, e.Username, e.Count)
	}
}
