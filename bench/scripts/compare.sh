#!/usr/bin/env bash
# compare.sh REV [SECTION] [ROUNDS]: the bench's SECTION (limiter or line)
# for the code at git revision REV and for the working tree, run in turns
# ROUNDS times each (default 3) in one sitting, and the median ratios
# after/before of the Redis time per call. Needs go, git and python3; run
# from anywhere in the repository. Keys go to the bench's own redis-server.
set -euo pipefail
rev=${1:?usage: compare.sh REV [limiter|line] [ROUNDS]}
section=${2:-limiter}
rounds=${3:-3}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add --detach "$work/old" "$rev" >/dev/null
go -C "$work/old/bench" build -o "$work/before" ./cmd/bench
go -C "$root/bench" build -o "$work/after" ./cmd/bench
cd "$root"
for r in $(seq "$rounds"); do
  for side in before after; do
    "$work/$side" --out "$work/$side-$r" --only "$section" --repeat 2 --duration 1s >"$work/$side-$r.log" 2>&1
  done
done
python3 - "$work" "$section" "$rounds" <<'PY'
import json, statistics, sys
work, section, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = {s: [json.load(open(f"{work}/{s}-{r}/results.json")) for r in range(1, rounds + 1)] for s in ("before", "after")}
def show(name, values):
    b, a = values["before"], values["after"]
    print(f"{name:32} before {' '.join(f'{x:6.1f}' for x in b)} | after {' '.join(f'{x:6.1f}' for x in a)}"
          f" | after/before {statistics.median(a) / statistics.median(b):.3f} (before max/min {max(b) / min(b):.2f})")
if section == "limiter":
    for vi, v in enumerate(runs["before"][0]["limiter"]["variants"]):
        for pi, p in enumerate(v["points"]):
            show(f"{v['name']} callers {p['callers']} us",
                 {s: [x["limiter"]["variants"][vi]["points"][pi]["sluice"]["median"]["redis_us_per_call"] for x in runs[s]] for s in runs})
else:
    for ri, row in enumerate(runs["before"][0]["line"]["rows"]):
        for f in ("fair_deny_us", "fair_admit_us", "fair_newcomer_us"):
            show(f"waiting {row['waiting']} {f}", {s: [x["line"]["rows"][ri][f] for x in runs[s]] for s in runs})
PY
