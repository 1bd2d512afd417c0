package lua_test

import (
	"crypto/sha1"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/throttle"
)

// TestSourcesAreWhatRuns: DecideSource and PeekSource are the texts whose
// SHA-1 the scripts send with EVALSHA, so that tests built on them run what
// the limiter runs; each has its includes in place and no include line left.
func TestSourcesAreWhatRuns(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		script *redis.Script
		src    string
	}{
		{"decide.lua", lua.Decide, lua.DecideSource()},
		{"peek.lua", lua.Peek, lua.PeekSource()},
	}
	for _, c := range cases {
		sum := sha1.Sum([]byte(c.src))
		if got, want := c.script.Hash(), hex.EncodeToString(sum[:]); got != want {
			t.Errorf("%s: hash %s, want the SHA-1 of its source, %s", c.name, got, want)
		}
		// Each file's header opens with its name, at the start of a line.
		for _, part := range []string{"\n" + c.name + ":", "\n-- logs_head.lua:", "\n-- logs_search.lua:", lua.CountersSource()} {
			if strings.Count("\n"+c.src, part) != 1 {
				t.Errorf("%s: holds %q %d times, want once", c.name, part[:min(len(part), 40)], strings.Count(c.src, part))
			}
		}
		if strings.Contains(c.src, "-- #include") {
			t.Errorf("%s: an include line is left", c.name)
		}
	}
	// The two functions are locals of the chunk, set by define_counters:
	// the scripts see them, and Redis, which refuses scripts that make
	// globals, runs them (the tests of package throttle run them).
	if !strings.Contains(lua.CountersSource(), "\nlocal counter_check, counter_record\nlocal function define_counters()\n") {
		t.Errorf("counters.lua does not declare counter_check and counter_record as locals before define_counters")
	}
}

// TestNoLongScripts: no .lua file is over 400 lines, so that each reads as
// one operation or one set of helpers.
func TestNoLongScripts(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no .lua files: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "\n"); n > 400 {
			t.Errorf("%s: %d lines, want at most 400", f, n)
		}
	}
}

// TestLeaseParts: the scripts that read a lease divide by the same whole
// as throttle.LeaseParts, and send a caller refused a place back in
// throttle.BalancePeriod.
func TestLeaseParts(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("lease_worth.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"local leaseParts = " + strconv.Itoa(throttle.LeaseParts) + "\n",
		"local leaseRetry = " + strconv.FormatInt(throttle.BalancePeriod.Microseconds(), 10) + "\n",
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("lease_worth.lua lacks %q (throttle's constants)", strings.TrimSpace(want))
		}
	}
}
