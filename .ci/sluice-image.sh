#!/usr/bin/env bash
# Builds the Sluice image without a registry (these machines reach none):
# the static binaries of worker, enqueue, sink and admin built here with go, the
# host's CA certificates and an /etc/passwd with the user nonroot (65532),
# put together with `docker import`. It is laid out like the image of the
# Dockerfile (distroless static, nonroot): binaries in /usr/local/bin,
# USER 65532, ENTRYPOINT the worker.
#
# usage: .ci/sluice-image.sh [tag]   (default tag sluice:ci; always rebuilt)
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${1:-sluice:ci}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp" "$root/home/nonroot"
chmod 1777 "$root/tmp"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$root/usr/local/bin/" ./cmd/worker ./cmd/enqueue ./cmd/sink ./cmd/admin
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"

# Owned by root, as in distroless, but the user's home (when run as root).
[ "$(id -u)" -ne 0 ] || chown 65532:65532 "$root/home/nonroot"

old=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
tar -C "$root" --numeric-owner -c . | docker import \
  --change 'USER 65532:65532' \
  --change 'WORKDIR /home/nonroot' \
  --change 'ENTRYPOINT ["/usr/local/bin/worker"]' \
  - "$tag" >/dev/null
# The image this one replaces, unless a container still uses it.
if [ -n "$old" ] && [ "$old" != "$(docker image inspect -f '{{.Id}}' "$tag")" ]; then
  docker rmi "$old" >/dev/null 2>&1 || true
fi
echo "built sluice image $tag from $(git describe --always --dirty 2>/dev/null || echo 'this tree')"
