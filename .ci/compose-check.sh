#!/usr/bin/env bash
# CI: runs docker-compose.yml as a user would (Redis, two workers, the demo
# SMS sink, the producer enqueuing examples/burst.jsonl), with the images
# built here instead of pulled (.ci/compose.override.yml: no registry is
# reachable), and checks from the sink's GET /report that every message of
# the burst arrived once and that no limit of examples/policies.yaml was
# exceeded as the sink saw it (internal/composecheck). The stack is always torn
# down, volumes included; on failure the end of its logs is printed.
#
# usage: .ci/compose-check.sh   (needs docker, docker-compose or the compose
#                               plugin, go, and redis-server for the image)
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
if docker compose version >/dev/null 2>&1; then
  compose_cmd=(docker compose)
elif command -v docker-compose >/dev/null; then
  compose_cmd=(docker-compose)
else
  echo "compose-check: neither docker compose nor docker-compose is installed" >&2
  exit 1
fi
echo "compose-check: using $("${compose_cmd[@]}" version | head -1)"

# A project of its own, so that a stack the user runs is left alone.
project=sluice-ci-$$
compose() { "${compose_cmd[@]}" -p "$project" -f docker-compose.yml -f .ci/compose.override.yml "$@"; }

# The files the stack reads and the check compares with, whatever the
# environment says; ports published on loopback, chosen by Docker.
export SLUICE_POLICIES_FILE=./examples/policies.yaml
export SLUICE_BURST_FILE=./examples/burst.jsonl
export REDIS_PORT=0 SINK_PORT=0

.ci/redis-image.sh sluice-redis:local
.ci/sluice-image.sh sluice:ci
bin=$(mktemp -d)
go build -o "$bin/composecheck" ./internal/composecheck

ok=0
finish() {
  if [ "$ok" != 1 ]; then
    echo "compose-check: FAILED; the end of the stack's logs:" >&2
    compose logs --no-color --tail=40 >&2 || true
    compose ps >&2 || true
  fi
  compose down -v --remove-orphans >/dev/null 2>&1 || echo "compose-check: could not tear down project $project" >&2
  rm -rf "$bin"
}
trap finish EXIT

up=$SECONDS
compose up -d --no-build
sink=$(compose port sink 8080)
case $sink in
  127.0.0.1:*) ;;
  *) echo "compose-check: the sink is published on '$sink', not on loopback" >&2; exit 1 ;;
esac

# Each worker's operations address, published on a loopback port.
ops=()
for i in $(seq "$(compose ps -q worker | wc -l)"); do
  addr=$(compose port --index "$i" worker 9464)
  case $addr in
    127.0.0.1:*) ops+=(--ops "$addr") ;;
    *) echo "compose-check: worker $i's operations address is published on '$addr', not on loopback" >&2; exit 1 ;;
  esac
done

"$bin/composecheck" --report "http://$sink/report" --timeout 90s \
  --policies "$SLUICE_POLICIES_FILE" --burst "$SLUICE_BURST_FILE" "${ops[@]}"

# The producer ran once and enqueued everything; the workers and the sink
# are still up (they do not restart here: a crash would show).
producer=$(compose ps -a -q producer)
if [ "$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$producer")" != "exited 0" ]; then
  echo "compose-check: the producer did not exit 0:" >&2
  docker logs "$producer" >&2
  exit 1
fi
docker logs "$producer" 2>&1 | sed 's/^/producer: /'
for service in worker sink; do
  for c in $(compose ps -q "$service"); do
    if [ "$(docker inspect -f '{{.State.Running}}' "$c")" != true ]; then
      echo "compose-check: a $service container stopped" >&2
      exit 1
    fi
  done
done
echo "compose-check: $(compose ps -q worker | wc -l) workers, each ready with its metrics; the sink's last lines:"
compose logs --no-color --tail=3 sink

ok=1
echo "compose-check: ok in $((SECONDS - start)) s ($((SECONDS - up)) s from compose up)"
