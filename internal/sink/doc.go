// Package sink is the demo SMS provider of cmd/sink: an http.Handler that
// implements the webhook contract of the worker's --sms-webhook (POST /sms
// with {"id", "tenant", "to", "body"} as JSON and Idempotency-Key set to the
// id), answers 200, and logs one line per message with how many arrived in
// the last window, so the logs show throttled delivery.
//
// GET /report gives the Report: overall and per tenant, the messages
// received, the duplicates (ids that arrived again) and the most received
// in any span of the window: what a script needs to check that no limit was
// exceeded as the provider saw it. A Sink keeps every receipt in memory: it
// is for demos and tests.
package sink
