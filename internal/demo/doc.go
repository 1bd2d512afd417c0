// Package demo is `worker --demo`: a run of Sluice that needs nothing but
// Go. It enqueues a burst of SMS tasks for three tenants through the
// producer, and once a third are sent one more for a late tenant with
// nothing waiting (late.go: the summary says how long that one waited),
// sends them with a worker (worker.NewServer) in the same process
// through a provider that records when each message arrives, shows the
// progress live, and ends with a summary and a verdict measured at the
// provider: every task sent exactly once, and no rule's window ever held
// more than its limit. It says at the start how long its tasks take at the
// limits, and stops at TimeoutFactor × that + TimeoutSlack, whatever is
// left to send (the verdict then fails): the longer the policies make the
// run, the longer it waits.
//
// Without a Redis URL it runs on miniredis (github.com/alicebob/miniredis/v2),
// a Redis-compatible server embedded in the process on 127.0.0.1. What
// Sluice needs of it was checked by running the project's own suites and
// asynq's against a miniredis server:
//
//   - throttle's tests (lua/decide.lua with TIME, ZREMRANGEBYSCORE, ZCARD,
//     ZRANGE WITHSCORES, ZCOUNT, ZADD, PEXPIRE, ZSCORE, ZREM and unpack;
//     Limiter.Hold, a MULTI of SET NX PX and PEXPIRE GT; key expiry),
//     producer's, worker's and the end-to-end integration_test all pass.
//     Scripts and MULTI run under miniredis's one lock, so they are atomic
//     as in Redis, and TIME reads the real clock.
//   - TTLs: miniredis keeps them frozen unless FastForward is called. With
//     ClockTTL(true) (v2.40) they run down with the real clock and keys
//     expire when a command next touches the database; without it a
//     provider hold never ends and window keys never expire, and five
//     throttle tests fail. The demo turns it on.
//   - asynq v0.26's own suites (internal/rdb: enqueue, dequeue, done,
//     retry, archive, forward, lease extension, recovery, server state;
//     and the root package) pass but for INFO sections (RedisInfo; Sluice
//     does not use it) and two unique-task checks: miniredis's TTL
//     truncates to the second where Redis rounds. Sluice reads PTTL, and
//     enqueues no unique tasks.
//   - The producer parks the late tenant's SMS at enqueue in the demo's
//     lines (MULTI, EXISTS and ZSCORE; RPUSH, LRANGE and LREM of the entrance,
//     PUBLISH), and TestRunLateTenant's embedded run sends it so.
//   - Every miniredis command locks the whole server, and with ClockTTL
//     sorts every key's name; fine for the demo's few hundred keys, not a
//     Redis for production.
package demo
