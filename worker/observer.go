package worker

import (
	"github.com/sluicehq/sluice/provider"
)

// An Observer is told what a Server does: each limiter decision, each
// provider's answer and each task sent back to the queue by throttling.
// Each method takes an event struct, so that a new fact about an event is
// a new field, not a new method. A Server calls its observers
// (Config.Observers) in order, in the task's goroutine: an Observer must be
// quick and safe for concurrent use.
//
// Package status holds the two that Sluice ships: status.Metrics (the
// Prometheus metrics) and status.Activity (what the status page shows).
type Observer interface {
	// ObserveDecision is told of each limiter call of the Throttle
	// middleware, before ThrottleConfig.OnDecision.
	ObserveDecision(DecisionEvent)

	// ObserveProvider is told of each provider's answer to a message.
	ObserveProvider(ProviderEvent)

	// ObserveThrottled is told of each task sent back to the queue to run
	// later, without spending its retry budget (provider.IsThrottled),
	// before Config.ErrorHandler.
	ObserveThrottled(ThrottledEvent)
}

// ProviderEvent is a provider's answer to one message: the name the
// Server observes it under ("sms" or "email"), the task's ID and tenant,
// and what its Send returned (Err, nil when the provider took the
// message). It is provider.Event, which package provider defines so as
// not to import worker.
type ProviderEvent = provider.Event

// ThrottledEvent is one task sent back to the queue by throttling, as
// asynq's error handler sees it.
type ThrottledEvent struct {
	// TaskType and TaskID are those of the task sent back.
	TaskType, TaskID string

	// Err is what the task returned: it wraps a *provider.ThrottledError,
	// which says what held the task back (ThrottledError.By, or
	// FromProvider).
	Err error
}
