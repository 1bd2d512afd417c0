package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// asynqRateLimitingPattern is where asynq documents its rate-limiting
// pattern, the per-process strategy (the answer asynq's maintainers give
// in issues #609 and #900).
const asynqRateLimitingPattern = "https://github.com/hibiken/asynq/wiki/Rate-Limiting"

// reportDrain writes the drain section.
func reportDrain(w io.Writer, res *Results) {
	dr := res.Drain
	if dr == nil {
		return
	}
	reportDrainSetup(w, dr)
	reportDrainTargets(w, dr)
	reportDrainResults(w, dr)
	reportJoiners(w, dr)
	reportJain(w, dr)
	reportShares(w, dr)
	reportDrainCounts(w, dr)
	window := seconds(dr.WindowSeconds)
	fmt.Fprintf(w, "\nThe plots: for each %v of the drain, the most arrivals at the provider in any window of %v that "+
		"ends within it, the count each rule holds to its limit.\n", millis(firstSeriesStep(dr)), window)
	embedPlot(w, res, "drain-sluice.png")
	embedPlot(w, res, "drain-strategies.png")
}

// reportDrainSetup writes what the drain runs: the backlog, the worker
// processes, the rules, the strategies and how each figure is measured.
func reportDrainSetup(w io.Writer, dr *DrainResult) {
	window := seconds(dr.WindowSeconds)
	fmt.Fprintf(w, "\n## Drain: a backlog through %d worker processes\n\n", dr.Processes)
	switch dr.Mode {
	case "short":
		fmt.Fprintf(w, "**The short scenario** (`--drain-short`), for tests: the figures say that the section runs, not how Sluice performs.\n\n")
	case "slow":
		fmt.Fprintf(w, "**The slow-provider scenario** (`--drain-slow`): equal backlogs, and a provider that answers each request "+
			"%s ms after it arrives, so that many tasks must be in flight at once.\n\n", thousands(dr.LatencyMs))
	}
	fmt.Fprintf(w, "%s `sms:send` tasks for %d tenants, tenant i having a share ∝ 1/(i+1)^%g of them (the largest %s, "+
		"the smallest %s), are enqueued on a fresh queue in an order shuffled with seed %d, all before the workers start. "+
		"%d worker processes (the harness's own executable run again, each an asynq server with Concurrency %d unless the strategy says otherwise, "+
		"TaskCheckInterval %v and DelayedTaskCheckInterval %v, `cmd/worker`'s defaults, and go-redis's default pool) "+
		"send them through `provider.Webhook` to a recording HTTP provider that the harness runs on loopback "+
		"(`internal/sink`), which notes the time each request arrives. The rules:\n\n",
		thousands(float64(dr.Tasks)), dr.Tenants, dr.Skew, thousands(float64(slices.Max(dr.TenantTasks))),
		thousands(float64(slices.Min(dr.TenantTasks))), dr.Seed, dr.Processes, dr.Concurrency,
		millis(dr.TaskCheckIntervalMs), millis(dr.DelayedTaskCheckIntervalMs))
	fmt.Fprintf(w, "```yaml\n%s```\n\n", dr.Policies)
	fmt.Fprintf(w, "sluice and naive add the policies' default margin, %v, to each window; per-process uses the limits as written. "+
		"Each strategy runs once, one after another, on a queue and limiter keys of its own:\n\n", millis(dr.MarginMs))
	for _, s := range dr.Strategies {
		about := s.About
		if s.Name == "per-process" {
			about += " The pattern: " + asynqRateLimitingPattern + "; burst and two buckets are this harness's reading of it."
		}
		fmt.Fprintf(w, "- **%s**: %s\n", s.Name, about)
	}
	fmt.Fprintf(w, "\nHow it is measured. Times run from the *start*, the moment the first worker process is started "+
		"with the backlog enqueued (process start-up is part of the drain). The *ideal schedule* admits the tasks "+
		"of the backlog, in enqueue order, at every moment every task that fits both rules as written (no margin), "+
		"each admission leaving its window exactly %v later; it drains in **%.2f s**, the *ideal drain time* "+
		"(%.2f s with the margin added to the windows, the best sluice and naive can do: figures in brackets are "+
		"against that schedule; %.2f s when, in addition, the provider's admissions after its first full window are "+
		"a slot interval apart, as the fair lines pace a backlog so that a newcomer never waits more than a slot "+
		"interval: *paced*). *Utilization* is the ideal drain time over the actual one, from the start to the last delivery "+
		"(above 1 only by breaking a limit). "+
		"*Over limit* counts arrivals at the provider, duplicates included, for which the window of %v ending at the "+
		"arrival holds more than the rule's limit (the provider rule for all tenants together, the tenant rule for "+
		"each tenant, added up over tenants); *most in a window* is the highest count in any window. "+
		"*Lateness* of a tenant's k-th delivery is its arrival minus the tenant's k-th slot of the ideal schedule "+
		"(negative: ahead of it). *Denials* are limiter calls that denied; a task of sluice back from the "+
		"retry set before its place is told the time left, an *early* return that changes nothing, counted apart; "+
		"*dequeues* are handler runs, each return of a task counted again; both per "+
		"delivered task. A strategy is stopped at %.0f s (4 × the ideal drain time + 30 s in the full scenario) "+
		"and reports what was delivered by then.\n",
		window, dr.IdealSeconds, dr.IdealMarginSeconds, dr.IdealPacedSeconds, window, dr.DeadlineSeconds)
}

