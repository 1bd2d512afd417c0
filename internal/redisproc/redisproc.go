// Package redisproc starts redis-server processes on loopback: for the
// benchmark harness, and for the tests' own Redis, Cluster nodes and
// sentinels.
package redisproc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process on loopback, in a directory of its own,
// with nothing saved to disk. Close stops it.
type Server struct {
	// Addr is the server's host:port.
	Addr string

	cmd    *exec.Cmd
	dir    string
	tls    bool          // whether it listens only for TLS (StartTLS)
	exited chan struct{} // closed once the process has exited
}

// TLSFiles are the PEM files of a server that StartTLS starts.
type TLSFiles struct {
	Cert, Key string // the server's certificate and its private key
	CA        string // the CA that signed Cert; the check that the server answers trusts it
}

// Start starts the redis-server binary bin (a name on PATH or a path) on a
// free loopback port, with the extra arguments given (such as
// "--cluster-enabled", "yes"; relative paths are in the server's
// directory), and waits until it answers or ctx ends.
func Start(ctx context.Context, bin string, extra ...string) (*Server, error) {
	return start(ctx, bin, "", nil, extra)
}

// StartTLS starts bin as Start does, except that the server listens only
// for TLS, on the free loopback port, with the certificate and key of
// files (absolute paths), and asks clients for no certificate (--port 0
// --tls-port P --tls-auth-clients no). It fails when redis-server was built
// without TLS; the error then names the directive tls-port.
func StartTLS(ctx context.Context, bin string, files TLSFiles, extra ...string) (*Server, error) {
	return start(ctx, bin, "", &files, extra)
}

// StartSentinel starts the redis-server binary bin (a name on PATH or a
// path) as a Redis Sentinel on a free loopback port, monitoring the master
// at addr (host:port) under name with a quorum of quorum, and waits until
// it answers or ctx ends. The sentinel considers the master down after it
// has not answered for a second (down-after-milliseconds 1000), and gives
// a failover 3 s for each of its steps (failover-timeout 3000; Redis's
// default is 3 minutes): a test that kills the master of a master with
// replicas sees a replica promoted within seconds, and a failover whose
// election split the sentinels' votes tried again 6 s later rather than 6
// minutes.
func StartSentinel(ctx context.Context, bin, name, addr string, quorum int) (*Server, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("start Sentinel: master address %q: %w", addr, err)
	}
	// Sentinel needs a configuration file, which it rewrites.
	conf := fmt.Sprintf("sentinel monitor %s %s %s %d\n"+
		"sentinel down-after-milliseconds %s 1000\n"+
		"sentinel failover-timeout %s 3000\n",
		name, host, port, quorum, name, name)
	return start(ctx, bin, conf, nil, []string{"--sentinel"})
}

// start starts bin, with a configuration file holding conf unless conf is
// "", listening only for TLS with the files of tf unless tf is nil, and the
// extra arguments given.
func start(ctx context.Context, bin, conf string, tf *TLSFiles, extra []string) (*Server, error) {
	what := "Redis"
	if conf != "" {
		what = "Sentinel"
	}
	var tc *tls.Config // of the client that checks the server answers
	if tf != nil {
		what = "Redis with TLS"
		pem, err := os.ReadFile(tf.CA)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", what, err)
		}
		tc = &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("start %s: no PEM certificate in %s", what, tf.CA)
		}
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", what, err)
	}
	dir, err := os.MkdirTemp("", "sluice-redis-")
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", what, err)
	}
	// A free port can be taken by someone else before redis-server binds
	// it: try a few.
	var lastErr error
	for range 5 {
		s, err := startOn(ctx, path, dir, conf, tf, tc, extra)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("start %s: %w", what, lastErr)
}

// startOn starts the server once, on a port that was free a moment ago; tc
// is the TLS configuration of the check that it answers, nil unless tf is
// set.
func startOn(ctx context.Context, path, dir, conf string, tf *TLSFiles, tc *tls.Config, extra []string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()

	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, tls: tf != nil, exited: make(chan struct{})}
	var args []string
	if conf != "" {
		// The file comes first; written afresh each try, as the server
		// rewrites it.
		file := filepath.Join(dir, "redis.conf")
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			return nil, err
		}
		args = append(args, file)
	}
	if tf != nil {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(port),
			"--tls-cert-file", tf.Cert, "--tls-key-file", tf.Key, "--tls-ca-cert-file", tf.CA,
			"--tls-auth-clients", "no")
	} else {
		args = append(args, "--port", strconv.Itoa(port))
	}
	args = append(args, "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
		"--logfile", filepath.Join(dir, "redis.log"))
	args = append(args, extra...)
	s.cmd = exec.Command(path, args...)
	// Errors in the arguments go to stderr, before the log file is open.
	stderr := new(strings.Builder)
	s.cmd.Stderr = stderr
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var werr error
	go func() { werr = s.cmd.Wait(); close(s.exited) }()

	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, TLSConfig: tc})
	defer c.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for c.Ping(ctx).Err() != nil {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("redis-server on %s exited: %v: %.300s", s.Addr, werr, s.why(stderr.String()))
		case <-ctx.Done():
			s.kill()
			return nil, fmt.Errorf("redis-server on %s never answered: %w", s.Addr, ctx.Err())
		case <-tick.C:
		}
	}
	return s, nil
}

// why says why the server exited, from its stderr or else the last two
// lines of its log (the error and "Exiting").
func (s *Server) why(stderr string) string {
	if msg := strings.Join(strings.Fields(stderr), " "); msg != "" {
		return msg
	}
	log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	return strings.Join(lines[max(0, len(lines)-2):], " ")
}

// URL returns the server's URL, database 0: rediss:// for a server that
// StartTLS started, redis:// otherwise.
func (s *Server) URL() string {
	if s.tls {
		return "rediss://" + s.Addr + "/0"
	}
	return "redis://" + s.Addr + "/0"
}

// Close stops the server and removes its directory.
func (s *Server) Close() error {
	s.kill()
	return os.RemoveAll(s.dir)
}

// Kill ends the process with SIGKILL, as a crash would: it saves nothing
// and says goodbye to no one (a replica or sentinel sees its connections
// drop). It waits until the process has exited. Unlike Close it keeps the
// server's directory and log (see Log); Close, which is safe after Kill,
// removes them.
func (s *Server) Kill() {
	s.kill()
}

// Pause stops the process (SIGSTOP): it holds its connections open and
// answers nothing, as a server stalled by its host would, until Resume.
func (s *Server) Pause() error { return s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume lets a paused process go on (SIGCONT).
func (s *Server) Resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }

// Log returns the server's log file (Redis's own, or Sentinel's): what
// a test prints when the server did not do what it expected. It is empty
// after Close.
func (s *Server) Log() string {
	data, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	return string(data)
}

// kill ends the process and waits until it has exited.
func (s *Server) kill() {
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return
	}
	<-s.exited
}
