package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// WriteReport writes res as Markdown, REPORT.md: where and how it was
// measured, the command that measures it again, and a part per section
// that ran.
func WriteReport(w io.Writer, res *Results) {
	m := res.Meta
	s := m.Settings
	fmt.Fprintf(w, "# Sluice benchmarks\n\n")
	cpu := ""
	if m.CPUModel != "" {
		cpu = " (" + m.CPUModel + ")"
	}
	where := "given with --redis at " + m.RedisAddr
	if m.OwnRedis {
		where = "a redis-server started for the run on " + m.RedisAddr + ", sharing the CPUs with the harness"
	}
	fmt.Fprintf(w, "Measured %s in %v on %d CPUs%s, %s/%s, GOMAXPROCS %d, %s; Redis %s, %s.\n\n",
		m.Date.Format(time.RFC3339), seconds(m.ElapsedSeconds).Round(time.Second), m.CPUs, cpu, m.OS, m.Arch,
		m.GOMAXPROCS, m.GoVersion, m.RedisVersion, where)
	if res.Limiter != nil {
		fmt.Fprintf(w, "Each measurement counts calls for %v after a warm-up of %v; each is made %d times, "+
			"and the tables give the median. All contenders share one go-redis client with a pool of %d connections.\n\n",
			seconds(s.DurationSeconds), seconds(s.WarmupSeconds), s.Repeat, s.PoolSize)
	} else {
		fmt.Fprintf(w, "Each measurement is made %d times, and the tables give the median.\n\n", s.Repeat)
	}
	fmt.Fprintf(w, "Measure again (results.json holds every figure and every round):\n\n```sh\n%s\n```\n", s.Command)
	for _, sec := range sections {
		sec.report(w, res)
	}
}

// reportLimiter writes the limiter section.
func reportLimiter(w io.Writer, res *Results) {
	lr := res.Limiter
	if lr == nil {
		return
	}
	fmt.Fprintf(w, "\n## Limiter: Allow\n\n")
	fmt.Fprintf(w, "`Allow` of one unit on a key picked at random among %s, by N callers at once, each making one call "+
		"after another, against:\n\n", thousands(float64(lr.Keys)))
	fmt.Fprintf(w, "- **floor**: `EVALSHA` of a script that returns 1, the round trip that any decision made in Redis costs at least;\n")
	fmt.Fprintf(w, "- **redis_rate**: github.com/go-redis/redis_rate/v10 `Allow`, GCRA: one string key per limited key, one `GET` and one `SET`.\n\n")
	batched := limiterBatched(lr)
	if batched {
		fmt.Fprintf(w, "Sluice is measured twice: **sluice**, one script call a decision, and **sluice batched**, on a Limiter "+
			"with `throttle.WithBatching(nil)`, which sends the decisions that callers ask for at the same time as one "+
			"pipeline (on the same keys: the deny variant fills them for both).\n\n")
	}
	fmt.Fprintf(w, "The contenders take turns, one measurement each, in rounds whose order rotates, so that all see the same "+
		"machine and Redis and none always runs first. Ratios are of throughputs within each round: the median, "+
		"and in brackets the least and greatest.\n")
	if len(lr.Targets) > 0 {
		fmt.Fprintf(w, "\nTargets of the issue \"Performance\":\n\n")
		for _, t := range lr.Targets {
			// "sluice_batched_over_floor" reads "sluice batched/floor".
			num, den, _ := strings.Cut(t.Name, "_over_")
			fmt.Fprintf(w, "- %s at %d callers, %s: %.2f, want at least %.2f: **%s**\n",
				strings.ReplaceAll(num, "_", " ")+"/"+den, t.Callers, t.Variant, t.Got, t.Want, verdict(t.Met))
		}
	}
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
		if batched {
			fmt.Fprintf(w, "\nDecisions per second of sluice batched, and its throughput over each of the others':\n\n")
			fmt.Fprintf(w, "| callers | sluice batched | batched/sluice | batched/floor | batched/redis_rate |\n")
			fmt.Fprintf(w, "|---:|---:|---:|---:|---:|\n")
			for _, p := range v.Points {
				if p.SluiceBatched == nil {
					continue
				}
				fmt.Fprintf(w, "| %d | %s | %s | %s | %s |\n", p.Callers, thousands(p.SluiceBatched.Median.PerSecond),
					ratio(p.SluiceBatchedOverSluice), ratio(p.SluiceBatchedOverFloor), ratio(p.SluiceBatchedOverRedisRate))
			}
		}
		fmt.Fprintf(w, "\nLatency of one call in µs as the caller sees it, the share of calls allowed, "+
			"and the time Redis spent in the script per call in µs (INFO commandstats):\n\n")
		fmt.Fprintf(w, "| callers | contender | p50 | p90 | p99 | p99.9 | allowed | Redis µs/call |\n")
		fmt.Fprintf(w, "|---:|---|---:|---:|---:|---:|---:|---:|\n")
		for _, p := range v.Points {
			contenders := []struct {
				name string
				m    Measurement
			}{{"floor", p.Floor}, {"sluice", p.Sluice}, {"redis_rate", p.RedisRate}}
			if p.SluiceBatched != nil {
				contenders = append(contenders, struct {
					name string
					m    Measurement
				}{"sluice batched", *p.SluiceBatched})
			}
			for _, c := range contenders {
				r := c.m.Median
				fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s | %.1f |\n", p.Callers, c.name,
					thousands(r.P50), thousands(r.P90), thousands(r.P99), thousands(r.P999), percent(r.AllowedShare), r.RedisUsPerCall)
			}
		}
	}
}

