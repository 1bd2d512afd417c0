package provider_test

import (
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/producer"
)

var (
	goodSMS   = producer.SMS{To: "+15551234567", Body: "Your code is 123456"}
	goodEmail = producer.Email{To: "ada@example.com", Subject: "Welcome", Body: "Hello Ada", From: "team@example.com"}
)

// ignoreTime leaves the "time" of slog records out of comparisons.
var ignoreTime = cmp.FilterPath(func(p cmp.Path) bool {
	mi, ok := p.Last().(cmp.MapIndex)
	return ok && mi.Key().String() == "time"
}, cmp.Ignore())
