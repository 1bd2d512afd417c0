package throttle

import (
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/lua"
)

// ClockedLines returns a copy of ls whose script reads its clock from the
// hash clockKey (fields s and us, seconds and microseconds) instead of
// TIME, so that a test runs its calls at times of its choosing. clockKey
// must share the lines' hash slot.
func ClockedLines(ls *Lines, clockKey string) *Lines {
	const clockLine = "local t = redis.call('TIME')"
	src := lua.FairSource()
	if strings.Count(src, clockLine) != 1 {
		panic("fair.lua: the clock line is not there once")
	}
	src = strings.Replace(src, clockLine, "local t = redis.call('HMGET', '"+clockKey+"', 's', 'us')", 1)
	return &Lines{l: ls.l, cfg: ls.cfg, script: redis.NewScript(src)}
}
