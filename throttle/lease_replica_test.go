package throttle_test

import (
	"context"
	"errors"
	"testing"

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
	c := redistest.StartReplicatedCluster(t)
	rdb := c.Client(t)
	ctx := context.Background()
	l := throttle.NewLimiter(rdb, throttle.WithPrefix(redistest.Prefix(t)))
	ls := l.Leases()
	if _, err := ls.Open(ctx, leaseRule); err != nil {
		t.Fatal(err)
	}
	// With every replica running, moves are acknowledged and complete.
	if n, err := ls.Move(ctx, leaseRule, throttle.DefaultGroup, "s.0", throttle.LeaseParts); err != nil || n != throttle.LeaseParts {
		t.Fatalf("move the pool to s.0: %d, %v", n, err)
	}
	master, err := c.MasterOf(ctx, "{s.0}")
	if err != nil {
		t.Fatal(err)
	}
	replica, err := c.ReplicaOf(ctx, master)
	if err != nil {
		t.Fatal(err)
	}
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
	if n, err := ls.Recover(ctx, leaseRule, "s.0", 0); err != nil || n != 1 {
		t.Fatalf("recover with the replica back: %d, %v; want the one move", n, err)
	}
	checkOut("recovered", d, 0)
	if got := share(t, ls, "s.0") + share(t, ls, "s.1") + share(t, ls, throttle.DefaultGroup); got != throttle.LeaseParts {
		t.Errorf("the shares sum to %d, want %d", got, throttle.LeaseParts)
	}
}
