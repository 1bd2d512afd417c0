// Package lua holds Sluice's Redis scripts. The scripts live as .lua files
// beside this file, each opening with a comment that lists its KEYS, ARGV and
// reply; this package embeds them and exports them ready to run.
//
// Run a script with its Run method: it calls EVALSHA and falls back on EVAL
// when Redis answers NOSCRIPT (after a restart or SCRIPT FLUSH).
package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed allow.lua
var allowSource string

// Allow is the sliding-window log decision over one or more keys, all or
// nothing: see allow.lua for its KEYS, ARGV and reply.
var Allow = redis.NewScript(allowSource)

// AllowSource returns the text of allow.lua, the script Allow runs. Tests use
// it to build variants, such as one whose clock is fixed.
func AllowSource() string { return allowSource }
