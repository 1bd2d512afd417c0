package cli

import (
	"fmt"
	"io"
	"strings"
)

// Subcommand is one of the commands of a program that takes a command's
// name first, such as "usage" of "admin usage".
type Subcommand struct {
	// Name is the word that selects the command.
	Name string

	// Run runs the command with the arguments after Name and returns its
	// exit status.
	Run func(args []string) int
}

// Subcommands is a program whose first argument names one of its
// commands, as admin's (admin usage, admin reset, ...) and enqueue's
// (enqueue sms, enqueue email, enqueue bulk) do.
type Subcommands struct {
	// Program names the program, such as "admin"; its error lines begin
	// with it.
	Program string

	// Noun is what the errors call a command: "command", "kind of task".
	Noun string

	// Synopsis is the program's help, printed for -h, -help, --help or
	// help without its leading and trailing blank space.
	Synopsis string

	// Commands are the program's commands, in the order the errors list
	// them.
	Commands []Subcommand
}

// Run runs the command that args[0] names with the rest of args, and
// returns its exit status. For -h, -help, --help or help it prints
// Synopsis on stdout and returns 0. With no argument, or one that names no
// command, it prints a one-line error that lists the commands on stderr,
// and returns 2, as for any usage error:
//
//	admin: name a command: usage, reset, validate or throttled (see --help)
//	admin: unknown command "use": name usage, reset, validate or throttled (see --help)
func (s Subcommands) Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "%s: name a %s: %s (see --help)\n", s.Program, s.Noun, s.names())
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, strings.TrimSpace(s.Synopsis))
		return 0
	}
	for _, c := range s.Commands {
		if c.Name == args[0] {
			return c.Run(args[1:])
		}
	}
	fmt.Fprintf(stderr, "%s: unknown %s %q: name %s (see --help)\n", s.Program, s.Noun, args[0], s.names())
	return 2
}

// names lists the commands' names: "sms, email or bulk".
func (s Subcommands) names() string {
	names := make([]string, len(s.Commands))
	for i, c := range s.Commands {
		names[i] = c.Name
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
