package throttle

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/lua"
)

// LeaseParts is the whole of a global rule's limit in shares: a group
// holding s of them is worth floor(s × limit ÷ LeaseParts) units of it
// (docs/SCALING.md, "A global rule kept exact across shards"). It is
// 2^6 × 3^3 × 5^5 × 7, so that a unit of most limits (10, 20, 25, 50,
// 60, 100, 300, 1,000, 3,600, 100,000, ...) is a whole number of shares
// and a split in whole units loses none; share × limit stays below 2^53
// for every limit Sluice takes. lua/lease_worth.lua holds it too
// (TestLeaseParts).
const LeaseParts = 37_800_000

// Lease is a group's share of a global rule.
type Lease struct {
	Share  int64       // in parts of LeaseParts
	Target int64       // where the balancer wants Share to go; -1 when it set none
	Goal   int64       // the share the balancer wants the group to hold; -1 when it set none
	Out    []LeaseMove // moves the group gave that are not settled yet
}

// LeaseMove is a move of shares a group gave.
type LeaseMove struct {
	ID     string
	To     string // the receiving group
	Shares int64
	At     time.Time // when it was given, by the Redis clock
}

// Leases move the shares of global rules between the groups of a
// Limiter's prefix: the pool, which is the default group, and the shards
// (Limiter.InGroup). The sum of the shares of a rule, over the pool, the
// groups and the moves not yet taken, is LeaseParts, and no step raises
// it: a move is given (one script on the giver), taken (one on the
// receiver, once whoever runs it) and settled. They are safe for
// concurrent use, by any number of processes.
type Leases struct {
	l *Limiter
}

// Leases returns the leases of l's prefix.
func (l *Limiter) Leases() *Leases { return &Leases{l: l} }

// keys returns the Redis keys of rule c in group g.
func (ls *Leases) keys(c Check, g string) (redisKeys, error) {
	if ls.l.err != nil {
		return redisKeys{}, ls.l.err
	}
	if err := c.Policy.Validate(); err != nil {
		return redisKeys{}, err
	}
	if !leasable(c.Policy.Algorithm) {
		return redisKeys{}, fmt.Errorf("%w: a lease is of a sliding log or a concurrency cap, not %s", ErrInvalidPolicy, c.Policy.Algorithm)
	}
	return ls.l.InGroup(g).redisKey(c.Key)
}

// leasable reports whether a rule of algorithm a can be leased to shards:
// a sliding log, whose windows a give keeps, or a concurrency cap, whose
// slots held it keeps (docs/INFLIGHT.md, "Across shards").
func leasable(a Algorithm) bool {
	return a.String() == SlidingLog.String() || a == Concurrency
}

// leaseHeld returns the key of what rule c holds in k's group, and the
// window a give keeps it within: its log and window, or a cap's slots and 0.
func leaseHeld(c Check, k redisKeys) (string, int64) {
	if c.Policy.Algorithm == Concurrency {
		return k.slots, 0
	}
	return k.window, c.Policy.Window.Microseconds()
}

// Open puts the whole of rule c in the pool when no lease of it exists
// there, and reports whether it did. Call it once the layout is set: a
// pool made again while shares are out would double them.
func (ls *Leases) Open(ctx context.Context, c Check) (bool, error) {
	k, err := ls.keys(c, DefaultGroup)
	if err != nil {
		return false, fmt.Errorf("throttle: open the leases of %s: %w", Quote(c.Key), err)
	}
	made, err := ls.l.rdb.HSetNX(ctx, k.lease, "s", LeaseParts).Result()
	if err != nil {
		return false, fmt.Errorf("throttle: open the leases of %s: %w", Quote(c.Key), err)
	}
	return made, nil
}

// Read returns group g's lease of rule c (DefaultGroup: the pool).
func (ls *Leases) Read(ctx context.Context, c Check, g string) (Lease, error) {
	fail := func(err error) (Lease, error) {
		return Lease{}, fmt.Errorf("throttle: read the lease of %s in %s: %w", Quote(c.Key), g, err)
	}
	k, err := ls.keys(c, g)
	if err != nil {
		return fail(err)
	}
	h, err := ls.l.rdb.HGetAll(ctx, k.lease).Result()
	if err != nil {
		return fail(err)
	}
	lease := Lease{Target: -1, Goal: -1}
	for f, v := range h {
		switch {
		case f == "s":
			lease.Share, err = strconv.ParseInt(v, 10, 64)
		case f == "t":
			lease.Target, err = strconv.ParseInt(v, 10, 64)
		case f == "g":
			lease.Goal, err = strconv.ParseInt(v, 10, 64)
		case strings.HasPrefix(f, "out:"):
			var m LeaseMove
			m, err = parseMove(strings.TrimPrefix(f, "out:"), v)
			lease.Out = append(lease.Out, m)
		}
		if err != nil {
			return fail(fmt.Errorf("field %s = %q: %w", f, v, err))
		}
	}
	return lease, nil
}

