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
//     against one redis_rate key, which is O(1).
//   - worker: asynq tasks per second end to end, plain asynq against asynq
//     with worker.Throttle's Middleware under rules that apply to every
//     task but are never reached. Each round enqueues the same number of
//     SMS tasks on a fresh queue, starts a server whose handler only counts,
//     and times it from Start until the last task completed; the two take
//     turns, and the report gives the median and the per-round ratio
//     sluice/plain. Queues and limiter keys are deleted after each round.
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
