package worker_test

import (
	"context"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/policies"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/worker"
)

// Example is the tour of the Go API in the README, which TestREADME keeps
// identical to the code between the markers. It needs a Redis at
// localhost:6379, so it is compiled but not run by go test.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	mux := asynq.NewServeMux()
	// README tour begins
	// The limiter: an exact sliding window per key, shared through Redis.
	l := throttle.NewLimiter(rdb) // a *redis.Client, ClusterClient or Ring
	d, err := l.Allow(ctx, "sms:tenant:acme", throttle.PerSecond(10))
	if err == nil && !d.Allowed {
		wait := d.RetryAfter // exact: when this request will fit
		_ = wait
	}

	// The producer: typed, validated tasks; bad input never reaches Redis.
	pc := producer.NewClient(asynq.RedisClientOpt{Addr: "localhost:6379"})
	info, err := pc.EnqueueSMS(ctx, "acme", producer.SMS{To: "+15551234567", Body: "Your code is 1234"},
		asynq.TaskID("otp-991")) // idempotent enqueue

	// The worker: an asynq server whose tasks ask the limiter first.
	rules, err := policies.Open("examples/policies.yaml")
	srv, err := worker.NewServer(rdb, worker.Config{
		Policies: rules,
		SMS:      &provider.Webhook{URL: "https://sms.example/send"},
		Email:    &provider.SMTP{Addr: "smtp.example.com:587", From: "noreply@example.com"},
	})
	err = srv.Run(ctx) // until ctx is done, then a graceful shutdown

	// Or throttle your own asynq server's handlers with the middleware:
	t, err := worker.NewThrottle(l, rules, &worker.ThrottleConfig{DelayedTaskCheckInterval: time.Second})
	mux.Use(t.Middleware) // with asynq.Config{IsFailure: worker.IsFailure,
	// RetryDelayFunc: worker.RetryDelay(nil), ErrorHandler: worker.ErrorHandler(nil)}
	// README tour ends
	_, _ = info, err
}
