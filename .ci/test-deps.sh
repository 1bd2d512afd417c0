#!/usr/bin/env bash
# What `make test` needs beyond Go: redis-server and redis-cli, Chromium,
# Prometheus's promtool, a
# running Docker engine, the Redis image built from it, and the git history
# back to 0.1.0 (TestUpgradeFrom010). As root on Debian
# it installs and starts what is missing; anywhere else it stops at once with
# one message naming what is missing and the command that installs it. The
# tests then run with CI=true, so that none passes by skipping.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-cli)
command -v chromium >/dev/null || missing+=(chromium)
command -v dockerd >/dev/null || missing+=(docker)
command -v promtool >/dev/null || missing+=(prometheus)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q redis-server redis-tools docker.io chromium prometheus
  else
    echo "make test needs ${missing[*]}: on Debian, run as root" \
      "'apt-get install -y redis-server redis-tools docker.io chromium prometheus'," \
      "or run .ci/run as root, which installs them" >&2
    exit 1
  fi
fi

if ! docker info >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "make test needs a running Docker engine: start it ('sudo dockerd &')" >&2
    exit 1
  fi
  dockerd >/tmp/dockerd.log 2>&1 &
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || {
    echo "dockerd did not start:" >&2
    tail -20 /tmp/dockerd.log >&2
    exit 1
  }
fi

# Built locally: no registry is reachable. Quick when the image is there.
image=${REDIS_IMAGE:-sluice-redis:local}
docker image inspect "$image" >/dev/null 2>&1 || .ci/redis-image.sh "$image" >/dev/null

# TestUpgradeFrom010 builds Sluice 0.1.0 from the history: a shallow clone
# fetches the rest (best effort; the test names what is missing).
if [ "$(git rev-parse --is-shallow-repository 2>/dev/null)" = true ]; then
  git fetch -q --unshallow || echo "test-deps: could not fetch the history that TestUpgradeFrom010 needs" >&2
fi
