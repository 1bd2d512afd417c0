// Package producer builds and enqueues Sluice's tasks: an SMS or an email to
// send on behalf of a tenant, queued on Redis with asynq for the workers to
// send through rate-limited providers.
//
// Everything is validated before anything is sent to Redis: a task that
// would fail in a worker for bad input is refused here instead, with an error
// that matches ErrInvalid (errors.Is) and, when one field is wrong, a
// *FieldError (errors.As) naming it. The same checks run again in the worker
// through DecodeSMS and DecodeEmail, so a payload written by another program
// gets no further than one written by this package. A payload larger than
// MaxPayload is refused whole, by its length, before it is decoded.
//
// # Tasks
//
// A task's type is TypeSMS or TypeEmail, its payload the JSON of SMS or Email,
// and it carries two headers: HeaderTenant, the tenant the message is sent
// for (the key of its quotas), and HeaderMaxRetry, the number of times a
// failed send may be retried.
//
// # Why MaxRetry becomes a header
//
// Workers return a throttle denial as an error that their Config.IsFailure
// does not count as a failure, so asynq puts the task back in the retry set
// without increasing its Retried count. But asynq v0.26 checks
// Retried >= MaxRetry before it looks at IsFailure: a task enqueued with
// MaxRetry(0) would be archived the first time its tenant is over quota,
// without ever failing.
//
// So the caller's retry budget is recorded in the HeaderMaxRetry header
// (asynq.MaxRetry(n) among the options; DefaultMaxRetry, asynq's own default,
// without one; a negative n counts as 0, as in asynq), and the task is given
// asynq.MaxRetry(n+1) instead. The worker counts real failures against the
// header and archives the task itself when the budget is spent, one step
// before asynq's limit; denials never increase Retried, so asynq's limit is
// never reached.
//
// # Uniqueness
//
// asynq.Unique judges a task by its queue, type and payload, not by its
// headers: two tenants enqueueing the same message to the same recipient
// with Unique in the same queue are duplicates of each other.
package producer
