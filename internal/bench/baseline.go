package bench

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The decision script as it was on 2026-11-26 (commit 23be620, before the
// work on the cost of a decision): lua/counters.lua, then lua/allow.lua,
// as package lua put them together. The limiter section runs it as the
// contender "sluice today", one call a decision as NewLimiter's default
// then did, so that every run measures a change against it rather than a
// figure remembered from another run.
var (
	//go:embed baseline/counters-2026-11-26.lua
	todayCountersSource string
	//go:embed baseline/allow-2026-11-26.lua
	todayAllowSource string

	todayScript = redis.NewScript(todayCountersSource + "\n" + todayAllowSource)
)
