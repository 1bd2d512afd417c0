package throttle_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/throttle"
)

// These examples need a Redis at localhost:6379, so they are compiled but
// not run by go test; the tests check the same behaviour.

func ExampleLimiter_Allow() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	l := throttle.NewLimiter(rdb)

	d, err := l.Allow(ctx, "sms:tenant:acme", throttle.PerSecond(10))
	if err != nil {
		panic(err) // Redis failed; a denial is not an error
	}
	if !d.Allowed {
		fmt.Println("throttled; try again in", d.RetryAfter)
		return
	}
	fmt.Println("sent;", d.Remaining, "left in this window")
}

func ExampleLimiter_AllowMulti() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	l := throttle.NewLimiter(rdb)

	// A message counts against its tenant's quota and the provider
	// account's limit, or against neither.
	md, err := l.AllowMulti(ctx, []throttle.Check{
		{Key: "sms:tenant:acme", Policy: throttle.PerMinute(100), Cost: 1},
		{Key: "sms:tenant:acme:day", Policy: throttle.PerDay(5000), Cost: 1},
		{Key: "sms:provider:twilio", Policy: throttle.Policy{Limit: 30, Window: time.Second}, Cost: 1},
	})
	if err != nil {
		panic(err)
	}
	if !md.Allowed {
		fmt.Printf("check %d denied; retry in %v\n", md.Denied, md.RetryAfter)
	}
}
