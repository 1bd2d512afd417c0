#!/usr/bin/env bash
# Runs each fuzz target briefly (FUZZTIME, default 40000x: 40,000 inputs
# each, 7 to 19 s a target on 2 cores, about 70 s for the five), one at a
# time: `go test -fuzz` takes one target per run. A count, not a duration:
# with a duration, Go 1.26's fuzzing coordinator can fail a run that found
# nothing with "context deadline exceeded" as the time runs out
# (golang/go#75804, fixed in Go 1.27; CI saw it on FuzzReadBulk). `make test` has already run every target's seeds and committed
# corpus (testdata/fuzz/<target>/) as plain tests; this looks for new
# inputs that break them. No target needs Redis. A failing input is written
# to testdata/fuzz/<target>/ and the script fails; commit the input with
# the fix (docs/TESTING.md, "Fuzzing").
#
# usage: .ci/fuzz.sh            FUZZTIME=1000000x .ci/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-40000x}

# package target
targets=(
  "./throttle FuzzRedisKey"
  "./producer FuzzDecodePayload"
  "./producer FuzzReadBulk"
  "./policies FuzzParsePolicies"
  "./provider FuzzParseRetryAfter"
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
