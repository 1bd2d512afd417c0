// Package lua holds Sluice's Redis scripts. The scripts live as .lua files
// beside this file, each opening with a comment that lists its KEYS, ARGV and
// reply (or, for a chunk that other scripts include, its functions); this
// package embeds them and exports them ready to run.
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

//go:embed allow.lua
var allowSource string

// allowScript is the text Allow runs: counters.lua, which defines the
// functions of the O(1)-memory algorithms, then allow.lua, which calls them.
var allowScript = countersSource + "\n" + allowSource

// Allow is the decision over one or more keys, all or nothing: see allow.lua
// for its KEYS, ARGV and reply, and counters.lua for the algorithms other
// than the sliding-window log.
var Allow = redis.NewScript(allowScript)

// AllowSource returns the text of the script Allow runs: counters.lua, a
// newline, then allow.lua. Tests use it to build variants, such as one whose
// clock is fixed.
func AllowSource() string { return allowScript }

// CountersSource returns the text of counters.lua: a chunk that defines the
// local functions counter_check and counter_record and nothing global. Tests
// put it in front of a driver of their own to call the functions directly.
func CountersSource() string { return countersSource }

//go:embed fair.lua
var fairSource string

// fairScript is the text Fair runs: counters.lua, then fair.lua.
var fairScript = countersSource + "\n" + fairSource

// Fair runs the fair lines of waiting tasks and their grants: see fair.lua
// for its KEYS, ARGV and reply, and docs/FAIRNESS.md for the design.
var Fair = redis.NewScript(fairScript)

// FairSource returns the text of the script Fair runs, for tests that build
// variants of it, such as one whose clock is fixed.
func FairSource() string { return fairScript }

//go:embed restamp.lua
var restampSource string

// Restamp moves a late send's admission in the fair lines to now: see
// restamp.lua for its KEYS, ARGV and reply.
var Restamp = redis.NewScript(restampSource)

//go:embed waits.lua
var waitsSource string

// Waits says whether a class waits in the fair lines with a dispatch loop
// serving it: see waits.lua for its KEYS, ARGV and reply.
var Waits = redis.NewScript(waitsSource)

//go:embed resetlines.lua
var resetLinesSource string

// ResetLines empties the fair lines of one class, whatever its keys hold:
// see resetlines.lua for its KEYS, ARGV and reply.
var ResetLines = redis.NewScript(resetLinesSource)
