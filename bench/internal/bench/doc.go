// Package bench is the benchmark harness behind cmd/bench: it measures
// Sluice against baselines on a real Redis and writes the results as JSON
// (results.json) and as a Markdown report (REPORT.md).
//
// The harness runs sections, each a question with its own baselines:
//
//   - limiter: decisions per second and latency percentiles of
//     throttle.Limiter.Allow at several numbers of concurrent callers over
//     10,000 keys, against a trivial EVALSHA that returns 1 (the round trip
//     that any decision made in Redis costs at least: "floor") and against
//     github.com/go-redis/redis_rate/v10, a GCRA limiter ("redis_rate"). All
//     three share one go-redis client. Each measurement runs for a fixed
//     time after a warm-up; the contenders take turns in rounds whose order
//     rotates, and the report gives the median of the rounds and, for each
//     ratio, the median of the per-round ratios. It runs twice: with a
//     policy that allows every call and one that denies every call.
//   - memory: Redis MEMORY USAGE of a Sluice key holding 10 to 10,000 units
//     against one redis_rate key, which is O(1), and of a Sluice key under
//     each algorithm that keeps a few numbers per key (throttle.SlidingWindow,
//     GCRA, FixedWindow), filled to the same limit.
//   - accuracy: how far those algorithms stray from the exact sliding log,
//     simulated in Go on a clock of its own (no Redis, the same figures on
//     every run): the most admitted in any span of one window, and the
//     requests wrongly denied and admitted, on four patterns of arrivals.
//     A test checks the models it runs against the Lua functions in Redis.
//   - worker: asynq tasks per second end to end, plain asynq against asynq
//     with worker.Throttle's Middleware under rules that apply to every
//     task but are never reached. Each round enqueues the same number of
//     SMS tasks on a fresh queue, starts a server whose handler only counts,
//     and times it from Start until the last task completed; the two take
//     turns, and the report gives the median and the per-round ratio
//     sluice/plain. Queues and limiter keys are deleted after each round.
//   - drain: a backlog of SMS tasks for many tenants, under a quota per
//     tenant and a limit for the provider, drained by three worker
//     processes into a recording HTTP provider (internal/sink) under three
//     strategies: Sluice's worker, a naive use of the limiter, and asynq's
//     per-process rate-limiting pattern. It measures, on the provider's
//     arrival times, what was delivered, the arrivals over each limit, the
//     utilization and lateness against an ideal schedule, and the limiter
//     calls and dequeues per task. The worker processes are the harness's
//     own executable run again: a program that runs the section calls
//     RunWorkerIfChild first.
//
// WriteFiles writes, beside REPORT.md, PNG plots (gonum.org/v1/plot) of
// the limiter's throughput against callers and of the drain's arrivals per
// window against the limits, and the report embeds them.
//
// A section is an entry in the table of sections (bench.go) with a run
// function that fills its field of Results and a report function that
// writes its part of REPORT.md; later sections are added the same way.
//
// Measuring needs a Redis of its own or one it may write to: every key it
// writes starts with a fresh prefix, or holds it (asynq's queue keys), and
// is deleted at the end. redisproc.Start
// runs a redis-server process on loopback for the purpose.
package bench
