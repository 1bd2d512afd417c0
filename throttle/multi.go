package throttle

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/lua"
)

// Check is one key held to one policy, for AllowMulti.
type Check struct {
	// Key names the window; see the package documentation for how it maps to
	// a Redis key.
	Key string

	// Policy is the limit the key is held to.
	Policy Policy

	// Cost is the number of units the request takes from this key's window,
	// 1 to Policy.Limit. There is no default: 0 is an error (ErrInvalidCost),
	// as it is for AllowN, so a forgotten Cost cannot pass unnoticed.
	Cost int

	// Leased marks a global rule split over the groups of a layout of
	// shards (docs/SCALING.md): a sliding log or a concurrency cap whose
	// limit in a group is what the group's lease of it is worth (Leases;
	// a cap's, docs/INFLIGHT.md, "Across shards"). In line, a caller
	// is placed at most one window ahead in it; one that would be placed
	// further, or whose lease is worth less than its cost, takes no place
	// and is told to come back in BalancePeriod.
	Leased bool
}

// MultiDecision is the outcome of AllowMulti.
type MultiDecision struct {
	// Decision is the strictest of the checks: Allowed only when every check
	// allows; RetryAfter and ResetAfter the largest of all checks; Remaining
	// the smallest. Limit and Count are those of the check at Denied, or of
	// the check with the least Remaining when allowed.
	Decision

	// Denied is the index of the check that set the request's time (the
	// latest of all), or -1 when the request was allowed.
	Denied int

	// Early reports, from AllowInLine, a caller that came back before its
	// place: it keeps the place, RetryAfter is the time left until it, and
	// nothing changed in Redis. It is not a new denial.
	Early bool

	// Checks holds each check's own decision, in the order given. When the
	// request is denied nothing was admitted, so a check may report Allowed
	// (it alone would have admitted) with its Count unchanged but for a
	// place reserved by AllowInLine.
	Checks []Decision

	// At is, for an admission, the time its entries stand at in its
	// sliding logs, by the Redis clock: the decision's, or the place's
	// for a caller admitted as of its place (the record of admissions,
	// docs/SCALING.md); zero otherwise.
	At time.Time
}

// AllowMulti decides whether a request fits every check at once, and records
// it in every window only if so: all or nothing, in one atomic script. When
// denied, RetryAfter is the earliest time at which it fits every check at
// once if nothing else is admitted, counting the places others hold in line. This is
// how a task is held to its tenant's quota, its provider's account-wide limit
// and a daily cap together, or a key to a burst and a sustained limit (give
// each its own key: see "One window per key" in the package documentation).
// All keys must be distinct and in one group (see WithGroup); with the
// default grouping any keys combine. Every Check needs a Cost of 1 to its
// Limit. With no checks it returns an error wrapping ErrInvalidKey.
func (l *Limiter) AllowMulti(ctx context.Context, checks []Check) (MultiDecision, error) {
	md, _, err := l.decide(ctx, "allow", modeAllow, "", checks)
	return md, err
}

// AllowInLine is AllowMulti for callers that come back when told, such as
// queued tasks; id names the caller across its returns (a task ID is right).
//
// A denied caller takes a place: the earliest time at which it fits every
// check, counting the places already given, is reserved for it in every
// sliding-log window (it counts there from then on, as an admission would),
// and RetryAfter is the time until it. So the k-th caller of a backlog is
// sent back to the k-th free slot, one slot after another, instead of all to
// the exit of the oldest entry, where all but one would be denied again; and
// a place, once given, is kept: no later caller can take its slot, in any of
// the checks.
//
// Back before its place, the caller is told the time left (Early) and
// nothing changes. Back at its place, or up to the line tolerance after it
// (see WithLineTolerance), it is admitted as of its place. Later than that,
// its place is dropped and it is placed again, as a new caller. A place
// whose caller never comes back (a deleted task) takes its slot anyway.
// Checks of the counter algorithms (see Algorithm) reserve nothing: their
// retry time is advice. Per-check decisions in Checks hold each check's own
// RetryAfter.
func (l *Limiter) AllowInLine(ctx context.Context, id string, checks []Check) (MultiDecision, error) {
	if id == "" {
		return MultiDecision{}, fmt.Errorf("throttle: allow in line %s: %w: the caller id is empty", describe(checks), ErrInvalidKey)
	}
	md, _, err := l.decide(ctx, "allow in line", modeLine, id, checks)
	return md, err
}

// Modes of the decision script, its ARGV[1].
const (
	modePeek  = "0" // record nothing
	modeAllow = "1" // record when every check allows
	modeLine  = "2" // as modeAllow, and a denied caller takes a place in line
	modeUsage = "3" // as modePeek, and the reply counts the places in line
)

