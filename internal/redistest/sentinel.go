package redistest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisproc"
)

// SentinelMaster is the name under which the sentinels that Sentinel starts
// monitor their master.
const SentinelMaster = "mymaster"

// Sentinel starts a Redis master and n sentinels that monitor it as
// SentinelMaster, with a quorum of a majority of them: redis-server
// processes of tb's own on loopback, stopped when tb ends. It returns the
// sentinels' addresses and the master's. The binary is REDIS_SERVER, or
// redis-server on PATH.
func Sentinel(tb testing.TB, n int) (sentinels []string, master string) {
	tb.Helper()
	bin, err := serverBinary()
	if err != nil {
		unavailable(tb, "no redis-server for Sentinel tests: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := redisproc.Start(ctx, bin)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(func() { _ = m.Close() })
	for range n {
		s, err := redisproc.StartSentinel(ctx, bin, SentinelMaster, m.Addr, n/2+1)
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		tb.Cleanup(func() { _ = s.Close() })
		sentinels = append(sentinels, s.Addr)
	}
	return sentinels, m.Addr
}

// SentinelGroup is a Redis master with replicas and the sentinels that
// monitor it as SentinelMaster: redis-server processes of a test's own on
// loopback, for failover tests. The sentinels consider the master down
// after it has not answered for 1 s, and a quorum of a majority of them
// promotes a replica a few seconds after the master died (see
// redisproc.StartSentinel for their settings). Its methods are safe for
// concurrent use.
type SentinelGroup struct {
	// Sentinels are the sentinels' addresses (host:port).
	Sentinels []string
	// Master is the address of the master the group started with. After a
	// failover the sentinels name another: see MasterAddr.
	Master string
	// Replicas are the addresses of the master's replicas.
	Replicas []string

	procs *fleet
}

// StartSentinelGroup starts a master, replicas replicas of it (redis-server
// --replicaof) and sentinels sentinels, all of tb's own, stopped when tb
// ends, and returns once every replica is in sync and every sentinel knows
// the replicas and the other sentinels and can reach its quorum and a
// majority for a failover (SENTINEL CKQUORUM): killing the master then
// makes them promote a replica. replicas and sentinels must be at least 1.
// The binary is REDIS_SERVER, or redis-server on PATH. When tb fails, the
// last lines of every server's log are printed.
func StartSentinelGroup(tb testing.TB, replicas, sentinels int) *SentinelGroup {
	tb.Helper()
	if replicas < 1 || sentinels < 1 {
		tb.Fatalf("redistest: StartSentinelGroup(%d replicas, %d sentinels): need at least one of each", replicas, sentinels)
	}
	bin, err := serverBinary()
	if err != nil {
		unavailable(tb, "no redis-server for Sentinel tests: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := &SentinelGroup{procs: newFleet(tb, bin)}
	m, err := g.procs.start(ctx)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	g.Master = m.Addr
	host, port, _ := net.SplitHostPort(m.Addr)
	for range replicas {
		r, err := g.procs.start(ctx, "--replicaof", host, port)
		if err != nil {
			tb.Fatalf("redistest: replica of %s: %v", m.Addr, err)
		}
		g.Replicas = append(g.Replicas, r.Addr)
	}
	// The replicas first, in sync, so that each sentinel's first INFO of
	// the master lists them.
	if err := waitReplicated(ctx, m.Addr, replicas); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	for range sentinels {
		s, err := redisproc.StartSentinel(ctx, bin, SentinelMaster, m.Addr, sentinels/2+1)
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		g.procs.add(s)
		g.Sentinels = append(g.Sentinels, s.Addr)
	}
	for _, addr := range g.Sentinels {
		var why string
		err := waitFor(ctx, func() bool {
			why = sentinelReady(ctx, addr, replicas, sentinels-1)
			return why == ""
		})
		if err != nil {
			tb.Fatalf("redistest: sentinel %s not ready for a failover: %s: %v", addr, why, err)
		}
	}
	return g
}

// sentinelReady returns "" when the sentinel at addr knows replicas
// replicas of SentinelMaster, all connected and in sync with it, and others
// other sentinels, and can reach its quorum and a majority; otherwise what
// it lacks.
func sentinelReady(ctx context.Context, addr string, replicas, others int) string {
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer sc.Close()
	rs, err := sc.Replicas(ctx, SentinelMaster).Result()
	if err != nil {
		return fmt.Sprintf("sentinel replicas: %v", err)
	}
	ok := 0
	for _, r := range rs {
		if r["flags"] == "slave" && r["master-link-status"] == "ok" {
			ok++
		}
	}
	if ok != replicas {
		return fmt.Sprintf("%d of %d replicas known and in sync: %v", ok, replicas, rs)
	}
	ss, err := sc.Sentinels(ctx, SentinelMaster).Result()
	if err != nil {
		return fmt.Sprintf("sentinel sentinels: %v", err)
	}
	if len(ss) != others {
		return fmt.Sprintf("knows %d other sentinels, want %d", len(ss), others)
	}
	if err := sc.CkQuorum(ctx, SentinelMaster).Err(); err != nil {
		return fmt.Sprintf("sentinel ckquorum: %v", err)
	}
	return ""
}

// URL returns the redis+sentinel:// URL of the group's master, database
// 0, naming every sentinel, as the commands' --redis flag takes it.
func (g *SentinelGroup) URL() string {
	u := "redis+sentinel://" + g.Sentinels[0] + "/0?master_name=" + SentinelMaster
	for _, s := range g.Sentinels[1:] {
		u += "&addr=" + s
	}
	return u
}

// Client returns a new client of the group's master through its sentinels,
// which follows a failover; closed when tb ends.
func (g *SentinelGroup) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: g.Sentinels})
	tb.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		tb.Fatalf("redistest: ping master %s through sentinels %v: %v", SentinelMaster, g.Sentinels, err)
	}
	return rdb
}

