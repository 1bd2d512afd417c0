// Command bench measures Sluice against baselines on a real Redis and writes
// DIR/results.json, DIR/REPORT.md and the PNG plots the report embeds (see
// package internal/bench):
//
//	bench --out DIR [--redis URL] [--duration 2s] [--only limiter,memory,accuracy,worker,drain]
//
// The drain section runs its worker processes as this same executable
// again (see bench.RunWorkerIfChild).
//
// Without --redis (or REDIS_URL) it starts a redis-server of its own on
// loopback and stops it at the end. Exit status 0 on success, 1 when the
// run fails, 2 on bad usage, 130 when interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/bench/internal/bench"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redisproc"
)

const synopsis = `
usage: bench --out DIR [--redis URL] [--duration D] [--warmup D] [--repeat N]
             [--worker-tasks N] [--worker-concurrency N] [--worker-profile FILE]
             [--drain-short] [--drain-concurrency N] [--only SECTION,...]

Measures Sluice's limiter against a trivial EVALSHA (the round-trip floor),
redis_rate (GCRA), a textbook sliding-window log and its own script of
2026-11-26, the Redis time of a denial with up to 10,000 tasks waiting
ahead against an admission's, the Redis memory of a limited key under
each algorithm, the accuracy of the constant-memory algorithms (simulated,
no Redis), asynq tasks per second with the Throttle middleware against
plain asynq, and a backlog of 10,000 SMS for 50 tenants drained by 3 worker
processes under three throttling strategies, and writes DIR/results.json,
DIR/REPORT.md and the PNG plots it embeds. Without --redis it runs its own redis-server on
loopback. Keys it writes on a given Redis are deleted at the end. A flag
shown with a variable can also be set from the environment.

Exit status: 0 on success; 1 when the run fails; 2 for a usage error (a
bad flag or value, an argument: it takes none); 130 when interrupted.`

var env = map[string]string{
	"redis":        "REDIS_URL",
	"redis-server": "REDIS_SERVER",
}

func main() {
	bench.RunWorkerIfChild() // a worker process of the drain section: runs, then exits
	cli.Main(func(ctx context.Context, args []string) int { return run(ctx, args, os.Stderr) })
}

// flags reads the command line into a bench.Config, the output directory
// and the redis-server binary; a status of 0 or more says to exit with it.
func flags(args []string, stderr io.Writer) (cfg bench.Config, out, redisServer string, status int) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	redisURL := fs.String("redis", "", "Redis `URL` to measure, a single node (default: start redis-server on loopback)")
	server := fs.String("redis-server", "redis-server", "redis-server `binary` to start when --redis is not given")
	outDir := fs.String("out", "", "`directory` for results.json and REPORT.md (created if needed)")
	duration := fs.Duration("duration", bench.DefaultDuration, "how long each measurement counts calls")
	warmup := fs.Duration("warmup", bench.DefaultWarmup, "how long each measurement runs before it counts")
	repeat := fs.Int("repeat", bench.DefaultRepeat, "how many times each measurement is made; the report gives the median")
	workerTasks := fs.Int("worker-tasks", bench.DefaultWorkerTasks, "tasks per round of the worker section")
	workerConcurrency := fs.Int("worker-concurrency", bench.DefaultWorkerConcurrency, "asynq Concurrency of both servers of the worker section")
	workerProfile := fs.String("worker-profile", "", "write a Go CPU profile of the worker section's rounds to `file` (read it with go tool pprof)")
	drainShort := fs.Bool("drain-short", false, "run the drain section's short scenario (600 tasks, about 6 s a strategy) instead of the full one")
	drainSlow := fs.Bool("drain-slow", false, "run the drain section's slow-provider scenario (1,200 tasks of 20 tenants, answers after 250 ms) instead of the full one")
	drainWeighted := fs.Bool("drain-weighted", false, "run the drain section's scenario of unequal weights (1,440 tasks of 4 tenants weighted 3, 1, 1, 1) instead of the full one")
	drainConcurrency := fs.Int("drain-concurrency", bench.DefaultDrainConcurrency, "asynq Concurrency of each worker process of the drain section")
	only := fs.String("only", strings.Join(bench.Sections(), ","), "sections to run, comma-separated")
	fs.Usage = cli.Usage(fs, synopsis, env)

	if err := cli.Parse(fs, args, env); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, "", "", 0
		}
		fmt.Fprintln(stderr, "bench:", err)
		return cfg, "", "", 2
	}
	if *outDir == "" {
		fmt.Fprintln(stderr, "bench: --out is required: the directory for results.json and REPORT.md")
		return cfg, "", "", 2
	}
	if *duration <= 0 || *warmup <= 0 || *repeat <= 0 || *workerTasks <= 0 || *workerConcurrency <= 0 || *drainConcurrency <= 0 {
		fmt.Fprintln(stderr, "bench: --duration, --warmup, --repeat, --worker-tasks, --worker-concurrency and --drain-concurrency must be positive")
		return cfg, "", "", 2
	}
	cfg = bench.Config{
		RedisURL: *redisURL,
		Duration: *duration,
		Warmup:   *warmup,
		Repeat:   *repeat,

		WorkerTasks:       *workerTasks,
		WorkerConcurrency: *workerConcurrency,
		WorkerProfile:     *workerProfile,

		DrainShort:       *drainShort,
		DrainSlow:        *drainSlow,
		DrainWeighted:    *drainWeighted,
		DrainConcurrency: *drainConcurrency,

		Sections: strings.Split(*only, ","),
		Log:      stderr,
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return cfg, "", "", 2
	}
	return cfg, *outDir, *server, -1
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	cfg, out, redisServer, status := flags(args, stderr)
	if status >= 0 {
		return status
	}
	if cfg.RedisURL == "" {
		srv, err := startRedis(ctx, redisServer, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err, "(or give --redis)")
			return 1
		}
		defer srv.Close()
		cfg.RedisURL, cfg.OwnRedis = srv.URL(), true
	}

	res, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		if ctx.Err() != nil {
			return 130
		}
		return 1
	}
	if err := bench.WriteFiles(out, res); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stderr, "bench: wrote %s, %s and its plots\n", filepath.Join(out, "results.json"), filepath.Join(out, "REPORT.md"))
	return 0
}

// startRedis starts a redis-server of its own on loopback, within 30 s.
func startRedis(ctx context.Context, bin string, stderr io.Writer) (*redisproc.Server, error) {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	srv, err := redisproc.Start(sctx, bin)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "bench: started redis-server on %s\n", srv.Addr)
	return srv, nil
}
