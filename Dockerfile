# Sluice's commands in one small image: worker (the entrypoint), enqueue, admin and
# sink, static binaries on distroless, as a non-root user, with the CA
# certificates that TLS to providers and to rediss:// needs.
#
#   docker build -t sluice .
#   docker run --rm sluice --help                                 # the worker
#   docker run --rm --entrypoint /usr/local/bin/enqueue sluice --help
#   docker run --rm --entrypoint /usr/local/bin/sink sluice --help

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a change of code does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static (no cgo), without local paths or symbols. No BuildKit-only syntax,
# so that Debian's docker.io (20.10) and docker-compose (1.29) build it too.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/ ./cmd/worker ./cmd/enqueue ./cmd/sink ./cmd/admin

# Distroless static: CA certificates, tzdata, /etc/passwd with nonroot
# (65532), no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/worker"]
