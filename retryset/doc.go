// Package retryset reads what waits in asynq's retry sets: the tasks that
// were throttled back (and by what: ThrottledBy reads the message of a
// provider.ThrottledError as asynq keeps it), and those that failed. The
// admin command (admin throttled) and the status page read the backlog
// through it, without importing the worker.
//
// Read reads a queue's whole retry set, Head its head; Queues lists the
// queues Redis knows. Everything is safe for concurrent use.
package retryset
