package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisproc"
)

// ClusterMasters is the number of masters of the cluster that Cluster starts.
const ClusterMasters = 3

var (
	clusterOnce  sync.Once
	clusterAddrs []string
	clusterErr   error
)

// ClusterAddrs returns the addresses of a Redis Cluster for tests: those in
// REDIS_CLUSTER_ADDRS (comma-separated) when set, otherwise those of the
// masters of a cluster of redis-server processes that it starts on
// loopback, once per test binary: ClusterMasters masters, with the hash
// slots split evenly between them, each with a replica. The
// redis-server binary is REDIS_SERVER, or redis-server on PATH.
func ClusterAddrs(tb testing.TB) []string {
	tb.Helper()
	clusterOnce.Do(func() {
		if a := os.Getenv("REDIS_CLUSTER_ADDRS"); a != "" {
			clusterAddrs = strings.Split(a, ",")
			return
		}
		clusterAddrs, clusterErr = startCluster()
	})
	if clusterErr != nil {
		unavailable(tb, "no Redis Cluster for tests: %v", clusterErr)
	}
	return clusterAddrs
}

// Cluster returns a new client of the test cluster, closed when tb ends.
func Cluster(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	// A copy: the client appends the nodes it discovers (the replicas) to
	// its Addrs, which would write into the slice that every test shares.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: slices.Clone(ClusterAddrs(tb))})
	tb.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.ForEachShard(context.Background(), func(ctx context.Context, c *redis.Client) error {
		return c.Ping(ctx).Err()
	}); err != nil {
		tb.Fatalf("redistest: ping cluster: %v", err)
	}
	return rdb
}

