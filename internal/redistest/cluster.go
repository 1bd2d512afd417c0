package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
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
// REDIS_CLUSTER_ADDRS (comma-separated) when set, otherwise those of
// ClusterMasters redis-server processes that it starts on loopback, once per
// test binary, with the hash slots split evenly between them. The
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
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: ClusterAddrs(tb)})
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

// startCluster starts the nodes, assigns the slots, joins the nodes, and
// waits until every node reports the cluster ok.
func startCluster() ([]string, error) {
	bin, err := serverBinary()
	if err != nil {
		return nil, fmt.Errorf("set REDIS_CLUSTER_ADDRS, or install redis-server: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	nodes := make([]*redis.Client, ClusterMasters)
	addrs := make([]string, ClusterMasters)
	defer func() {
		for _, n := range nodes {
			if n != nil {
				_ = n.Close()
			}
		}
	}()
	for i := range nodes {
		addr, err := startNode(ctx, bin, true)
		if err != nil {
			return nil, err
		}
		addrs[i] = addr
		nodes[i] = redis.NewClient(&redis.Options{Addr: addr})
	}

	const slots = 16384
	for i, n := range nodes {
		first, last := i*slots/len(nodes), (i+1)*slots/len(nodes)-1
		if err := n.ClusterAddSlotsRange(ctx, first, last).Err(); err != nil {
			return nil, fmt.Errorf("node %s: add slots %d-%d: %w", addrs[i], first, last, err)
		}
	}
	for _, addr := range addrs[1:] {
		host, port, _ := net.SplitHostPort(addr)
		if err := nodes[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			return nil, fmt.Errorf("cluster meet %s: %w", addr, err)
		}
	}
	for i, n := range nodes {
		if err := waitFor(ctx, func() bool {
			info, err := n.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(nodes)))
		}); err != nil {
			return nil, fmt.Errorf("node %s never reported the cluster ok: %w", addrs[i], err)
		}
	}
	return addrs, nil
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
		extra = []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}
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
	tick := time.NewTicker(20 * time.Millisecond)
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
