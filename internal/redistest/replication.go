package redistest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisproc"
)

// fleet is the redis-server processes of one test's replicated setup
// (SentinelGroup, ReplicatedCluster), by address: it starts them, kills
// them on request, prints the end of their logs when the test fails, and
// stops them when it ends. It is safe for concurrent use.
type fleet struct {
	bin string

	mu     sync.Mutex
	procs  map[string]*redisproc.Server
	order  []string        // addresses in the order the servers started
	killed map[string]bool // addresses that Kill ended
}

// newFleet returns an empty fleet of tb, which stops its servers when tb
// ends, after printing the end of their logs if tb failed.
func newFleet(tb testing.TB, bin string) *fleet {
	f := &fleet{bin: bin, procs: map[string]*redisproc.Server{}, killed: map[string]bool{}}
	tb.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, addr := range f.order {
			s := f.procs[addr]
			if tb.Failed() {
				tb.Logf("redistest: the last lines of the log of %s:\n%s", addr, lastLines(s.Log(), 30))
			}
			_ = s.Close()
		}
	})
	return f
}

// start starts a redis-server with the extra arguments given (see
// redisproc.Start), and adds it to f. A master sends its data to a new
// replica at once, rather than 5 s later in case others come
// (repl-diskless-sync-delay 0).
func (f *fleet) start(ctx context.Context, extra ...string) (*redisproc.Server, error) {
	s, err := redisproc.Start(ctx, f.bin, append([]string{"--repl-diskless-sync-delay", "0"}, extra...)...)
	if err != nil {
		return nil, err
	}
	f.add(s)
	return s, nil
}

// add adds s to f.
func (f *fleet) add(s *redisproc.Server) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.procs[s.Addr] = s
	f.order = append(f.order, s.Addr)
}

// kill ends the server at addr with SIGKILL, as a crash would, and waits
// until it has exited.
func (f *fleet) kill(addr string) error {
	f.mu.Lock()
	s, ok := f.procs[addr]
	if ok {
		f.killed[addr] = true
	}
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("redistest: kill %s: no server of this test there", addr)
	}
	s.Kill()
	return nil
}

// signal pauses (stop) or resumes the server at addr.
func (f *fleet) signal(addr string, stop bool) error {
	f.mu.Lock()
	s, ok := f.procs[addr]
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("redistest: pause or resume %s: no server of this test there", addr)
	}
	if stop {
		return s.Pause()
	}
	return s.Resume()
}

// alive reports whether addr is a server of f that Kill has not ended.
func (f *fleet) alive(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.procs[addr]
	return ok && !f.killed[addr]
}

// lastLines returns the last n lines of text.
func lastLines(text string, n int) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// withClient runs fn with a client of the server at addr that does not
// retry, and closes it.
func withClient[T any](addr string, fn func(*redis.Client) (T, error)) (T, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	return fn(c)
}

// replicationInfo returns the fields of INFO replication of the server at
// addr, such as "role", "master_repl_offset" or "master_link_status".
func replicationInfo(ctx context.Context, addr string) (map[string]string, error) {
	text, err := withClient(addr, func(c *redis.Client) (string, error) {
		return c.Info(ctx, "replication").Result()
	})
	if err != nil {
		return nil, fmt.Errorf("info replication of %s: %w", addr, err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields, nil
}

// isMaster reports whether the server at addr answers that it is a master.
func isMaster(ctx context.Context, addr string) bool {
	info, err := replicationInfo(ctx, addr)
	return err == nil && info["role"] == "master"
}

// waitReplicated waits until the master at addr lists replicas replicas
// online, and then until each has applied all that the master had written
// at that moment: its own slave_repl_offset has reached the master's
// master_repl_offset of then. The replicas' acknowledgements that the
// master reports lag by up to a second, so each replica is asked. It
// returns an error when ctx ends first.
func waitReplicated(ctx context.Context, addr string, replicas int) error {
	var info map[string]string
	var online []string
	var why string
	err := waitFor(ctx, func() bool {
		var err error
		if info, err = replicationInfo(ctx, addr); err != nil {
			why = err.Error()
			return false
		}
		online = onlineReplicas(info)
		why = fmt.Sprintf("role:%s, %d replicas online", info["role"], len(online))
		return info["role"] == "master" && len(online) >= replicas
	})
	if err != nil {
		return fmt.Errorf("master %s: want %d replicas online: %s: %w", addr, replicas, why, err)
	}
	target, err := strconv.ParseInt(info["master_repl_offset"], 10, 64)
	if err != nil {
		return fmt.Errorf("%s: master_repl_offset %q: %w", addr, info["master_repl_offset"], err)
	}
	for _, r := range online {
		var last string
		err := waitFor(ctx, func() bool {
			info, err := replicationInfo(ctx, r)
			if err != nil {
				last = err.Error()
				return false
			}
			last = fmt.Sprintf("master_link_status:%s slave_repl_offset:%s", info["master_link_status"], info["slave_repl_offset"])
			off, err := strconv.ParseInt(info["slave_repl_offset"], 10, 64)
			return err == nil && info["master_link_status"] == "up" && off >= target
		})
		if err != nil {
			return fmt.Errorf("replica %s never reached the offset %d of master %s (%s): %w", r, target, addr, last, err)
		}
	}
	return nil
}

// onlineReplicas returns the addresses of the replicas online that INFO
// replication of a master lists.
func onlineReplicas(info map[string]string) []string {
	var replicas []string
	for k, v := range info {
		// slave0:ip=127.0.0.1,port=6380,state=online,offset=123,lag=0
		if !strings.HasPrefix(k, "slave") || strings.HasPrefix(k, "slave_") {
			continue
		}
		attrs := map[string]string{}
		for _, kv := range strings.Split(v, ",") {
			if a, b, ok := strings.Cut(kv, "="); ok {
				attrs[a] = b
			}
		}
		if attrs["state"] == "online" {
			replicas = append(replicas, net.JoinHostPort(attrs["ip"], attrs["port"]))
		}
	}
	slices.Sort(replicas)
	return replicas
}
