package bench

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/redis/go-redis/v9"
)

// todayRev is the commit whose decision script the contender "sluice
// today" runs: the script of 2026-11-26, before the work on the cost of a
// decision, so that every run measures a change against it rather than a
// figure remembered from another run.
const todayRev = "23be620dede635286dfa39ac2555c78e39b2b561"

// todayScript reads todayRev's decision script from git history:
// lua/counters.lua, then lua/allow.lua, as package lua put them together.
// Without git or that commit (a shallow clone, a tarball) it returns the
// reason, and the contender is left out.
func todayScript(ctx context.Context) (*redis.Script, error) {
	parts := make([]string, 0, 2)
	for _, file := range []string{"lua/counters.lua", "lua/allow.lua"} {
		out, err := exec.CommandContext(ctx, "git", "show", todayRev+":"+file).Output()
		if err != nil {
			return nil, fmt.Errorf("git show %.7s:%s: %w", todayRev, file, err)
		}
		parts = append(parts, string(out))
	}
	return redis.NewScript(strings.Join(parts, "\n")), nil
}