// Own returns the URL of a Redis of tb's own: an empty redis-server process
// on loopback, for tests that run commands as a user would, on database 0
// and its default queue. It stops when the test binary's tests end (see
// Main). The binary is REDIS_SERVER, or redis-server on PATH.
func Own(tb testing.TB) string {
	tb.Helper()
	path, err := serverBinary()
	if err != nil {
		unavailable(tb, "no redis-server for tests: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, err := startNode(ctx, path, false)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return "redis://" + addr + "/0"
}

// OwnClient returns a client of a Redis of tb's own (Own), closed when tb
// ends: for benchmarks that read INFO commandstats, which nothing else may
// add to. poolSize is its most connections; 0 keeps go-redis's default.
func OwnClient(tb testing.TB, poolSize int) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(Own(tb))
	if err != nil {
		tb.Fatalf("redistest: parse Redis URL: %v", err)
	}
	opt.PoolSize = poolSize
	rdb := redis.NewClient(opt)
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// startCluster starts ClusterMasters masters and a replica of each,
// assigns the slots, joins the nodes, and waits until every node reports
// the cluster ok and every replica is in sync. It returns the masters'
// addresses.
func startCluster() ([]string, error) {
	bin, err := serverBinary()
	if err != nil {
		return nil, fmt.Errorf("set REDIS_CLUSTER_ADDRS, or install redis-server: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addrs := make([]string, 2*ClusterMasters)
	for i := range addrs {
		if addrs[i], err = startNode(ctx, bin, true); err != nil {
			return nil, err
		}
	}
	masters, replicas := addrs[:ClusterMasters], addrs[ClusterMasters:]
	if err := joinCluster(ctx, masters, replicas); err != nil {
		return nil, err
	}
	return slices.Clone(masters), nil
}

// serverBinary returns the path of the redis-server binary: REDIS_SERVER,
// or redis-server on PATH.
func serverBinary() (string, error) {
	bin := os.Getenv("REDIS_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	return exec.LookPath(bin)
}

// startNode starts one redis-server on a free loopback port, a cluster
// node when cluster is set, and waits until it answers; Main stops it.
func startNode(ctx context.Context, bin string, cluster bool) (string, error) {
	var extra []string
	if cluster {
		extra = []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--repl-diskless-sync-delay", "0"} // a replica's first sync at once, not after 5 s
	}
	srv, err := redisproc.Start(ctx, bin, extra...)
	if err != nil {
		return "", err
	}
	atExit(func() { _ = srv.Close() })
	return srv.Addr, nil
}

// waitFor polls cond every 20 ms until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() bool) error {
	return waitEvery(ctx, 20*time.Millisecond, cond)
}

// waitEvery polls cond every interval until it holds or ctx ends.
func waitEvery(ctx context.Context, interval time.Duration, cond func() bool) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return errors.New("timed out")
		case <-tick.C:
		}
	}
	return nil
}

// ReplicatedCluster is a Redis Cluster of ClusterMasters masters (or as
// many as StartReplicatedClusterOf asks), each with one replica:
// redis-server processes of a test's own on loopback, for failover tests. A node is marked failing when it has not answered
// for 1 s (cluster-node-timeout 1000), and the replica of a master killed
// takes its slots a few seconds later. Unlike the cluster of ClusterAddrs,
// shared by the test binary, it is started for one test, which may kill
// its nodes. Its methods are safe for concurrent use.
type ReplicatedCluster struct {
	// Masters are the addresses of the masters the cluster started with,
	// and Replicas those of their replicas: Replicas[i] replicates
	// Masters[i]. After a failover the roles differ: see MasterOf.
	Masters, Replicas []string

	procs *fleet
}

// ReplicatedClusterNodeTimeout is the cluster-node-timeout of the nodes
// of StartReplicatedCluster: how long a node may not answer before the
// others begin to consider it failing.
const ReplicatedClusterNodeTimeout = time.Second

// StartReplicatedCluster starts a ReplicatedCluster of tb's own, stopped
// when tb ends, and returns once every node reports the cluster ok and
// knows every replica as the replica of its master, and every replica is
// in sync. The binary is REDIS_SERVER, or redis-server on PATH. When tb
// fails, the last lines of every node's log are printed.
func StartReplicatedCluster(tb testing.TB) *ReplicatedCluster {
	tb.Helper()
	return StartReplicatedClusterOf(tb, ClusterMasters)
}

// StartReplicatedClusterOf is StartReplicatedCluster with masters masters
// (each with a replica) in place of ClusterMasters: the benchmarks' larger
// clusters.
func StartReplicatedClusterOf(tb testing.TB, masters int) *ReplicatedCluster {
	tb.Helper()
	bin, err := serverBinary()
	if err != nil {
		unavailable(tb, "no redis-server for Redis Cluster tests: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := &ReplicatedCluster{procs: newFleet(tb, bin)}
	args := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.Itoa(int(ReplicatedClusterNodeTimeout / time.Millisecond)),
		// A replica may take over however long its link was down: the
		// test decides when a master dies, not how stale its replica is.
		"--cluster-replica-validity-factor", "0"}
	for range 2 * masters {
		s, err := c.procs.start(ctx, args...)
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		if len(c.Masters) < masters {
			c.Masters = append(c.Masters, s.Addr)
		} else {
			c.Replicas = append(c.Replicas, s.Addr)
		}
	}
	if err := joinCluster(ctx, c.Masters, c.Replicas); err != nil {
		tb.Fatalf("redistest: replicated cluster: %v", err)
	}
	return c
}

// joinCluster assigns the slots to masters, introduces every node to the
// first, makes replicas[i] replicate masters[i], and waits until all is in
// place: every node reports the cluster ok and every replica is in sync.
func joinCluster(ctx context.Context, masters, replicas []string) error {
	all := append(slices.Clone(masters), replicas...)
	clients := map[string]*redis.Client{}
	for _, addr := range all {
		clients[addr] = redis.NewClient(&redis.Options{Addr: addr})
	}
	defer func() {
		for _, n := range clients {
			_ = n.Close()
		}
	}()
	const slots = 16384
	ids := map[string]string{} // address -> node ID
	for i, addr := range masters {
		first, last := i*slots/len(masters), (i+1)*slots/len(masters)-1
		if err := clients[addr].ClusterAddSlotsRange(ctx, first, last).Err(); err != nil {
			return fmt.Errorf("node %s: add slots %d-%d: %w", addr, first, last, err)
		}
	}
	for _, addr := range all {
		id, err := clients[addr].ClusterMyID(ctx).Result()
		if err != nil {
			return fmt.Errorf("node %s: cluster myid: %w", addr, err)
		}
		ids[addr] = id
	}
	for _, addr := range all[1:] {
		host, port, _ := net.SplitHostPort(addr)
		if err := clients[all[0]].ClusterMeet(ctx, host, port).Err(); err != nil {
			return fmt.Errorf("cluster meet %s: %w", addr, err)
		}
	}
	for i, addr := range replicas {
		master := ids[masters[i]]
		// A replica can replicate only a node it knows.
		var err error
		if werr := waitFor(ctx, func() bool {
			err = clients[addr].ClusterReplicate(ctx, master).Err()
			return err == nil
		}); werr != nil {
			return fmt.Errorf("node %s: cluster replicate %s (%s): %v: %w", addr, master, masters[i], err, werr)
		}
	}
	want := map[string]string{} // node ID -> the ID of its master, "-" for a master
	for i, addr := range masters {
		want[ids[addr]] = "-"
		want[ids[replicas[i]]] = ids[addr]
	}
	for _, addr := range all {
		var why string
		err := waitFor(ctx, func() bool {
			why = clusterReady(ctx, clients[addr], want)
			return why == ""
		})
		if err != nil {
			return fmt.Errorf("node %s never saw the cluster ready: %s: %w", addr, why, err)
		}
	}
	for _, addr := range masters {
		if err := waitReplicated(ctx, addr, 1); err != nil {
			return err
		}
	}
	return nil
}

// clusterReady returns "" when the node of n reports the cluster ok and
// lists exactly the nodes of want, each connected, not failing, and the
// replica of the master that want gives (or a master, for "-"); otherwise
// what is missing.
func clusterReady(ctx context.Context, n *redis.Client, want map[string]string) string {
	info, err := n.ClusterInfo(ctx).Result()
	if err != nil {
		return err.Error()
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return "cluster_state is not ok"
	}
	nodes, err := n.ClusterNodes(ctx).Result()
	if err != nil {
		return err.Error()
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		// <id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slots>...
		f := strings.Fields(line)
		if len(f) < 8 {
			return fmt.Sprintf("cluster nodes line %q", line)
		}
		master, ok := want[f[0]]
		switch {
		case !ok:
			return fmt.Sprintf("unknown node %s", line)
		case f[3] != master:
			return fmt.Sprintf("node %s has master %s, want %s", f[1], f[3], master)
		case strings.Contains(f[2], "fail") || strings.Contains(f[2], "handshake") || f[7] != "connected":
			return fmt.Sprintf("node %s: %s %s", f[1], f[2], f[7])
		}
		seen++
	}
	if seen != len(want) {
		return fmt.Sprintf("knows %d of %d nodes", seen, len(want))
	}
	return ""
}

// URL returns the redis+cluster:// URL of the cluster, naming every
// master it started with, as the commands' --redis flag takes it.
func (c *ReplicatedCluster) URL() string {
	u, sep := "redis+cluster://"+c.Masters[0], "?"
	for _, m := range c.Masters[1:] {
		u += sep + "addr=" + m
		sep = "&"
	}
	return u
}

// Client returns a new client of the cluster, which finds the new master
// of a slot within a second of a failover; closed when tb ends.
//
// go-redis's cluster client learns where the slots are when a node
// redirects it (MOVED) and otherwise every ClusterStateReloadInterval, 60
// s by default: a master that died cannot redirect, so the client would
// go on dialing it for up to a minute. This one reloads every second.
func (c *ReplicatedCluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                      append(slices.Clone(c.Masters), c.Replicas...),
		ClusterStateReloadInterval: time.Second,
	})
	tb.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.ForEachShard(context.Background(), func(ctx context.Context, n *redis.Client) error {
		return n.Ping(ctx).Err()
	}); err != nil {
		tb.Fatalf("redistest: ping replicated cluster: %v", err)
	}
	return rdb
}

