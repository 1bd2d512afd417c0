package throttle

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/lua"
)

// Claim takes the balancing of b's class for holder, or renews it, for
// ttl; it reports whether holder holds it now. Workers step a Balancer
// only while they hold its claim: two at once are safe (Leases) but churn.
// holder must be unique per process. A claim taken, not renewed, makes the
// next Step wake every group.
func (b *Balancer) Claim(ctx context.Context, holder string, ttl time.Duration) (bool, error) {
	if holder == "" || ttl < time.Millisecond {
		return false, fmt.Errorf("throttle: %w: a claim needs a holder and a ttl of 1 ms or more", ErrInvalidConfig)
	}
	key := b.l.prefix + "{" + encodeKeyPart(DefaultGroup) + "}claim:balancer:" + encodeKeyPart(b.class)
	n, err := lua.Claim.Run(ctx, b.l.rdb, []string{key}, holder, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("throttle: claim the balancing of %s: %w", b.class, err)
	}
	if n == 2 {
		// Taken over: the last holder may have stopped between a share's
		// take and its wake, so the next Step wakes every group.
		for i := range b.owed {
			b.owed[i] = true
		}
	}
	return n > 0, nil
}