// reportDrainTargets writes the targets for sluice and whether
// each is met; nothing when the result holds none.
func reportDrainTargets(w io.Writer, dr *DrainResult) {
	if len(dr.Targets) == 0 {
		return
	}
	fmt.Fprintf(w, "\nTargets of the issue, for sluice:\n\n")
	for _, t := range dr.Targets {
		bound := "at least"
		if t.AtMost {
			bound = "at most"
		}
		var got, want string
		switch t.Name {
		case "violations":
			got, want = fmt.Sprintf("arrivals over a limit: %.0f", t.Got), fmt.Sprintf("%.0f", t.Want)
		case "utilization":
			got, want = fmt.Sprintf("utilization: %.3f", t.Got), fmt.Sprintf("%.2f", t.Want)
		case "denials_per_delivered":
			got, want = fmt.Sprintf("limiter denials per delivered task: %.2f", t.Got), fmt.Sprintf("%.1f", t.Want)
		case "jain_min":
			got, want = fmt.Sprintf("least Jain's index among backlogged tenants, stretches of %d windows: %.3f", jainStretch, t.Got), fmt.Sprintf("%.2f", t.Want)
		case "share_deviation":
			got, want = fmt.Sprintf("most deviation of a tenant's sends over %d windows from its weighted share: %.3f", shareWindows, t.Got), fmt.Sprintf("%.2f", t.Want)
		case "p99_lateness_ms":
			got, want = fmt.Sprintf("p99 lateness: %s ms", thousands(t.Got)), fmt.Sprintf("%s ms (one window)", thousands(t.Want))
		default:
			got, want = fmt.Sprintf("%s: %g", t.Name, t.Got), fmt.Sprintf("%g", t.Want)
		}
		fmt.Fprintf(w, "- %s, want %s %s: **%s**\n", got, bound, want, verdict(t.Met))
	}
	if s := dr.Strategies[0]; s.Name == "sluice" && !s.Drained {
		fmt.Fprintf(w, "\nsluice did not drain before the deadline: a target that needs the whole drain is not met.\n")
	}
}

