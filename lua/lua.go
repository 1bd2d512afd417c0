// Package lua holds Sluice's Redis scripts, one per operation. The scripts
// live as .lua files beside this file, each opening with a comment that
// lists its KEYS, ARGV and reply; a line "-- #include FILE" puts in a chunk
// of helpers that several scripts share. This package embeds them and
// exports them ready to run.
//
// Run a script with its Run method: it calls EVALSHA and falls back on EVAL
// when Redis answers NOSCRIPT (after a restart or SCRIPT FLUSH).
package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed counters.lua
var countersSource string

// Decide is the limiter's decision over one or more keys, all or nothing,
// recorded (Allow, AllowMulti, line mode): see decide.lua for its KEYS,
// ARGV and reply, and counters.lua for the algorithms other than the
// sliding-window log.
var Decide = redis.NewScript(load("decide.lua"))

// Peek is what Decide would decide, recording nothing (Peek, Usage): see
// peek.lua.
var Peek = redis.NewScript(load("peek.lua"))

// DecideSource returns the text Decide runs, its includes in place. Tests
// use it to build variants, such as one whose clock is fixed.
func DecideSource() string { return load("decide.lua") }

// PeekSource returns the text Peek runs, its includes in place.
func PeekSource() string { return load("peek.lua") }

// CountersSource returns the text of counters.lua: a chunk that defines the
// local functions counter_check and counter_record and nothing global. Tests
// put it in front of a driver of their own to call the functions directly.
func CountersSource() string { return countersSource }

// Restamp moves a late send's admission in the fair lines to now: see
// restamp.lua for its KEYS, ARGV and reply.
var Restamp = redis.NewScript(load("restamp.lua"))

// ResetLines empties the fair lines of one class, whatever its keys hold:
// see resetlines.lua for its KEYS, ARGV and reply.
var ResetLines = redis.NewScript(load("resetlines.lua"))

// LeaseGive is the first step of moving a share of a global rule between
// shards: see lease_give.lua for its KEYS, ARGV and reply.
var LeaseGive = redis.NewScript(load("lease_give.lua"))

// LeaseTake is the second step, once per move: see lease_take.lua.
var LeaseTake = redis.NewScript(load("lease_take.lua"))

// LeaseHeld counts what a group's log of a global rule holds in the
// window that ends now, and ahead: see lease_held.lua.
var LeaseHeld = redis.NewScript(load("lease_held.lua"))

// Claim takes or renews a role one process plays at a time: see claim.lua.
var Claim = redis.NewScript(load("claim.lua"))

// SlotsRenew renews a holder's slots in its caps: see slots_renew.lua.
var SlotsRenew = redis.NewScript(load("slots_renew.lua"))

// SlotsRelease frees a holder's slots in its caps and wakes its class's
// fair lines: see slots_release.lua.
var SlotsRelease = redis.NewScript(load("slots_release.lua"))

// Adapt moves an adaptive rule's limit in force after a provider's
// answer: see adapt.lua.
var Adapt = redis.NewScript(load("adapt.lua"))