// parseMove reads a move as lease_give.lua writes it: "<to> <shares> <µs>".
func parseMove(id, v string) (LeaseMove, error) {
	f := strings.Fields(v)
	if len(f) != 3 {
		return LeaseMove{}, errors.New("not a move")
	}
	n, err1 := strconv.ParseInt(f[1], 10, 64)
	at, err2 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return LeaseMove{}, err
	}
	return LeaseMove{ID: id, To: f[0], Shares: n, At: time.UnixMicro(at)}, nil
}

// SetTarget sets where the balancer wants group g's share of rule c to go:
// g gives no lower than it. A negative target clears it.
func (ls *Leases) SetTarget(ctx context.Context, c Check, g string, target int64) error {
	k, err := ls.keys(c, g)
	if err == nil && target < 0 {
		err = ls.l.rdb.HDel(ctx, k.lease, "t").Err()
	} else if err == nil {
		err = ls.l.rdb.HSet(ctx, k.lease, "t", target).Err()
	}
	if err != nil {
		return fmt.Errorf("throttle: set the lease target of %s in %s: %w", Quote(c.Key), g, err)
	}
	return nil
}

// SetGoal sets the share the balancer wants group g to hold of rule c,
// which its lines pace their grants at while the share is on its way
// (docs/SCALING.md, "Moving a busy share").
func (ls *Leases) SetGoal(ctx context.Context, c Check, g string, goal int64) error {
	k, err := ls.keys(c, g)
	if err == nil {
		err = ls.l.rdb.HSet(ctx, k.lease, "g", goal).Err()
	}
	if err != nil {
		return fmt.Errorf("throttle: set the lease goal of %s in %s: %w", Quote(c.Key), g, err)
	}
	return nil
}

// Worth is what the lease is worth of a rule of limit, in units:
// floor(min(Share, Target) * limit / LeaseParts), as the scripts hold the
// group to it (lua/lease_worth.lua).
func (l Lease) Worth(limit int) int64 {
	share := l.Share
	if l.Target >= 0 {
		share = min(share, l.Target)
	}
	return share * int64(limit) / LeaseParts
}

// HeldBack reports whether rule c holds tasks back in group g: what its
// log holds in the window and ahead (or its slots) is at least what g's
// lease is worth at c's limit, and that is not nothing (a group whose
// share went elsewhere holds nothing back of its own). An adaptive rule over shards rises only
// then (docs/INFLIGHT.md, "Across shards").
func (ls *Leases) HeldBack(ctx context.Context, c Check, g string) (bool, error) {
	held, err := ls.Held(ctx, c, g)
	if err != nil {
		return false, err
	}
	lease, err := ls.Read(ctx, c, g)
	if err != nil {
		return false, err
	}
	worth := lease.Worth(c.Policy.Limit)
	return worth > 0 && held >= worth, nil
}

