package throttle

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/entrance"
)

// Errors for bad input, matched with errors.Is. A call that returns one of
// them has sent nothing to Redis.
var (
	// ErrInvalidKey reports an empty key, a key whose group is empty, an
	// AllowMulti or AllowInLine call with no checks, or an AllowInLine call
	// with an empty caller id.
	ErrInvalidKey = errors.New("invalid key")

	// ErrInvalidPolicy reports a Policy whose Limit or Window is out of range,
	// or whose Algorithm is not one of Algorithms.
	ErrInvalidPolicy = errors.New("invalid policy")

	// ErrInvalidCost reports a cost below 1 or above the policy's Limit: the
	// n of AllowN, or a Check's Cost (0 included).
	ErrInvalidCost = errors.New("invalid cost")

	// ErrDuplicateKey reports a key given twice to one AllowMulti call.
	ErrDuplicateKey = errors.New("duplicate key")

	// ErrMixedGroups reports an AllowMulti call over keys of different
	// groups: they may live on different Redis Cluster nodes, where no single
	// script can check them atomically.
	ErrMixedGroups = errors.New("keys in different groups")

	// ErrInvalidConfig reports a Limiter built with a nil client or a bad
	// option; every call of such a Limiter returns it.
	ErrInvalidConfig = errors.New("invalid limiter configuration")

	// ErrNotWoken: Wake, Refresh, Drop or Enter did what it was asked, but Redis
	// refused to publish the wake-up (Wakeups), so other processes' dispatch
	// loops see it at their next look, within a second, not at once.
	ErrNotWoken = entrance.ErrNotWoken
)

// Quote quotes s for an error message or a response, as %q does, cut short
// after 64 bytes so that a 1 MB key does not make a 1 MB message: the
// cut string is followed by "... (N bytes)", N being len(s). The cut backs
// off to the start of a UTF-8 character rather than split one into escaped
// bytes. The limiter's errors and throttle/httplimit's quote keys, groups,
// names and addresses with it, so all read alike.
func Quote(s string) string {
	const max = 64
	if len(s) <= max {
		return fmt.Sprintf("%q", s)
	}
	cut := max
	for cut > max-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:cut], len(s))
}
