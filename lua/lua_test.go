package lua_test

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/lua"
)

// TestAllowSourceIsWhatAllowRuns: AllowSource is the text whose SHA-1
// Allow sends with EVALSHA, counters.lua first, so that tests built on it
// run what the limiter runs.
func TestAllowSourceIsWhatAllowRuns(t *testing.T) {
	t.Parallel()
	sum := sha1.Sum([]byte(lua.AllowSource()))
	if got, want := lua.Allow.Hash(), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Allow.Hash() = %s, want the SHA-1 of AllowSource(), %s", got, want)
	}
	src, counters := lua.AllowSource(), lua.CountersSource()
	if !strings.HasPrefix(src, counters+"\n") || !strings.Contains(src[len(counters):], "allow.lua") {
		t.Errorf("AllowSource() is not counters.lua, a newline, then allow.lua")
	}
	// The two functions are locals of the chunk, set by define_counters:
	// allow.lua sees them, and Redis, which refuses scripts that make
	// globals, runs it (the tests of package throttle run it).
	if !strings.Contains(counters, "\nlocal counter_check, counter_record\nlocal function define_counters()\n") {
		t.Errorf("counters.lua does not declare counter_check and counter_record as locals before define_counters")
	}
}