// MasterAddr returns the address of the master as the first sentinel that
// answers names it.
func (g *SentinelGroup) MasterAddr(ctx context.Context) (string, error) {
	var errs []string
	for _, addr := range g.Sentinels {
		if !g.procs.alive(addr) {
			continue
		}
		m, err := askSentinel(ctx, addr)
		if err == nil {
			return m, nil
		}
		errs = append(errs, fmt.Sprintf("sentinel %s: %v", addr, err))
	}
	return "", fmt.Errorf("redistest: no sentinel named master %s: %s", SentinelMaster, strings.Join(errs, "; "))
}

// Kill ends the server at addr, one of the group's, with SIGKILL, as a
// crash would, and waits until it has exited. tb fails when addr is not
// one of the group's servers.
func (g *SentinelGroup) Kill(tb testing.TB, addr string) {
	tb.Helper()
	if err := g.procs.kill(addr); err != nil {
		tb.Fatal(err)
	}
}

// WaitReplicated waits until every replica of the current master is
// online and has applied all that the master had written when it came
// online, as their replication offsets say, or ctx ends. Before a
// failover, all the replicas the group started with must be online;
// after it, those still running.
func (g *SentinelGroup) WaitReplicated(ctx context.Context) error {
	m, err := g.MasterAddr(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, addr := range append([]string{g.Master}, g.Replicas...) {
		if addr != m && g.procs.alive(addr) {
			n++
		}
	}
	if err := waitReplicated(ctx, m, n); err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	return nil
}

// WaitPromoted waits until a sentinel names a master other than old and
// that server answers that it is a master, and returns its address: the
// moment a client that asks the sentinels can reach the new master. It
// polls every 10 ms, until ctx ends.
func (g *SentinelGroup) WaitPromoted(ctx context.Context, old string) (string, error) {
	var now string
	err := waitEvery(ctx, 10*time.Millisecond, func() bool {
		for _, addr := range g.Sentinels {
			if !g.procs.alive(addr) {
				continue
			}
			if m, err := askSentinel(ctx, addr); err == nil {
				now = m
				if now != old && isMaster(ctx, now) {
					return true
				}
			}
		}
		return false
	})
	if err != nil {
		return "", fmt.Errorf("redistest: no sentinel named a master other than %s (last named %q): %w", old, now, err)
	}
	return now, nil
}

// askSentinel returns the address of SentinelMaster as the sentinel at
// addr names it.
func askSentinel(ctx context.Context, addr string) (string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer sc.Close()
	hp, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("master address %q", hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}