// MasterOf returns the address of the master that serves key's hash slot,
// as the first node still running that answers says.
func (c *ReplicatedCluster) MasterOf(ctx context.Context, key string) (string, error) {
	var errs []string
	for _, addr := range append(slices.Clone(c.Masters), c.Replicas...) {
		if !c.procs.alive(addr) {
			continue
		}
		m, err := slotMaster(ctx, addr, key)
		if err == nil {
			return m, nil
		}
		errs = append(errs, err.Error())
	}
	return "", fmt.Errorf("redistest: no node named the master of %q: %s", key, strings.Join(errs, "; "))
}

// slotMaster returns the master that serves key's slot as the node at addr
// sees it.
func slotMaster(ctx context.Context, addr, key string) (string, error) {
	return withClient(addr, func(n *redis.Client) (string, error) {
		slot, err := n.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			return "", fmt.Errorf("node %s: cluster keyslot: %w", addr, err)
		}
		ranges, err := n.ClusterSlots(ctx).Result() //nolint:staticcheck // the slot map as go-redis's cluster client reads it
		if err != nil {
			return "", fmt.Errorf("node %s: cluster slots: %w", addr, err)
		}
		for _, r := range ranges {
			if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 {
				return r.Nodes[0].Addr, nil
			}
		}
		return "", fmt.Errorf("node %s: no master serves slot %d", addr, slot)
	})
}

