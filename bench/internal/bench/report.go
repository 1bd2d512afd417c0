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
