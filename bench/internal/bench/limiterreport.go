package bench

import (
	"fmt"
	"io"
	"strings"
)

// reportLimiter writes the limiter section.
func reportLimiter(w io.Writer, res *Results) {
	lr := res.Limiter
	if lr == nil {
		return
	}
	fmt.Fprintf(w, "\n## Limiter: Allow\n\n")
	fmt.Fprintf(w, "`Allow` of one unit on a key picked at random among %s, by N callers at once, each making one call "+
		"after another. **sluice** is the default `throttle.NewLimiter`, which sends the decisions that callers ask for "+
		"at the same time as one pipeline, each its own script call. Against:\n\n", thousands(float64(lr.Keys)))
	fmt.Fprintf(w, "- **floor**: `EVALSHA` of a script that returns 1, the round trip that any decision made in Redis costs at least;\n")
	fmt.Fprintf(w, "- **redis_rate**: github.com/go-redis/redis_rate/v10 `Allow`, GCRA: one string key per limited key, one `GET` and one `SET`;\n")
	others := limiterOthers(lr)
	if others {
		fmt.Fprintf(w, "- **sluice unbatched**: a Limiter with `throttle.WithoutBatching()`, one round trip a decision;\n")
		fmt.Fprintf(w, "- **textbook**: the least an exact sliding-window log does, `TIME`, `ZREMRANGEBYSCORE`, `ZCARD`, `ZADD` and "+
			"`PEXPIRE` (internal/bench/workercontenders.go), replying yes or no, one call a decision;\n")
		fmt.Fprintf(w, "- **sluice today**: the decision script of 2026-11-26 (commit 23be620, read from git history), one call a decision, "+
			"as the default Limiter of that day sent it: the change measured, not remembered.\n")
		fmt.Fprintf(w, "\nsluice, sluice unbatched, textbook and sluice today work on the same keys: the deny variant fills them for all.\n")
	}
	fmt.Fprintf(w, "\nThe contenders take turns, one measurement each, in rounds whose order rotates, so that all see the same "+
		"machine and Redis and none always runs first. Ratios are taken within each round: the median, "+
		"and in brackets the least and greatest.\n")
	reportLimiterTargets(w, lr)
	for _, v := range lr.Variants {
		fmt.Fprintf(w, "\n### %s\n\nSluice `%s`, redis_rate `%s`: %s\n\n", v.Name, v.Sluice, v.RedisRate, v.About)
		fmt.Fprintf(w, "Decisions per second:\n\n")
		fmt.Fprintf(w, "| callers | floor | sluice | redis_rate | sluice/floor | sluice/redis_rate | redis_rate/floor |\n")
		fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, p := range v.Points {
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s |\n", p.Callers,
				thousands(p.Floor.Median.PerSecond), thousands(p.Sluice.Median.PerSecond), thousands(p.RedisRate.Median.PerSecond),
				ratio(p.SluiceOverFloor), ratio(p.SluiceOverRedisRate), ratio(p.RedisRateOverFloor))
		}
		if others {
			fmt.Fprintf(w, "\nDecisions per second of the other contenders, and ratios of throughputs:\n\n")
			fmt.Fprintf(w, "| callers | sluice unbatched | textbook | sluice today | sluice/unbatched | sluice/today | textbook/redis_rate |\n")
			fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---:|\n")
			for _, p := range v.Points {
				fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s |\n", p.Callers, perSecond(p.SluiceUnbatched), perSecond(p.Textbook),
					perSecond(p.Today), ratio(p.SluiceOverUnbatched), ratio(p.SluiceOverToday), ratio(p.TextbookOverRedisRate))
			}
		}
		fmt.Fprintf(w, "\nLatency of one call in µs as the caller sees it, the share of calls allowed, "+
			"and the time Redis spent in the script per call in µs (INFO commandstats):\n\n")
		fmt.Fprintf(w, "| callers | contender | p50 | p90 | p99 | p99.9 | allowed | Redis µs/call |\n")
		fmt.Fprintf(w, "|---:|---|---:|---:|---:|---:|---:|---:|\n")
		for _, p := range v.Points {
			for _, c := range pointMeasurements(p) {
				r, name := c.m.Median, contenderNames[c.name]
				if name == "" {
					name = c.name
				}
				fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s | %.1f |\n", p.Callers, name,
					thousands(r.P50), thousands(r.P90), thousands(r.P99), thousands(r.P999), percent(r.AllowedShare), r.RedisUsPerCall)
			}
		}
	}
}

// reportLimiterTargets lists the targets of the limiter section.
func reportLimiterTargets(w io.Writer, lr *LimiterResult) {
	if len(lr.Targets) == 0 {
		return
	}
	names := map[string]string{
		"sluice_over_redis_rate":          "sluice/redis_rate decisions per second",
		"sluice_over_floor":               "sluice/floor decisions per second",
		"sluice_redis_us_over_redis_rate": "sluice/redis_rate Redis time per decision",
		"sluice_p50_over_today":           "sluice/sluice today p50 latency",
	}
	fmt.Fprintf(w, "\nTargets of the issues \"Performance\" and \"The cost of a decision\":\n\n")
	for _, t := range lr.Targets {
		name := names[t.Name]
		if name == "" {
			name = strings.ReplaceAll(t.Name, "_", " ")
		}
		bound := "at least"
		if t.AtMost {
			bound = "at most"
		}
		fmt.Fprintf(w, "- %s at %d callers, %s: %.2f, want %s %.2f: **%s**\n", name, t.Callers, t.Variant, t.Got, bound, t.Want, verdict(t.Met))
	}
}

// contenderNames are the report's names of the contenders, by their JSON
// keys in Point; a key not here is shown as it is.
var contenderNames = map[string]string{"redis_rate": "redis_rate", "sluice_unbatched": "sluice unbatched", "today": "sluice today"}

// perSecond formats m's median throughput, or "–" when not measured.
func perSecond(m *Measurement) string {
	if m == nil {
		return "–"
	}
	return thousands(m.Median.PerSecond)
}

// limiterOthers reports whether lr measured the contenders beyond floor,
// sluice and redis_rate.
func limiterOthers(lr *LimiterResult) bool {
	for _, v := range lr.Variants {
		for _, p := range v.Points {
			if p.SluiceUnbatched != nil || p.Textbook != nil || p.Today != nil {
				return true
			}
		}
	}
	return false
}
