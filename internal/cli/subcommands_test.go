package cli

import (
	"bytes"
	"fmt"
	"testing"
)

// TestSubcommands: the first argument picks a command, which gets the
// rest; help goes to stdout with status 0; a missing or unknown command is
// a one-line error on stderr listing the commands, with status 2.
func TestSubcommands(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderr   string
		commands []string // the names of the program's commands; default a, bb and ccc
	}{
		{name: "first command", args: []string{"a", "-x", "y"}, code: 10, stdout: `a ["-x" "y"]` + "\n"},
		{name: "last command, no arguments", args: []string{"ccc"}, code: 12, stdout: "ccc []\n"},
		{name: "help", args: []string{"help", "a"}, stdout: "usage: prog a|bb|ccc\n\nMore.\n"},
		{name: "-h", args: []string{"-h"}, stdout: "usage: prog a|bb|ccc\n\nMore.\n"},
		{name: "-help", args: []string{"-help"}, stdout: "usage: prog a|bb|ccc\n\nMore.\n"},
		{name: "--help", args: []string{"--help"}, stdout: "usage: prog a|bb|ccc\n\nMore.\n"},
		{name: "none", args: nil, code: 2, stderr: "prog: name a thing: a, bb or ccc (see --help)\n"},
		{name: "unknown", args: []string{"b", "a"}, code: 2, stderr: `prog: unknown thing "b": name a, bb or ccc (see --help)` + "\n"},
		{name: "flag first", args: []string{"--redis", "x", "a"}, code: 2, stderr: `prog: unknown thing "--redis": name a, bb or ccc (see --help)` + "\n"},
		{name: "two commands", args: nil, code: 2, stderr: "prog: name a thing: a or bb (see --help)\n", commands: []string{"a", "bb"}},
		{name: "one command", args: nil, code: 2, stderr: "prog: name a thing: a (see --help)\n", commands: []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			names := tc.commands
			if names == nil {
				names = []string{"a", "bb", "ccc"}
			}
			s := Subcommands{Program: "prog", Noun: "thing", Synopsis: "\nusage: prog a|bb|ccc\n\nMore.\n"}
			for i, name := range names {
				s.Commands = append(s.Commands, Subcommand{Name: name, Run: func(args []string) int {
					fmt.Fprintf(&stdout, "%s %q\n", name, args)
					return 10 + i
				}})
			}
			code := s.Run(tc.args, &stdout, &stderr)
			if got, want := code, tc.code; got != want {
				t.Errorf("Run(%q) = %d, want %d", tc.args, got, want)
			}
			if got, want := stdout.String(), tc.stdout; got != want {
				t.Errorf("Run(%q) stdout = %q, want %q", tc.args, got, want)
			}
			if got, want := stderr.String(), tc.stderr; got != want {
				t.Errorf("Run(%q) stderr = %q, want %q", tc.args, got, want)
			}
		})
	}
}
