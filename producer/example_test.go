package producer_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/hibiken/asynq"
	"github.com/sluicehq/sluice/producer"
)

// This example needs a Redis at localhost:6379, so it is compiled but not
// run by go test; the tests check the same behaviour.
func ExampleClient_EnqueueSMS() {
	c := producer.NewClient(asynq.RedisClientOpt{Addr: "localhost:6379"})
	defer c.Close()

	info, err := c.EnqueueSMS(context.Background(), "acme",
		producer.SMS{To: "+15551234567", Body: "Your code is 123456"},
		asynq.Queue("sms"), asynq.MaxRetry(3))
	if fe, ok := errors.AsType[*producer.FieldError](err); ok {
		fmt.Println("fix the field", fe.Field+":", fe.Problem)
		return
	}
	if err != nil {
		panic(err) // Redis failed
	}
	fmt.Println("queued", info.ID)
}

func ExampleSMS_Validate() {
	err := producer.SMS{To: "+1555x", Body: "hi"}.Validate()
	fmt.Println(errors.Is(err, producer.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// invalid task: to "+1555x": not an E.164 phone number (+ then 2 to 15 digits, no leading 0)
}
