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
