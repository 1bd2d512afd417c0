--[[
waits.lua: whether a class (a task type) waits in the fair lines with a
dispatch loop taking in the tasks parked at enqueue, for a producer
deciding to park a task (docs/FAIRNESS.md, "Parked at enqueue").

A waiting class is in the lines' wake set. A loop that takes in the
entrance sets the heartbeat at every Dispatch, for a few seconds: without
it (workers stopped, of an earlier release, or serving first come, first
served) nothing would take the task in, and it is better off on the
pending list.

KEYS[1]  the wake set: <prefix>{<group>}qw
KEYS[2]  the entrance's heartbeat: <prefix>{<group>}qd
ARGV[1]  class (key-encoded)

Reply: 1 the class waits and a loop takes the entrance in; 0 otherwise.
]]

if redis.call('EXISTS', KEYS[2]) == 0 or not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
return 1
