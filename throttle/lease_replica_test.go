package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// TestLeaseMoveWaitsForAReplica: on a cluster whose masters have
// replicas, a move is taken only once a replica of the giver's master has
// the give. With that replica paused, the move stops after the give
// (ErrNotReplicated): the receiver's share is unchanged, the give stays
// out, and Recover does not take it either while the replica cannot
// confirm it; resumed, Recover completes it, and the shares sum to the
// whole.
func TestLeaseMoveWaitsForAReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, ls, _, replica := leasedOnReplicas(t)
	c.Pause(t, replica)
	paused := true
	defer func() {
		if paused {
			c.Resume(t, replica)
		}
	}()

	const d = throttle.LeaseParts / 2
	if n, err := ls.Move(ctx, leaseRule, "s.0", "s.1", d); !errors.Is(err, throttle.ErrNotReplicated) || n != 0 {
		t.Fatalf("move from s.0 with its master's replica paused: %d, %v; want 0 and ErrNotReplicated", n, err)
	}
	checkOut := func(when string, s1 int64, out int) {
		t.Helper()
		lease, err := ls.Read(ctx, leaseRule, "s.0")
		if err != nil {
			t.Fatal(err)
		}
		if got := share(t, ls, "s.1"); got != s1 || len(lease.Out) != out || lease.Share != throttle.LeaseParts-d {
			t.Errorf("%s: s.1 holds %d shares, s.0 %d with %d moves out; want %d, %d with %d out",
				when, got, lease.Share, len(lease.Out), s1, throttle.LeaseParts-d, out)
		}
	}
	checkOut("the give not acknowledged", 0, 1)
	if n, err := ls.Recover(ctx, leaseRule, "s.0", 0); !errors.Is(err, throttle.ErrNotReplicated) || n != 0 {
		t.Errorf("recover with the replica paused: %d, %v; want 0 and ErrNotReplicated", n, err)
	}
	checkOut("recovery not acknowledged", 0, 1)

	c.Resume(t, replica)
	paused = false
	if n := recoverAll(t, ls, "s.0"); n != 1 {
		t.Fatalf("recovered %d moves with the replica back, want the one", n)
	}
	checkOut("recovered", d, 0)
	if got := share(t, ls, "s.0") + share(t, ls, "s.1") + share(t, ls, throttle.DefaultGroup); got != throttle.LeaseParts {
		t.Errorf("the shares sum to %d, want %d", got, throttle.LeaseParts)
	}
}

// TestLeaseGiveLostWithItsMaster: a give made while the master was cut
// off from its replica is lost with the master, killed, when the replica
// takes over; the receiver never took it, so the shares still sum to the
// whole. Had the move not waited for the replica (or counted only the
// replicas connected, none), the take would have run, and the shares
// summed to one and a half times the whole.
func TestLeaseGiveLostWithItsMaster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, ls, master, replica := leasedOnReplicas(t)
	to := "" // a receiver on another master, which survives
	for i := 1; to == ""; i++ {
		g := fmt.Sprintf("s.%d", i)
		if other, err := c.MasterOf(ctx, "{"+g+"}"); err != nil {
			t.Fatal(err)
		} else if other != master {
			to = g
		}
	}
	// The replica stalled and its link cut before the give: it cannot
	// have it, as a master cut off from its replica would not send it.
	c.Pause(t, replica)
	m := redis.NewClient(&redis.Options{Addr: master})
	defer m.Close()
	if err := m.ClientKillByFilter(ctx, "TYPE", "replica").Err(); err != nil {
		c.Resume(t, replica)
		t.Fatal(err)
	}
	if _, err := ls.Move(ctx, leaseRule, "s.0", to, throttle.LeaseParts/2); !errors.Is(err, throttle.ErrNotReplicated) {
		c.Resume(t, replica)
		t.Fatalf("move with the replica paused: %v, want ErrNotReplicated", err)
	}
	c.Kill(t, master)
	c.Resume(t, replica)
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.WaitPromoted(wait, "{s.0}", master); err != nil {
		t.Fatal(err)
	}
	recoverAll(t, ls, "s.0")
	s0, s1, pool := share(t, ls, "s.0"), share(t, ls, to), share(t, ls, throttle.DefaultGroup)
	if s1 != 0 || s0+s1+pool != throttle.LeaseParts {
		t.Errorf("after the failover s.0 holds %d, %s %d, the pool %d: want %s none, the sum %d", s0, to, s1, pool, to, throttle.LeaseParts)
	}
}

// leasedOnReplicas starts a cluster whose masters have a replica each,
// and moves the whole of leaseRule to group s.0, acknowledged with every
// replica running; it returns s.0's master and that master's replica.
func leasedOnReplicas(t *testing.T) (c *redistest.ReplicatedCluster, ls *throttle.Leases, master, replica string) {
	t.Helper()
	c = redistest.StartReplicatedCluster(t)
	ctx := context.Background()
	ls = throttle.NewLimiter(c.Client(t), throttle.WithPrefix(redistest.Prefix(t))).Leases()
	if _, err := ls.Open(ctx, leaseRule); err != nil {
		t.Fatal(err)
	}
	if n, err := ls.Move(ctx, leaseRule, throttle.DefaultGroup, "s.0", throttle.LeaseParts); err != nil || n != throttle.LeaseParts {
		t.Fatalf("move the pool to s.0: %d, %v", n, err)
	}
	master, err := c.MasterOf(ctx, "{s.0}")
	if err != nil {
		t.Fatal(err)
	}
	if replica, err = c.ReplicaOf(ctx, master); err != nil {
		t.Fatal(err)
	}
	return c, ls, master, replica
}

// recoverAll runs Recover on group g of leaseRule until it completes
// without an error, for up to 20 s (a replica just resumed, or a master
// just promoted, may not answer at once), and returns the moves completed.
func recoverAll(t *testing.T, ls *throttle.Leases, g string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	done := 0
	for {
		n, err := ls.Recover(context.Background(), leaseRule, g, 0)
		done += n
		if err == nil {
			return done
		}
		if time.Now().After(deadline) {
			t.Fatalf("recover the moves of %s: %v", g, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
