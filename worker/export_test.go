package worker

// ToFront is toFront, for the test that holds it to a real asynq.
var ToFront = toFront