// Held returns the units group g's log of rule c holds in the window
// that ends now, and ahead: its admissions of the last window and its
// places in line; a cap's slots not lapsed (lua/lease_held.lua).
func (ls *Leases) Held(ctx context.Context, c Check, g string) (int64, error) {
	k, err := ls.keys(c, g)
	if err == nil {
		var n int64
		held, window := leaseHeld(c, k)
		n, err = lua.LeaseHeld.Run(ctx, ls.l.rdb, []string{held}, window).Int64()
		if err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("throttle: read what %s holds of %s: %w", g, Quote(c.Key), err)
}

// Move moves up to shares of rule c from group from to group to: from
// gives what no window of its log that ends now or later needs (a cap:
// what its slots held need), down to
// its target at most, then to takes it, then the move is settled. c is
// the rule as the workers check it: its limit, and its window with the
// margin, are what the give keeps the log's windows within. The take
// waits until a replica of the giver's master has the give, when it has
// replicas (acknowledged). It returns the shares moved. A failure after
// the give leaves the move to Recover: the shares are in neither lease
// meanwhile.
func (ls *Leases) Move(ctx context.Context, c Check, from, to string, shares int64) (int64, error) {
	if shares < 1 {
		return 0, fmt.Errorf("throttle: give shares of %s from %s to %s: %w: %d shares", Quote(c.Key), from, to, ErrInvalidConfig, shares)
	}
	id, err := moveID()
	if err != nil {
		return 0, err
	}
	given, err := ls.give(ctx, c, from, to, id, shares)
	if err != nil || given == 0 {
		return 0, err
	}
	return given, ls.complete(ctx, c, from, LeaseMove{ID: id, To: to, Shares: given})
}

// moveID returns a new move id.
func moveID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("throttle: a move id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// give runs the first step of move id: group from gives up to shares, and
// a replica of its master acknowledges it. Shares 0 confirms a give of id
// made before: it replies the shares given then, or 0 when id is settled.
func (ls *Leases) give(ctx context.Context, c Check, from, to, id string, shares int64) (int64, error) {
	fail := func(err error) (int64, error) {
		return 0, fmt.Errorf("throttle: give shares of %s from %s to %s: %w", Quote(c.Key), from, to, err)
	}
	if shares < 0 || to == "" || to == from {
		return fail(fmt.Errorf("%w: %d shares to %q", ErrInvalidConfig, shares, to))
	}
	k, err := ls.keys(c, from)
	if err != nil {
		return fail(err)
	}
	held, window := leaseHeld(c, k)
	n, err := ls.l.acknowledged(ctx, k.lease, func(r redis.Scripter) (int64, error) {
		return lua.LeaseGive.Run(ctx, r, []string{k.lease, held}, id, to, shares, c.Policy.Limit, window).Int64()
	})
	if err != nil {
		return fail(err)
	}
	return n, nil
}

// complete takes move m, which group from gave, and settles it once a
// replica of the receiver's master has the take.
func (ls *Leases) complete(ctx context.Context, c Check, from string, m LeaseMove) error {
	fail := func(err error) error {
		return fmt.Errorf("throttle: take move %s of %s from %s to %s: %w", m.ID, Quote(c.Key), from, m.To, err)
	}
	to, err := ls.keys(c, m.To)
	if err != nil {
		return fail(err)
	}
	if _, err := ls.l.acknowledged(ctx, to.lease, func(r redis.Scripter) (int64, error) {
		return lua.LeaseTake.Run(ctx, r, []string{to.lease, to.moves}, m.ID, m.Shares).Int64()
	}); err != nil {
		return fail(err)
	}
	k, err := ls.keys(c, from)
	if err == nil {
		err = ls.l.rdb.HDel(ctx, k.lease, "out:"+m.ID).Err()
	}
	if err != nil {
		return fail(err)
	}
	return nil
}

// moveMemory is how long a group remembers a move it took
// (lua/lease_take.lua keeps it an hour), less a margin: Recover leaves an
// older move alone, since its take could not tell it had run.
const moveMemory = 50 * time.Minute

// Recover completes the moves of rule c that group g gave more than
// older ago and that were never settled (a mover stopped between its
// steps), and returns how many it completed. A move taken already is
// only settled: the take runs once per move. A move older than the
// receiver remembers (50 minutes) is left: its shares may be lost, never
// doubled, until the rule's leases are reset.
func (ls *Leases) Recover(ctx context.Context, c Check, g string, older time.Duration) (int, error) {
	lease, err := ls.Read(ctx, c, g)
	if err != nil {
		return 0, err
	}
	now, err := ls.l.rdb.Time(ctx).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("throttle: recover the moves of %s in %s: %w", Quote(c.Key), g, err)
	}
	done := 0
	var late error // moves no replica acknowledged yet: left for the next recovery
	for _, m := range lease.Out {
		if age := now.Sub(m.At); age < older || age > moveMemory {
			continue
		}
		// The give first, acknowledged by a replica: a give its master
		// lost before a replica had it must not be taken.
		given, err := ls.give(ctx, c, g, m.To, m.ID, 0)
		if err == nil && given > 0 {
			err = ls.complete(ctx, c, g, m)
			if err == nil {
				done++
			}
		}
		if errors.Is(err, ErrNotReplicated) {
			late = errors.Join(late, err)
		} else if err != nil {
			return done, err
		}
	}
	return done, late
}
