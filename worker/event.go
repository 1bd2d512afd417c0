package worker

import (
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// DecisionEvent is one limiter call of the Throttle middleware, given to
// ThrottleConfig.OnDecision.
type DecisionEvent struct {
	// TaskType and Tenant are those of the task asked about.
	TaskType, Tenant string

	// Rules names the rules checked, in the order of Decision.Checks.
	Rules []string

	// Limits is the limit (or concurrency) each of Rules was held to: an
	// adaptive rule's limit in force, else the policies' limit.
	Limits []int

	// Decision is the limiter's answer: Decision.Allowed, and when denied
	// Decision.Denied indexes Rules. It is the zero value when Err is set.
	Decision throttle.MultiDecision

	// Err is the limiter's error: Redis failed, or the task's context
	// ended during the call. The middleware then follows its FailureMode.
	Err error

	// Latency is how long the limiter call took, as the worker saw it.
	Latency time.Duration

	// FailedOpen reports that the limiter could not decide and the task
	// runs without a decision (FailOpen).
	FailedOpen bool

	// Outcome is what the fair lines decided (throttle.Admitted, Placed or
	// Parked); 0 when the Throttle serves first come, first served.
	Outcome throttle.Outcome

	// At is, for Admitted and Placed, the time the task's entries stand
	// at in its rules' sliding logs, by Redis's clock (throttle.Turn.At);
	// first come, first served, for an admission (MultiDecision.At).
	At time.Time

	// Shadow holds the decisions of the task's rules in shadow mode, made
	// once the task was admitted by the others (Rules, which never name a
	// shadow rule). A task whose rules are all in shadow mode has an event
	// with no Rules, allowed, and its Shadow decisions.
	Shadow []ShadowDecision
}

// ShadowDecision is what a rule in shadow mode decided for a task that ran
// anyway: Allowed, or the limiter's error (Err).
type ShadowDecision struct {
	Rule    string
	Allowed bool
	Err     error
}