// reportDrainResults writes the table of what each strategy delivered:
// drain time, utilization, violations, denials and lateness.
func reportDrainResults(w io.Writer, dr *DrainResult) {
	fmt.Fprintf(w, "\n| strategy | delivered | duplicates | drain s | utilization | over limit: provider | over limit: tenants (tenants) "+
		"| most in a window: provider, tenant | denials / task | dequeues / task | lateness p50 ms | p99 ms | max ms |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range dr.Strategies {
		util := fmt.Sprintf("%.3f (%.3f; paced %.3f)", s.Utilization, s.MarginUtilization, s.PacedUtilization)
		drain := fmt.Sprintf("%.2f", s.DrainSeconds)
		if !s.Drained {
			util, drain = "not drained", fmt.Sprintf("stopped at %.0f", s.DrainSeconds)
		}
		fmt.Fprintf(w, "| %s | %s of %s | %s | %s | %s | %s | %s (%d) | %s of %s, %d of %d | %.2f | %.2f | %s (%s) | %s (%s) | %s |\n",
			s.Name, thousands(float64(s.Delivered)), thousands(float64(dr.Tasks)), thousands(float64(s.Duplicates)), drain, util,
			thousands(float64(s.GlobalViolations)), thousands(float64(s.TenantViolations)), s.TenantsViolated,
			thousands(float64(s.MaxGlobalInWindow)), thousands(float64(dr.ProviderLimit)), s.MaxTenantInWindow, dr.TenantLimit,
			s.DenialsPerDelivered, s.DequeuesPerDelivered,
			thousands(s.LatenessP50Ms), thousands(s.MarginLatenessP50Ms), thousands(s.LatenessP99Ms), thousands(s.MarginLatenessP99Ms),
			thousands(s.LatenessMaxMs))
	}
}

// reportJoiners writes the distribution of the joiners' waits in each
// strategy's drain: the newcomers' first SMS and the urgent SMS, against
// the bound.
func reportJoiners(w io.Writer, dr *DrainResult) {
	bound := newcomerBoundMs(dr)
	fmt.Fprintf(w, "\nJoiners: %d *newcomers*, tenants with nothing waiting, each enqueue %d SMS behind the backlog, at 5%%, 15%%, ... 95%% "+
		"of the ideal drain; %d *urgent* SMS of priority 1 (the backlog's are 3) of the tenant with the largest backlog come "+
		"at 10%%, 20%%, ... 100%%. Each wait is from the enqueue to the provider: a newcomer's first SMS, and each urgent one. "+
		"The bound for fair service is the provider rule's slot (window ÷ limit) plus the fetch interval plus 100 ms: %s ms "+
		"here. *Backlog ahead* is the most arrivals of the backlog's tasks between a joiner's enqueue and its first arrival.\n\n",
		joinCount, joinTasks, joinCount, thousands(bound))
	fmt.Fprintf(w, "| strategy | joiner | waits | median ms | p90 ms | worst ms | over %s ms | backlog ahead, most | not come |\n", thousands(bound))
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range dr.Strategies {
		for _, kind := range []string{"newcomer", "urgent"} {
			var waits []float64
			over, ahead, missing := 0, 0, 0
			for i := range joiners {
				var j *JoinResult
				if i < len(s.Joiners) {
					j = s.Joiners[i]
				}
				switch {
				case joiners[i].kind != kind:
				case j == nil || len(j.WaitsMs) == 0:
					missing++
				default:
					waits = append(waits, j.FirstMs)
					if kind == "urgent" {
						waits = append(waits[:len(waits)-1], j.WaitsMs...)
					}
					ahead = max(ahead, j.BacklogAhead)
				}
			}
			slices.Sort(waits)
			for _, ms := range waits {
				if ms > bound {
					over++
				}
			}
			if len(waits) == 0 {
				fmt.Fprintf(w, "| %s | %s | 0 | | | | | | %d |\n", s.Name, kind, missing)
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %d | %d | %d |\n", s.Name, kind, len(waits),
				thousands(median(waits)), thousands(percentileOf(waits, 90)), thousands(waits[len(waits)-1]), over, ahead, missing)
		}
	}
}

// reportJain writes the table of fairness among backlogged tenants.
func reportJain(w io.Writer, dr *DrainResult) {
	fmt.Fprintf(w, "\nFairness among backlogged tenants: for every stretch of %d windows, starting at each whole window from "+
		"the start, Jain's index of the sends of the tenants that are still to send after it, (Σx)² ÷ (n·Σx²): "+
		"1 when each sent as many (their max-min shares are equal here: equal weights, one tenant limit), 1/n when one "+
		"sent all. The table gives the least, the stretch it was in and how many tenants were backlogged then.\n\n", jainStretch)
	fmt.Fprintf(w, "| strategy | least Jain's index | stretch from s | backlogged tenants | stretches |\n|---|---:|---:|---:|---:|\n")
	for _, s := range dr.Strategies {
		j := s.Jain
		fmt.Fprintf(w, "| %s | %.3f | %.0f | %d | %d |\n", s.Name, j.Min, j.AtSeconds, j.Tenants, j.Stretches)
	}
}

