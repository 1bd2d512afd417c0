#!/usr/bin/env bash
# Builds a Redis image from the Debian redis-server and redis-cli binaries and
# their shared libraries, with `docker import`: these machines reach no
# container registry. The image behaves like the official one for what the
# tests use: `redis-server` and `redis-cli` on PATH, CMD redis-server,
# working directory /data.
#
# usage: .ci/redis-image.sh [tag]   (default tag sluice-redis:local)
set -euo pipefail

tag=${1:-sluice-redis:local}
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "redis image $tag already present"
  exit 0
fi

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

mkdir -p "$root/usr/bin" "$root/data" "$root/tmp" "$root/etc"
chmod 1777 "$root/tmp"
# redis-server is a symlink whose name picks the mode: copy the file under the name.
cp -L /usr/bin/redis-server "$root/usr/bin/redis-server"
cp -L /usr/bin/redis-cli "$root/usr/bin/redis-cli"
for bin in /usr/bin/redis-server /usr/bin/redis-cli; do
  ldd "$bin" | grep -o '/[^ ]*' | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -Ln "$lib" "$root$lib"
  done
done
echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"

tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/bin' \
  --change 'WORKDIR /data' \
  --change 'EXPOSE 6379' \
  --change 'CMD ["redis-server"]' \
  - "$tag" >/dev/null
echo "built redis image $tag from $(redis-server --version | cut -d' ' -f1-3)"
