package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// ParseFlags parses the flags of a command that writes to stdout and
// stderr, such as "admin usage": it runs ParseArgs on fs and args, with
// the environment variables of env for the flags that fs defines (a
// variable set for another command's flag, such as REDIS_URL, is not
// read), and the arguments after the flags that names allow. On -h or
// --help it prints, on stdout, synopsis and fs's flags as Usage does. On a
// bad flag, variable or argument it prints a one-line error on stderr that
// begins with fs.Name(), such as "admin usage: unexpected argument ...".
// ok is false when the command should return code: 0 after help, 2 after
// an error.
func ParseFlags(fs *flag.FlagSet, args []string, env map[string]string, synopsis string, stdout, stderr io.Writer, names ...string) (code int, ok bool) {
	// ParseArgs sets every flag of its map from the environment, and
	// fails on one fs does not define: give it fs's only.
	own := map[string]string{}
	for name, variable := range env {
		if fs.Lookup(name) != nil {
			own[name] = variable
		}
	}
	// ParseArgs prints the usage on os.Stdout: print it here instead, on
	// the command's stdout.
	fs.Usage = func() {}
	if err := ParseArgs(fs, args, own, names...); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			Usage(fs, synopsis, own)()
			return 0, false
		}
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return 2, false
	}
	return 0, true
}