// limiterBatched reports whether lr measured sluice batched.
func limiterBatched(lr *LimiterResult) bool {
	for _, v := range lr.Variants {
		for _, p := range v.Points {
			if p.SluiceBatched != nil {
				return true
			}
		}
	}
	return false
}

// reportMemory writes the memory section.
func reportMemory(w io.Writer, res *Results) {
	mr := res.Memory
	if mr == nil {
		return
	}
	fmt.Fprintf(w, "\n## Memory per limited key\n\n")
	fmt.Fprintf(w, "One key of each limiter after as many allowed calls, one unit each, within one window; "+
		"`MEMORY USAGE` with `SAMPLES 0`, in bytes, key name included. Sluice's sliding log keeps one sorted-set member per unit; "+
		"redis_rate one number per key, whatever the count. The last three columns are Sluice keys under the "+
		"algorithms that keep a few numbers per key, a hash each, filled to the same limit (in one call: their state "+
		"does not depend on how the units came).\n\n")
	fmt.Fprintf(w, "| units in the window | sluice | sluice per unit | sluice encoding | redis_rate | sluice/redis_rate | sliding-window | gcra | fixed-window |\n")
	fmt.Fprintf(w, "|---:|---:|---:|---|---:|---:|---:|---:|---:|\n")
	for _, r := range mr.Rows {
		fmt.Fprintf(w, "| %s | %s | %.1f | %s | %s | %s | %s | %s | %s |\n", thousands(float64(r.Units)), thousands(float64(r.SluiceBytes)),
			r.SluiceBytesPerUnit, r.SluiceEncoding, thousands(float64(r.RedisRateBytes)), times(r.SluiceOverRedisRate),
			thousands(float64(r.SlidingWindowBytes)), thousands(float64(r.GCRABytes)), thousands(float64(r.FixedWindowBytes)))
	}
}

// verdict reads whether a target was met.
func verdict(met bool) string {
	if met {
		return "met"
	}
	return "not met"
}

// ratio formats r as "0.93 (0.90–0.95)", or "0.93" when every round gave
// the same.
func ratio(r Ratio) string {
	if r.Min == r.Max {
		return fmt.Sprintf("%.2f", r.Median)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", r.Median, r.Min, r.Max)
}

// thousands formats x rounded to an integer, with commas between groups of
// three digits: 12345.6 is "12,346".
func thousands(x float64) string {
	s := strconv.FormatInt(int64(math.Round(x)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// times formats a ratio of sizes: one decimal below 100, else grouped
// digits.
func times(x float64) string {
	if x < 100 {
		return fmt.Sprintf("%.1f", x)
	}
	return thousands(x)
}

// percent formats a share as a percentage: 0.995 is "99.5%", 1 is "100%".
func percent(share float64) string {
	return strconv.FormatFloat(math.Round(share*1000)/10, 'f', -1, 64) + "%"
}

// millis converts milliseconds to a Duration.
func millis(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// seconds converts seconds to a Duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
