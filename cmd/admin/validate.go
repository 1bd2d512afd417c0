package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/policies"
)

// runValidate runs "admin validate" with args.
func runValidate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const name = "admin validate"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	if code, ok := parseFlags(fs, args, stdout, stderr, "FILE"); !ok {
		return code
	}
	if fs.NArg() == 0 {
		return failf(stderr, 2, name, "needs FILE, or - for standard input, after the flags (see --help)")
	}
	var (
		p   *policies.Policies
		err error
	)
	if path := fs.Arg(0); path == "-" {
		var data []byte
		if data, err = io.ReadAll(stdin); err != nil {
			return failf(stderr, 1, name, "standard input: %v", err)
		}
		p, err = policies.Parse("standard input", data)
	} else {
		p, err = policies.Load(path)
	}
	if err != nil {
		return failf(stderr, 1, name, "%v", err)
	}
	fmt.Fprintln(stdout, p.Summary())
	return 0
}
