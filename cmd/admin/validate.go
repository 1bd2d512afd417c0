package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/internal/readlimit"
	"github.com/sluicehq/sluice/policies"
)

// runValidate runs "admin validate" with args. ctx's end (SIGINT,
// SIGTERM) stops it at once, even while it reads a terminal or a pipe.
func runValidate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const name = "admin validate"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	if code, ok := parseFlags(fs, args, stdout, stderr, "FILE"); !ok {
		return code
	}
	if fs.NArg() == 0 {
		return failf(stderr, 2, name, "needs FILE, or - for standard input, after the flags (see --help)")
	}
	type result struct {
		p   *policies.Policies
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := load(fs.Arg(0), stdin)
		done <- result{p, err}
	}()
	select {
	case <-ctx.Done():
		return failf(stderr, 1, name, "interrupted")
	case r := <-done:
		if r.err != nil {
			return failf(stderr, 1, name, "%v", r.err)
		}
		fmt.Fprintln(stdout, r.p.Summary())
		return 0
	}
}

// load reads and checks the policies file at path, or stdin for "-",
// reading no more of stdin than policies.MaxFileSize and a byte.
func load(path string, stdin io.Reader) (*policies.Policies, error) {
	if path != "-" {
		return policies.Load(path)
	}
	data, err := readlimit.All(stdin, policies.MaxFileSize)
	if tl, ok := errors.AsType[*readlimit.TooLargeError](err); ok {
		return nil, fmt.Errorf("standard input: %w: the file %v", policies.ErrInvalid, tl)
	}
	if err != nil {
		return nil, fmt.Errorf("standard input: %w", err)
	}
	return policies.Parse("standard input", data)
}
