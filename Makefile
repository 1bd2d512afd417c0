# The test command of the README: formatting, vet, golangci-lint, and the
# whole suite with the race detector, on a real Redis (README "Try it",
# docs/TESTING.md). Packages run one at a time (-p 1): some tests bound what
# happens in time (the demo's late tenant served within its slots, no
# second at the provider over the limit under sustained load), and on two
# cores another package's worker processes beside them stretch those
# times; each package's own tests still run in parallel.
.PHONY: test bench bench-go

GO ?= go

# golangci-lint, pinned, built from the Go module proxy on first use: the
# shape rules of .golangci.yml (no function over 80 lines, no copied block,
# no tangled function) and the usual vet-style checks.
GOLANGCI_LINT ?= $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

# The tests run with what .ci/test-deps.sh sets up (it installs what is
# missing as root on Debian, or stops with one message naming it), and with
# CI=true, so that a test without its Redis, Docker or Chromium fails
# rather than skips.
test: export CI = true
test: export REDIS_IMAGE ?= sluice-redis:local
test: export TESTCONTAINERS_RYUK_DISABLED = true
test: export TESTCONTAINERS_HOST_OVERRIDE = 127.0.0.1
test:
	.ci/test-deps.sh
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...
	cd bench && $(GO) vet ./... && $(GOLANGCI_LINT) run ./...
	cd deploy/kubernetes && $(GO) vet ./... && $(GOLANGCI_LINT) run ./... && $(GO) test -count=1 ./...
	$(GO) test -race -shuffle=on -count=1 -p 1 -timeout 25m ./...
	# Again, every script run with keycheck.lua in
	# front: a command on a key not in KEYS fails (docs/SCRIPTS.md).
	SLUICE_LUA_KEYCHECK=1 $(GO) test -shuffle=on -count=1 -p 1 -timeout 10m ./throttle/ ./policies/
	cd bench && $(GO) test -race -shuffle=on -count=1 -p 1 -timeout 10m ./...

# The benchmark harness, a module of its own in bench/ (bench/README.md):
# the limiter against the round-trip floor and redis_rate, Redis memory per
# key, asynq end to end, and a backlog drained by worker processes, on a
# redis-server of its own unless REDIS_URL is set. It writes
# $(BENCH_OUT)/results.json, $(BENCH_OUT)/REPORT.md and the PNG plots the
# report embeds, BENCH_OUT being relative to bench/. The default, report,
# is the committed report: run this target to regenerate it (minutes: the
# drain section alone takes about 6 on 2 cores).
BENCH_OUT ?= report

bench:
	cd bench && $(GO) run ./cmd/bench --out $(BENCH_OUT)

# The go test benchmarks of the limiter: BenchmarkAllow and
# BenchmarkMemoryPerUnit; BenchmarkFunctionVsScript, one script body as
# EVALSHA and as FCALL; BenchmarkScriptSetUp, what a script's tables and
# functions cost a call; BenchmarkScriptArguments, what numbers cost as
# arguments of redis.call; BenchmarkArrivalGuards, the fair lines'
# admission with and without the reads that guard it; and
# BenchmarkLineSpan, a denial in the first come, first served line with
# and without the search's span count; BenchmarkIdleQueues, what an idle
# worker costs its Redis per queue it serves; BenchmarkShardsDrain, a
# drain's Redis CPU per master with 1 and 3 shards, and BenchmarkCLIDrain,
# the same drain through `enqueue bulk` and two `worker` processes, and
# BenchmarkWorkerBinary, one `worker` process's cost a task with and
# without rules (docs/SCALING.md).
bench-go:
	$(GO) test -run '^$$' -bench '^Benchmark(Allow|MemoryPerUnit)$$' -benchtime 2s ./throttle
	cd bench && $(GO) test -run '^$$' -bench FunctionVsScript -count 3 ./internal/bench
	cd bench && $(GO) test -run '^$$' -bench ScriptSetUp -count 3 ./internal/bench
	cd bench && $(GO) test -run '^$$' -bench ScriptArguments -count 3 ./internal/bench
	$(GO) test -run '^$$' -bench ArrivalGuards -count 3 ./throttle
	$(GO) test -run '^$$' -bench LineSpan -count 3 ./throttle
	$(GO) test -run '^$$' -bench IdleQueues -benchtime 1x ./worker
	$(GO) test -run '^$$' -bench ShardsDrain -benchtime 1x -timeout 20m ./worker
	$(GO) test -run '^$$' -bench CLIDrain -benchtime 1x -timeout 10m ./integration_test
	$(GO) test -run '^$$' -bench WorkerBinary -benchtime 1x -count 2 -timeout 10m ./integration_test