// Kill ends the node at addr, one of the cluster's, with SIGKILL, as a
// crash would, and waits until it has exited. tb fails when addr is not
// one of the cluster's nodes.
func (c *ReplicatedCluster) Kill(tb testing.TB, addr string) {
	tb.Helper()
	if err := c.procs.kill(addr); err != nil {
		tb.Fatal(err)
	}
}

// Pause stops the node at addr (SIGSTOP), holding its connections open,
// until Resume; tb fails when addr is not one of the cluster's nodes.
func (c *ReplicatedCluster) Pause(tb testing.TB, addr string) {
	tb.Helper()
	if err := c.procs.signal(addr, true); err != nil {
		tb.Fatal(err)
	}
}

// Resume lets the node at addr, paused, go on.
func (c *ReplicatedCluster) Resume(tb testing.TB, addr string) {
	tb.Helper()
	if err := c.procs.signal(addr, false); err != nil {
		tb.Fatal(err)
	}
}

// ReplicaOf returns the address of the replica of the master at addr, as
// the cluster's nodes name it, or an error when it has none.
func (c *ReplicatedCluster) ReplicaOf(ctx context.Context, addr string) (string, error) {
	return withClient(addr, func(n *redis.Client) (string, error) {
		role, err := n.Do(ctx, "ROLE").Slice()
		if err != nil {
			return "", fmt.Errorf("redistest: node %s: role: %w", addr, err)
		}
		if len(role) == 3 && role[0] == "master" {
			if rs, ok := role[2].([]any); ok && len(rs) > 0 {
				if r, ok := rs[0].([]any); ok && len(r) >= 2 {
					return net.JoinHostPort(fmt.Sprint(r[0]), fmt.Sprint(r[1])), nil
				}
			}
		}
		return "", fmt.Errorf("redistest: node %s has no replica: role %v", addr, role)
	})
}

// Failover promotes the replica of the master of key's slot with CLUSTER
// FAILOVER: the master stops taking writes, the replica catches up with
// it, and takes its slots, losing nothing. It returns the old master and
// the new once a client asking the nodes can reach the new one.
func (c *ReplicatedCluster) Failover(ctx context.Context, key string) (old, now string, err error) {
	if old, err = c.MasterOf(ctx, key); err != nil {
		return "", "", err
	}
	replica, err := c.ReplicaOf(ctx, old)
	if err != nil {
		return "", "", err
	}
	if _, err := withClient(replica, func(n *redis.Client) (string, error) {
		return n.ClusterFailover(ctx).Result()
	}); err != nil {
		return "", "", fmt.Errorf("redistest: cluster failover on %s, the replica of %s: %w", replica, old, err)
	}
	now, err = c.WaitPromoted(ctx, key, old)
	return old, now, err
}

// WaitReplicated waits until the replica of every master that started
// with one has applied all that its master had written, as their
// replication offsets say, or ctx ends. A master whose replica has been
// killed, or that took over from a master killed, has none: it is
// skipped.
func (c *ReplicatedCluster) WaitReplicated(ctx context.Context) error {
	for i, m := range c.Masters {
		for _, addr := range []string{m, c.Replicas[i]} {
			other := c.Replicas[i]
			if addr == other {
				other = m
			}
			if !c.procs.alive(addr) || !c.procs.alive(other) || !isMaster(ctx, addr) {
				continue
			}
			if err := waitReplicated(ctx, addr, 1); err != nil {
				return fmt.Errorf("redistest: %w", err)
			}
		}
	}
	return nil
}

// WaitPromoted waits until a node still running names a master other
// than old for key's hash slot and that server answers that it is a
// master, and returns its address: the moment a client that asks the
// nodes can reach the new master. It polls every 10 ms, until ctx ends.
func (c *ReplicatedCluster) WaitPromoted(ctx context.Context, key, old string) (string, error) {
	var now string
	err := waitEvery(ctx, 10*time.Millisecond, func() bool {
		for _, addr := range append(slices.Clone(c.Masters), c.Replicas...) {
			if !c.procs.alive(addr) {
				continue
			}
			if m, err := slotMaster(ctx, addr, key); err == nil {
				now = m
				if m != old && isMaster(ctx, m) {
					return true
				}
			}
		}
		return false
	})
	if err != nil {
		return "", fmt.Errorf("redistest: no node named a master of %q other than %s (last named %q): %w", key, old, now, err)
	}
	return now, nil
}