// reportShares writes, in a scenario with weights, each tenant's sends
// over 10 windows against its weighted share, per strategy.
func reportShares(w io.Writer, dr *DrainResult) {
	if len(dr.Strategies) == 0 || dr.Strategies[0].Shares == nil {
		return
	}
	sh := dr.Strategies[0].Shares
	fmt.Fprintf(w, "\nWeighted shares: each tenant's sends from %.0f s to %.0f s (%d windows, after the first, whose sends went "+
		"at once before anything waited), against its weighted max-min share of all the sends of those windows (the "+
		"margin and the pace take a few from every tenant alike); the deviation is |sends − share| ÷ share.\n\n| strategy |", sh.FromSeconds, sh.ToSeconds, shareWindows)
	for _, t := range sh.Tenants {
		fmt.Fprintf(w, " %s (weight %g): sends of share |", t.Tenant, t.Weight)
	}
	fmt.Fprintf(w, " most deviation |\n|---|%s---:|\n", strings.Repeat("---:|", len(sh.Tenants)))
	for _, s := range dr.Strategies {
		if s.Shares == nil {
			continue
		}
		fmt.Fprintf(w, "| %s |", s.Name)
		for _, t := range s.Shares.Tenants {
			fmt.Fprintf(w, " %d of %.0f |", t.Sends, t.Share)
		}
		fmt.Fprintf(w, " %.3f |\n", s.Shares.MaxDeviation)
	}
}

// newcomerBoundMs is the newcomer's bound in ms: a slot of the provider
// rule, the fetch interval and 100 ms.
func newcomerBoundMs(dr *DrainResult) float64 {
	return dr.WindowSeconds*1000/float64(dr.ProviderLimit) + dr.TaskCheckIntervalMs + 100
}

// reportDrainCounts writes the table of what the worker processes of
// each strategy counted, added up, naming the processes whose counters
// are missing.
func reportDrainCounts(w io.Writer, dr *DrainResult) {
	fmt.Fprintf(w, "\nWhat the worker processes counted, added up (each process's own are in results.json): limiter calls "+
		"(Redis for sluice and naive, the local buckets for per-process), provider calls, and runs that ended throttled "+
		"(back through the retry set) or in another error. The first delivery is from the start; enqueueing came before it. "+
		"*Redis CPU* is what the Redis process used (INFO cpu, user and system) from the workers' start to the last "+
		"delivery, over the tasks delivered: the queue's work and the limiter's, per task.\n\n")
	fmt.Fprintf(w, "| strategy | dequeues | limiter calls | denials | early | admissions | limiter errors | provider calls | throttled runs | failed runs | Redis CPU µs / task | first delivery s | enqueue s |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range dr.Strategies {
		missing := ""
		var lost []string
		for _, p := range s.Processes {
			if p.Missing {
				lost = append(lost, fmt.Sprint(p.Process))
			}
		}
		if len(lost) > 0 {
			missing = " (without process " + strings.Join(lost, ", ") + ": no counters)"
		}
		fmt.Fprintf(w, "| %s%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %.2f | %.2f |\n", s.Name, missing,
			thousands(float64(s.Dequeues)), thousands(float64(s.Decisions)), thousands(float64(s.Denials)), thousands(float64(s.Early)),
			thousands(float64(s.Admissions)), thousands(float64(s.LimiterErrors)), thousands(float64(s.Sends)),
			thousands(float64(s.Throttled)), thousands(float64(s.Failed)), s.RedisCPUUsPerDelivered, s.FirstDeliverySeconds, s.EnqueueSeconds)
	}
}

// firstSeriesStep is the sampling step of the drain series, ms.
func firstSeriesStep(dr *DrainResult) float64 {
	for _, s := range dr.Strategies {
		if s.Series.StepMs > 0 {
			return s.Series.StepMs
		}
	}
	return float64(seriesStep) / float64(time.Millisecond)
}
