package worker

import "time"

// ToFront is toFront, for the test that holds it to a real asynq.
var ToFront = toFront

// SetLineIdle sets the longest sleep of srv's dispatch loops, before they run.
func SetLineIdle(srv *Server, d time.Duration) {
	for _, f := range srv.throttle.fair.lines {
		f.idle = d
	}
}

// SetDamageTimes sets how long after its last sight a refusal of Redis
// counts as repaired, and the longest backoff from one, before srv runs.
func SetDamageTimes(srv *Server, forget, most time.Duration) {
	srv.throttle.damage.forget, srv.throttle.damage.most = forget, most
}
