#!/usr/bin/env bash
# Runs each fuzz target for a short time (FUZZTIME, default 15s: five
# targets, 75 s of fuzzing), one at a time: `go test -fuzz` takes one target
# per run. `make test` has already run every target's seeds and committed
# corpus (testdata/fuzz/<target>/) as plain tests; this looks for new
# inputs that break them. No target needs Redis. A failing input is written
# to testdata/fuzz/<target>/ and the script fails; commit the input with
# the fix (docs/TESTING.md, "Fuzzing").
#
# usage: .ci/fuzz.sh            FUZZTIME=2m .ci/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-15s}

# package target
targets=(
  "./throttle FuzzRedisKey"
  "./producer FuzzDecodePayload"
  "./producer FuzzReadBulk"
  "./worker FuzzParsePolicies"
  "./worker FuzzParseRetryAfter"
)

# A target written but not listed here would never be fuzzed.
listed=$(printf '%s\n' "${targets[@]}" | awk '{print $2}' | sort)
found=$(grep -rhoE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sed 's/^func //' | sort)
if [ "$listed" != "$found" ]; then
  echo "fuzz.sh: the targets listed here differ from the Fuzz functions of the repository:"
  diff <(echo "$listed") <(echo "$found") || true
  exit 1
fi

for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "fuzz: $name ($pkg) for $fuzztime"
  # Minimizing each new input can take 60 s by default, most of a short
  # run: 1 s keeps the time for fuzzing.
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1s "$pkg"
done
