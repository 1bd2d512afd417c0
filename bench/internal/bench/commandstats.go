package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// commandStats is a line of INFO commandstats: calls of a command since the
// statistics were last reset, and the microseconds Redis spent in them.
// Redis counts a command that a script runs in the command's own line as
// well as in the script's (EVALSHA) time.
type commandStats struct{ calls, usec int64 }

// CommandCost is what one Redis command cost per task over a measurement,
// from INFO commandstats: EVALSHA is every script call, its time including
// that of the commands it ran, which are counted in their own lines too.
type CommandCost struct {
	Command      string  `json:"command"`        // lower case, as INFO names it: "evalsha", "zadd", ...
	CallsPerTask float64 `json:"calls_per_task"` // calls over tasks
	UsPerTask    float64 `json:"us_per_task"`    // Redis's own time in the calls over tasks, µs
}

// evalshaStats returns the commandstats of EVALSHA, zero when it has not run.
func evalshaStats(ctx context.Context, rdb *redis.Client) (commandStats, error) {
	all, err := redisCommands(ctx, rdb)
	return all["evalsha"], err
}

// redisCommands returns every line of INFO commandstats by command name.
func redisCommands(ctx context.Context, rdb *redis.Client) (map[string]commandStats, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO commandstats: %w", err)
	}
	return parseAllCommandStats(info), nil
}

// parseCommandStats reads the line "cmdstat_<name>:calls=N,usec=N,..." of
// INFO commandstats.
func parseCommandStats(info, name string) commandStats {
	return parseAllCommandStats(info)[name]
}

// parseAllCommandStats reads every line "cmdstat_<name>:calls=N,usec=N,..."
// of INFO commandstats, by name ("evalsha", "config|get", ...).
func parseAllCommandStats(info string) map[string]commandStats {
	all := map[string]commandStats{}
	for line := range strings.Lines(info) {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isStat := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isStat {
			continue
		}
		var cs commandStats
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				cs.calls = n
			case "usec":
				cs.usec = n
			}
		}
		all[name] = cs
	}
	return all
}

// commandCosts returns what each command cost per task between two reads
// of INFO commandstats, the dearest first, leaving out the commands the
// measurement itself runs (INFO) and those that did not run.
func commandCosts(before, after map[string]commandStats, tasks int) []CommandCost {
	var out []CommandCost
	for name, a := range after {
		b := before[name]
		if name == "info" || a.calls == b.calls || tasks <= 0 {
			continue
		}
		out = append(out, CommandCost{Command: name,
			CallsPerTask: float64(a.calls-b.calls) / float64(tasks), UsPerTask: float64(a.usec-b.usec) / float64(tasks)})
	}
	slices.SortFunc(out, func(x, y CommandCost) int {
		return cmp.Or(cmp.Compare(y.UsPerTask, x.UsPerTask), strings.Compare(x.Command, y.Command))
	})
	return out
}

// medianCosts is each command's median over rounds, per task: a command
// missing from a round counts as zero there.
func medianCosts(rounds [][]CommandCost) []CommandCost {
	byName := map[string][2][]float64{}
	for _, r := range rounds {
		for _, c := range r {
			v := byName[c.Command]
			v[0], v[1] = append(v[0], c.CallsPerTask), append(v[1], c.UsPerTask)
			byName[c.Command] = v
		}
	}
	var out []CommandCost
	for name, v := range byName {
		calls, us := v[0], v[1]
		for len(calls) < len(rounds) {
			calls, us = append(calls, 0), append(us, 0)
		}
		out = append(out, CommandCost{Command: name, CallsPerTask: median(calls), UsPerTask: median(us)})
	}
	slices.SortFunc(out, func(x, y CommandCost) int {
		return cmp.Or(cmp.Compare(y.UsPerTask, x.UsPerTask), strings.Compare(x.Command, y.Command))
	})
	return out
}
