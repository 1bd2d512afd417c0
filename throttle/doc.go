// Package throttle is Sluice's rate limiter: an exact sliding-window log kept
// in Redis, shared by every worker that talks to the same Redis.
//
// Each limited key is one sorted set holding one member per admitted unit of
// cost, scored by its admission time on the Redis clock. A decision is one Lua
// script (see package lua): it drops the entries that have left the window,
// counts the rest, admits the request if count + cost <= limit and records it,
// and refreshes the key's expiry. Because the whole decision runs inside
// Redis, any number of goroutines and processes can share a key and the limit
// still holds exactly; because the clock is Redis's, workers on different
// machines agree on time.
//
// A denial is a Decision with Allowed false and an exact RetryAfter: the time
// until enough entries leave the window for this request to fit. Denied
// requests are not recorded, so a caller that keeps asking is not held back
// longer than its quota says. Errors mean Redis failed or the input was bad;
// bad input is reported before anything is sent to Redis and can be matched
// with errors.Is against ErrInvalidKey, ErrInvalidPolicy, ErrInvalidCost,
// ErrDuplicateKey and ErrMixedGroups.
//
// Policies travel with each call and are never stored: changing a Limit or a
// Window applies at once to keys that already hold entries.
//
// # One window per key
//
// A key has one Window. Every call prunes the key's entries older than the
// calling policy's Window, so alternating PerSecond and PerMinute on the same
// key drops, at each per-second call, the entries the per-minute policy still
// needed: the longer window under-counts and admits more than its limit. To
// hold a caller to a burst limit and a sustained one, give each its own key
// and check both with AllowMulti:
//
//	l.AllowMulti(ctx, []throttle.Check{
//		{Key: "acme:sec", Policy: throttle.PerSecond(10), Cost: 1},
//		{Key: "acme:min", Policy: throttle.PerMinute(300), Cost: 1},
//	})
//
// Cost is 1 to the policy's Limit everywhere: AllowN's n and every Check's
// Cost. A Cost of 0 is ErrInvalidCost, not a default of 1.
//
// # Algorithms
//
// That log is the default. Policy.Algorithm chooses one of three others that
// keep a few numbers per key whatever the Limit (about 140 bytes of Redis
// memory, where a full log of 10,000 units takes 1.3 MB) and allow limits up
// to MaxCounterLimit, at the cost of exactness: SlidingWindow, the
// sliding-window counter; GCRA, the generic cell rate algorithm; and
// FixedWindow. Each can admit up to about twice the Limit in some span of one
// Window; see Algorithm, and docs/LIMITER.md for their measured memory and
// error. Checks of different algorithms combine in one AllowMulti.
//
// # Places in line
//
// AllowInLine is for callers that come back when told, such as queued tasks.
// A denied caller's place, the earliest time at which it fits every check
// counting the places given before, is reserved in every sliding-log window
// as a member scored at that time, so that no later caller can take its
// slot; back at its place (within WithLineTolerance), it is admitted as of
// it. A backlog denied at once is thus sent back one slot after another,
// not all to the exit of the oldest entry, and a place given by one check
// (a tenant's quota) holds its slot in the others (the provider's limit).
//
// # Batching
//
// A Limiter sends the decisions that goroutines ask for at the same time
// to Redis as one pipeline, each still its own atomic script with its own
// reply: fewer round trips and system calls when many goroutines share a
// Limiter, and no wait when they do not. WithBatching tunes it;
// WithoutBatching turns it off.
//
// # Keys
//
// Any non-empty string is a key. The Redis key is
//
//	<prefix>{<group>}:<body>
//
// (the other algorithms keep a hash beside it: <prefix>{<group>}sw:<body>,
// gcra:<body> or fw:<body>; see RedisKeyFor; a log that gives places in
// line keeps a note of how far it is full at p:<body>) where prefix is "sluice:"
// unless WithPrefix says otherwise, group is the
// key's group (see WithGroup; "limits" unless set) and body is the key itself.
// In group and body the characters % # { } are percent-encoded, so a key can
// neither end the hash tag nor pass for another key; a key longer than
// MaxRawKeyLen bytes is replaced by "#" and the hex SHA-256 of the key.
// Redis Cluster places a key by its hash tag, the group: keys of one group
// share a hash slot, and that is what lets AllowMulti check several keys in one
// atomic script. By default every key is in the group "limits", so any keys
// can be combined, on one Redis or on Cluster; WithGroup spreads keys over the
// cluster when calls only ever combine keys of the same group.
package throttle
