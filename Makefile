# The test command of the README: formatting, vet, and the whole suite with
# the race detector, on a real Redis (see README "Running the tests").
.PHONY: test bench

GO ?= go

test:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -race -shuffle=on -count=1 -timeout 20m ./...

# Benchmarks of the limiter against the round-trip floor.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./throttle
