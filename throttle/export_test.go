package throttle

import (
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/lua"
)

// ClockedLines returns a copy of ls whose script reads its clock from the
// hash clockKey (fields s and us, seconds and microseconds) instead of
// TIME, so that a test runs its calls at times of its choosing. clockKey
// must share the lines' hash slot. Its windows' keys live an hour longer
// than they need: their TTLs run in Redis's own time, which a simulation
// on a busy machine may run slower than, and a log that expired while its
// simulated window still holds it would admit too much.
func ClockedLines(ls *Lines, clockKey string) *Lines {
	src := lua.FairSource()
	for _, r := range []struct{ old, new string }{
		{"local t = redis.call('TIME')", "local t = redis.call('HMGET', '" + clockKey + "', 's', 'us')"},
		{"local need = math.floor((p + w - now) / 1000) + 1", "local need = math.floor((p + w - now) / 1000) + 3600001"},
		{"local ttl = math.floor(ARGV[i + 2] / 1000) + 1", "local ttl = math.floor(ARGV[i + 2] / 1000) + 3600001"},
		{"redis.call('PEXPIRE', key, floor(reset / 1000) + 1)", "redis.call('PEXPIRE', key, floor(reset / 1000) + 3600001)"},
	} {
		if strings.Count(src, r.old) != 1 {
			panic("fair.lua: not there once: " + r.old)
		}
		src = strings.Replace(src, r.old, r.new, 1)
	}
	return &Lines{l: ls.l, cfg: ls.cfg, script: redis.NewScript(src)}
}

// arrivalGuards are the reads that guard fair.lua's admission at once: the
// task's entry, its class's wake time and a lapsed grant.
const arrivalGuards = `  arrival = redis.call('HGET', ktasks, id)
  if not arrival and ARGV[15] then
    wake = redis.call('ZSCORE', kwake, c)
  end
  if not arrival and ARGV[15] and not wake and
    redis.call('ZCOUNT', kgrants, '-inf', now - late - 1) == 0 then
`

// LinesWithoutGuards returns a copy of ls whose script admits an arrival by
// its first common case without the three reads that guard it: what they
// cost, for BenchmarkArrivalGuards. It decides rightly only while nothing
// waits and no task holds a grant.
func LinesWithoutGuards(ls *Lines) *Lines {
	src := lua.FairSource()
	if strings.Count(src, arrivalGuards) != 1 {
		panic("fair.lua: its arrival's guards are not there once")
	}
	src = strings.Replace(src, arrivalGuards, "  if ARGV[15] then\n", 1)
	return &Lines{l: ls.l, cfg: ls.cfg, script: redis.NewScript(src)}
}

// ScriptReply reads the reply of allow.lua, run by a test over checks of
// the given windows (microseconds), as the full reply of 4 + 4n integers
// (4 + 6n in usage mode), whichever form the script replied in.
func ScriptReply(cmd *redis.Cmd, windows ...int64) ([]int64, error) {
	reply, err := scriptReply(cmd)
	if err != nil || len(reply) != len(windows) {
		return reply, err
	}
	checks := make([]Check, len(windows))
	for i, w := range windows {
		checks[i].Policy.Window = time.Duration(w) * time.Microsecond
	}
	return admitted(reply, checks), nil
}

// WithFrontiers returns keys followed by their frontier notes: the KEYS of
// a raw call of allow.lua.
var WithFrontiers = withFrontiers
