package worker

import "time"

// ToFront is toFront, for the test that holds it to a real asynq.
var ToFront = toFront

// SetLineIdle sets the longest sleep of srv's dispatch loop, before it runs.
func SetLineIdle(srv *Server, d time.Duration) { srv.throttle.fair.idle = d }
