package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// reportWorker writes the worker section: the contenders' tasks a second,
// Redis CPU and round trips per task, and what each Redis command cost a
// task.
func reportWorker(w io.Writer, res *Results) {
	wr := res.Worker
	if wr == nil {
		return
	}
	fmt.Fprintf(w, "\n## Worker: asynq end to end\n\n")
	fmt.Fprintf(w, "Tasks per second of an asynq server, from its `Start` until its handler has completed all %s tasks "+
		"of a round: `%s` tasks built by `producer.NewSMSTask` for %d tenants in turn, all enqueued on a fresh queue "+
		"before the server starts. The handler does nothing but count. The servers run the same tasks:\n\n",
		thousands(float64(wr.Tasks)), "sms:send", wr.Tenants)
	for _, s := range wr.Servers {
		fmt.Fprintf(w, "- **%s**: %s;\n", s.Name, s.About)
	}
	fmt.Fprintf(w, "\nThe sluice servers have the policies below: two rules apply to every task, checked in one limiter call, "+
		"and no round comes near their limits. All have the same asynq configuration (Concurrency %d, one queue, "+
		"TaskCheckInterval %v, DelayedTaskCheckInterval %v), the same Redis and one go-redis client. They take turns, in an "+
		"order that rotates from round to round, after an uncounted round of each with a tenth of the tasks; each ratio "+
		"to plain is taken within each round: the median, and in brackets the least and greatest.\n\n",
		wr.Concurrency, millis(wr.TaskCheckIntervalMs), millis(wr.DelayedTaskCheckIntervalMs))
	if s := wr.server("sluice"); s != nil {
		fmt.Fprintf(w, "Targets of the issue \"The cost of a decision\": sluice/plain tasks a second %.2f, want at least %.2f: **%s**; "+
			"sluice/plain Redis CPU per task %.2f, want at most %.2f", s.OverPlain.Median, wr.Target, verdict(wr.TargetMet),
			s.CPUOverPlain.Median, wr.CPUTarget)
		if floor := wr.server("textbook"); floor != nil && floor.CPUOverPlain.Median > wr.CPUTarget {
			fmt.Fprintf(w, ", or, as that is below the floor (textbook/plain %.2f), within %.2f of the floor: sluice/textbook %s",
				floor.CPUOverPlain.Median, wr.FloorTarget, ratio(wr.CPUOverFloor))
		}
		fmt.Fprintf(w, ": **%s**\n\n", verdict(wr.CPUTargetMet))
	}
	fmt.Fprintf(w, "Tasks per second (the median of the rounds, the least and the greatest); the CPU time of the Redis "+
		"process per task in µs, user and system, its network I/O and asynq's background work included (INFO cpu); the "+
		"client's round trips per task, asynq's included (a go-redis hook counting commands and pipelines); and the CPU time "+
		"of the Go process running the server per task in µs, asynq's, the handler's and the limiter's (getrusage):\n\n")
	fmt.Fprintf(w, "| server | tasks/s | least | greatest | rounds | /plain | Redis CPU µs/task | /plain | round trips/task | Go CPU µs/task |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range wr.Servers {
		xs := workerPerSecond(s.Rounds)
		least, greatest := 0.0, 0.0
		if len(xs) > 0 {
			least, greatest = slices.Min(xs), slices.Max(xs)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d | %s | %.1f | %s | %.2f | %.1f |\n", s.Name, thousands(s.PerSecond), thousands(least),
			thousands(greatest), len(xs), ratio(s.OverPlain), s.RedisCPUUsPerTask, ratio(s.CPUOverPlain), s.RoundTripsPerTask, s.GoCPUUsPerTask)
	}
	reportWorkerCommands(w, wr)
	fmt.Fprintf(w, "\nThe policies of the sluice servers:\n\n```yaml\n%s```\n", wr.Policies)
}

// reportWorkerCommands writes, for every Redis command any server ran,
// its calls and Redis's own time per task under each server.
func reportWorkerCommands(w io.Writer, wr *WorkerResult) {
	var names []string
	for _, s := range wr.Servers {
		for _, c := range s.Commands {
			// A command run less than once in 200 tasks is background
			// work (asynq's heartbeats and checks), not the task's.
			if c.CallsPerTask >= 0.005 && !slices.Contains(names, c.Command) {
				names = append(names, c.Command)
			}
		}
	}
	if len(names) == 0 {
		return
	}
	cost := func(s WorkerServer, name string) CommandCost {
		for _, c := range s.Commands {
			if c.Command == name {
				return c
			}
		}
		return CommandCost{}
	}
	// The dearest under sluice first, then the others by name.
	if s := wr.server("sluice"); s != nil {
		slices.SortStableFunc(names, func(a, b string) int {
			ca, cb := cost(*s, a), cost(*s, b)
			switch {
			case ca.UsPerTask > cb.UsPerTask:
				return -1
			case ca.UsPerTask < cb.UsPerTask:
				return 1
			}
			return strings.Compare(a, b)
		})
	}
	fmt.Fprintf(w, "\nWhere Redis's time goes: each command's calls per task and Redis's own time in them per task, µs "+
		"(INFO commandstats, the median of the rounds). EVALSHA is every script call, asynq's and the limiter's; its "+
		"time includes that of the commands the scripts ran, which are counted in their own lines too. What the "+
		"commands' time leaves of the CPU per task above is Redis reading and writing the connections.\n\n")
	fmt.Fprintf(w, "| command |")
	for _, s := range wr.Servers {
		fmt.Fprintf(w, " %s calls | µs |", s.Name)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|---:|", len(wr.Servers)))
	for _, name := range names {
		fmt.Fprintf(w, "| %s |", strings.ToUpper(name))
		for _, s := range wr.Servers {
			c := cost(s, name)
			fmt.Fprintf(w, " %.2f | %.2f |", c.CallsPerTask, c.UsPerTask)
		}
		fmt.Fprintln(w)
	}
}
