package worker

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file is the one place that knows how asynq keeps its tasks in
// Redis (asynq v0.26: asynq:{<queue>}:t:<id>, a hash whose field state
// says where the task is; asynq:{<queue>}:pending, a list that workers pop
// from its right; asynq:{<queue>}:retry and :scheduled, sorted sets by due
// time). TestFrontOfQueue holds it to a real asynq server.

// frontScript moves a task waiting in its queue's retry or scheduled set to
// the front of its pending list, where the next worker to fetch takes it:
// asynq's own RunTask puts it at the back, behind any backlog. It mirrors
// the move asynq makes when a task falls due (state and pending_since).
//
// KEYS[1] the task's hash, KEYS[2] the pending list, KEYS[3] the retry
// set, KEYS[4] the scheduled set; ARGV[1] the task id, ARGV[2] now in Unix
// nanoseconds. A task already pending (its park ended, and asynq put it at
// the back) is moved to the front too. Reply: 1 moved; 0 the task does not
// exist; -1 it is active (its worker has not handed it back yet); -2 it
// cannot run (archived, completed, aggregating).
var frontScript = redis.NewScript(`
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  return 0
end
if state == 'active' then
  return -1
end
local removed = 0
if state == 'pending' then
  removed = redis.call('LREM', KEYS[2], 1, ARGV[1])
elseif state == 'retry' then
  removed = redis.call('ZREM', KEYS[3], ARGV[1])
elseif state == 'scheduled' then
  removed = redis.call('ZREM', KEYS[4], ARGV[1])
end
if removed == 0 then
  return -2
end
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'pending', 'pending_since', ARGV[2])
return 1
`)

// Results of frontScript.
const (
	frontMoved     = 1
	frontGone      = 0
	frontActive    = -1
	frontCannotRun = -2
)

// toFront moves the task id of queue to the front of its pending list and
// returns frontScript's reply.
func toFront(ctx context.Context, rdb redis.UniversalClient, queue, id string) (int64, error) {
	p := "asynq:{" + queue + "}:"
	keys := []string{p + "t:" + id, p + "pending", p + "retry", p + "scheduled"}
	return frontScript.Run(ctx, rdb, keys, id, strconv.FormatInt(time.Now().UnixNano(), 10)).Int64()
}

// backlogScript counts the tasks of a queue that wait, or will within a
// while: pending, active (fetched, perhaps waiting for a place), and in
// the retry and scheduled sets due by ARGV[1], in Unix seconds as asynq
// scores them. KEYS[1] the pending list, KEYS[2] the active list, KEYS[3]
// the retry set, KEYS[4] the scheduled set. Read only.
var backlogScript = redis.NewScript(`
return redis.call('LLEN', KEYS[1]) + redis.call('LLEN', KEYS[2])
  + redis.call('ZCOUNT', KEYS[3], '-inf', ARGV[1]) + redis.call('ZCOUNT', KEYS[4], '-inf', ARGV[1])
`)

// backlog returns backlogScript's count for queue, the sets' tasks due
// within ahead.
func backlog(ctx context.Context, rdb redis.UniversalClient, queue string, ahead time.Duration) (int64, error) {
	p := "asynq:{" + queue + "}:"
	keys := []string{p + "pending", p + "active", p + "retry", p + "scheduled"}
	return backlogScript.Run(ctx, rdb, keys, strconv.FormatInt(time.Now().Add(ahead).Unix(), 10)).Int64()
}
