// Package redisproc starts redis-server processes on loopback: for the
// benchmark harness, and for the tests' own Redis and Cluster nodes.
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	exited chan struct{} // closed once the process has exited
}

// Start starts the redis-server binary bin (a name on PATH or a path) on a
// free loopback port, with the extra arguments given (such as
// "--cluster-enabled", "yes"; relative paths are in the server's
// directory), and waits until it answers or ctx ends.
func Start(ctx context.Context, bin string, extra ...string) (*Server, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("start Redis: %w", err)
	}
	dir, err := os.MkdirTemp("", "sluice-redis-")
	if err != nil {
		return nil, fmt.Errorf("start Redis: %w", err)
	}
	// A free port can be taken by someone else before redis-server binds
	// it: try a few.
	var lastErr error
	for range 5 {
		s, err := startOn(ctx, path, dir, extra)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("start Redis: %w", lastErr)
}

func startOn(ctx context.Context, path, dir string, extra []string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()

	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, exited: make(chan struct{})}
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--save", "", "--appendonly", "no",
		"--logfile", filepath.Join(dir, "redis.log")}, extra...)
	s.cmd = exec.Command(path, args...)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var werr error
	go func() { werr = s.cmd.Wait(); close(s.exited) }()

	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for c.Ping(ctx).Err() != nil {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("redis-server on %s exited: %v", s.Addr, werr)
		case <-ctx.Done():
			s.kill()
			return nil, fmt.Errorf("redis-server on %s never answered: %w", s.Addr, ctx.Err())
		case <-tick.C:
		}
	}
	return s, nil
}

// URL returns the server's URL, database 0.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Close stops the server and removes its directory.
func (s *Server) Close() error {
	s.kill()
	return os.RemoveAll(s.dir)
}

// kill ends the process and waits until it has exited.
func (s *Server) kill() {
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return
	}
	<-s.exited
}
