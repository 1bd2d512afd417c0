package throttle

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/lua"
)

// ClockedLines returns a copy of ls whose scripts read their clock from the
// hash clockKey (fields s and us, seconds and microseconds) instead of
// TIME, so that a test runs its calls at times of its choosing. clockKey
// must share the lines' hash slot. Its windows' keys live an hour longer
// than they need: their TTLs run in Redis's own time, which a simulation
// on a busy machine may run slower than, and a log that expired while its
// simulated window still holds it would admit too much.
func ClockedLines(ls *Lines, clockKey string) *Lines {
	edits := []struct{ old, new string }{
		{"local clock = redis.call('TIME')", "local clock = (redis.raw or redis).call('HMGET', '" + clockKey + "', 's', 'us')"},
		{"local need = math.floor((place + window - now) / 1000) + 1", "local need = math.floor((place + window - now) / 1000) + 3600001"},
		{"local ttl = math.floor(ARGV[i + 2] / 1000) + 1", "local ttl = math.floor(ARGV[i + 2] / 1000) + 3600001"},
		{"redis.call('PEXPIRE', key, floor(reset / 1000) + 1)", "redis.call('PEXPIRE', key, floor(reset / 1000) + 3600001)"},
	}
	scripts := lua.NewLineScripts(func(name, src string) string {
		for i, r := range edits {
			n := strings.Count(src, r.old)
			if n > 1 || (n == 0 && (i == 0 || name == "arrive.lua")) {
				panic(name + ": not there once: " + r.old)
			}
			src = strings.Replace(src, r.old, r.new, 1)
		}
		return src
	})
	return &Lines{l: ls.l, cfg: ls.cfg, scripts: scripts}
}

// arrivalGuards are the reads that guard arrive.lua's admission at once: the
// task's entry, its class's wake time and a lapsed grant.
const arrivalGuards = `local known = redis.call('HGET', ktasks, id)
local wakeAt
if not known and allLogs then
  wakeAt = redis.call('ZSCORE', kwake, class)
end
if not known and allLogs and not wakeAt and
  redis.call('ZCOUNT', kgrants, '-inf', now - late - 1) == 0 then
`

// LinesWithoutGuards returns a copy of ls whose arrive script admits an
// arrival by its first common case without the three reads that guard it:
// what they cost, for BenchmarkArrivalGuards. It decides rightly only while
// nothing waits and no task holds a grant.
func LinesWithoutGuards(ls *Lines) *Lines {
	scripts := ls.scripts
	scripts.Arrive = lua.NewLineScripts(func(name, src string) string {
		if name != "arrive.lua" {
			return src
		}
		if strings.Count(src, arrivalGuards) != 1 {
			panic("arrive.lua: its arrival's guards are not there once")
		}
		return strings.Replace(src, arrivalGuards, "local known, wakeAt\nif allLogs then\n", 1)
	}).Arrive
	return &Lines{l: ls.l, cfg: ls.cfg, scripts: scripts}
}

// ScriptReply reads the reply of decide.lua, run by a test over checks of
// the given windows (microseconds), as the full reply of 4 + 4n integers
// (4 + 6n in usage mode), whichever form the script replied in.
func ScriptReply(cmd *redis.Cmd, windows ...int64) ([]int64, error) {
	reply, err := scriptReply(cmd)
	if err != nil || len(reply) != len(windows)+1 {
		return reply, err
	}
	checks := make([]Check, len(windows))
	for i, w := range windows {
		checks[i].Policy.Window = time.Duration(w) * time.Microsecond
	}
	return admitted(reply, checks), nil
}

// WithFrontiers returns keys followed by their frontier notes: the KEYS of
// a raw call of decide.lua.
var WithFrontiers = withFrontiers

// GiveOnly runs the first step of a move alone, as a mover that stops
// before the take leaves it.
func (ls *Leases) GiveOnly(ctx context.Context, c Check, from, to, id string, shares int64) (int64, error) {
	return ls.give(ctx, c, from, to, id, shares)
}

// TakeOnly runs the second step of a move alone, as a mover that stops
// before it settles the move.
func (ls *Leases) TakeOnly(ctx context.Context, c Check, to, id string, shares int64) error {
	k, err := ls.keys(c, to)
	if err != nil {
		return err
	}
	return lua.LeaseTake.Run(ctx, ls.l.rdb, []string{k.lease, k.moves}, id, shares).Err()
}
