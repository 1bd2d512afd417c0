package throttle

import (
	"errors"
	"fmt"
)

// Errors for bad input, matched with errors.Is. A call that returns one of
// them has sent nothing to Redis.
var (
	// ErrInvalidKey reports an empty key, or a key whose group is empty.
	ErrInvalidKey = errors.New("invalid key")

	// ErrInvalidPolicy reports a Policy whose Limit or Window is out of range.
	ErrInvalidPolicy = errors.New("invalid policy")

	// ErrInvalidCost reports a cost below 1 or above the policy's Limit.
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
)

// quoteKey quotes a key for an error message, cut short so that a 1 MB key
// does not make a 1 MB message.
func quoteKey(key string) string {
	const max = 64
	if len(key) <= max {
		return fmt.Sprintf("%q", key)
	}
	return fmt.Sprintf("%q... (%d bytes)", key[:max], len(key))
}