// decide validates checks, runs the decision script once over all of them in
// the given mode, and reads the reply. id is the caller of modeLine. places
// is what modeUsage adds to the reply, two counts a check (see
// lua/decide.lua); nil in the other modes.
func (l *Limiter) decide(ctx context.Context, op, mode, id string, checks []Check) (md MultiDecision, places []int64, err error) {
	if l.err != nil {
		return MultiDecision{}, nil, l.err
	}
	fail := func(err error) (MultiDecision, []int64, error) {
		return MultiDecision{}, nil, fmt.Errorf("throttle: %s %s: %w", op, describe(checks), err)
	}
	keys, _, err := l.resolve(checks)
	if err != nil {
		return fail(err)
	}
	if id == "" && (mode == modeAllow || mode == modeLine) && slices.ContainsFunc(checks, isCap) {
		return fail(fmt.Errorf("%w: a concurrency cap names its slot by the caller's id: use AllowInLine", ErrInvalidKey))
	}
	n := len(checks)
	args := make([]any, 3, 3+4*n)
	args[0], args[1], args[2] = mode, id, 0
	if mode == modeLine {
		args[2] = l.lineTolerance.Microseconds()
	}
	for _, c := range checks {
		args = append(args, c.Policy.Limit, c.Policy.Window.Microseconds(), c.Cost, c.Policy.Algorithm.String())
	}

	all := withFrontiers(keys)
	for i, c := range checks {
		if c.Leased {
			all = append(all, leaseOf(keys[i]))
		}
	}
	reply, err := l.eval(ctx, all, args)
	if err != nil {
		return fail(err)
	}
	if len(reply) == n+1 && (mode == modeAllow || mode == modeLine) {
		reply = admitted(reply, checks)
	}
	want := 5 + 4*n
	if mode == modeUsage {
		want += 2 * n
	}
	if len(reply) != want {
		return fail(fmt.Errorf("decision script replied %d values for %d keys", len(reply), n))
	}
	if mode == modeUsage {
		places = reply[4+4*n : want-1]
	}
	decided := readReply(reply[:4+4*n], checks)
	if at := reply[want-1]; at > 0 {
		decided.At = time.UnixMicro(at)
	}
	return decided, places, nil
}

// resolve validates checks, which must be at least one, and returns the
// Redis key of each and their group's encoded name (the hash tag). An error
// names the check at fault when there are several.
func (l *Limiter) resolve(checks []Check) (keys []string, group string, err error) {
	n := len(checks)
	if n == 0 {
		return nil, "", fmt.Errorf("%w: no checks", ErrInvalidKey)
	}
	failCheck := func(c Check, err error) ([]string, string, error) {
		if n > 1 {
			err = fmt.Errorf("key %s: %w", Quote(c.Key), err)
		}
		return nil, "", err
	}
	keys = make([]string, n)
	for i, c := range checks {
		rk, err := l.redisKey(c.Key)
		if err != nil {
			return failCheck(c, err)
		}
		if err := c.Policy.Validate(); err != nil {
			return failCheck(c, err)
		}
		if c.Cost < 1 || c.Cost > c.Policy.Limit {
			return failCheck(c, fmt.Errorf("%w: cost %d is not 1 to the limit %d", ErrInvalidCost, c.Cost, c.Policy.Limit))
		}
		if c.Policy.Algorithm == Concurrency && c.Cost != 1 {
			return failCheck(c, fmt.Errorf("%w: cost %d: a concurrency cap takes one slot a caller", ErrInvalidCost, c.Cost))
		}
		if c.Leased && !leasable(c.Policy.Algorithm) {
			return failCheck(c, fmt.Errorf("%w: a leased rule is a sliding log or a concurrency cap, not %s", ErrInvalidPolicy, c.Policy.Algorithm))
		}
		if i == 0 {
			group = rk.group
		} else if rk.group != group {
			return nil, "", fmt.Errorf("%w: key %s is in group %s, key %s in %s", ErrMixedGroups,
				Quote(checks[0].Key), Quote(l.group(checks[0].Key)), Quote(c.Key), Quote(l.group(c.Key)))
		}
		key := rk.forAlgorithm(c.Policy.Algorithm)
		if slices.Contains(keys[:i], key) {
			return nil, "", fmt.Errorf("%w: key %s is given twice", ErrDuplicateKey, Quote(c.Key))
		}
		keys[i] = key
	}
	return keys, group, nil
}

// eval runs the decision script, through the batcher when the Limiter has
// one (WithBatching).
func (l *Limiter) eval(ctx context.Context, keys []string, args []any) ([]int64, error) {
	if l.batch != nil {
		return l.batch.eval(ctx, keys, args)
	}
	return scriptReply(scriptFor(args).Run(ctx, l.rdb, keys, args...))
}

// describe names the keys of a call for an error message.
func describe(checks []Check) string {
	switch len(checks) {
	case 0:
		return "no keys"
	case 1:
		return Quote(checks[0].Key)
	}
	return Quote(checks[0].Key) + " and " + strconv.Itoa(len(checks)-1) + " more"
}

// scriptFor returns the script that runs a call of the given ARGV: peek.lua
// for modePeek and modeUsage, decide.lua for the others.
func scriptFor(args []any) *redis.Script {
	if args[0] == modePeek || args[0] == modeUsage {
		return lua.Peek
	}
	return lua.Decide
}
