// Package cli holds what Sluice's commands share: flags that fall back on
// environment variables, the Redis URL, and one-line errors.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// ErrUsage is matched (errors.Is) by the errors of this package that are
// the user's mistake in what they typed: a flag, an argument or a URL that
// cannot be read. The commands exit 2 for them, and 1 for a failure of
// Redis, a file or a provider.
var ErrUsage = errors.New("usage error")

// Parse parses args into fs after applying env: for each flag name in env
// whose flag is not given on the command line, the environment variable
// named env[name], when set, gives the value. It returns flag.ErrHelp for
// -h or --help (usage is already printed, on stdout: it was asked for),
// and otherwise a one-line error
// naming the bad flag or variable.
func Parse(fs *flag.FlagSet, args []string, env map[string]string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stdout)
		fs.Usage()
		fs.SetOutput(os.Stderr)
		return err
	}
	fs.SetOutput(os.Stderr)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, variable := range env {
		v, ok := os.LookupEnv(variable)
		if !ok || given[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("environment variable %s: %v", variable, err)
		}
	}
	return nil
}

// Usage returns a usage function for fs that prints synopsis, then each
// flag with its environment variable.
func Usage(fs *flag.FlagSet, synopsis string, env map[string]string) func() {
	return func() {
		w := fs.Output()
		fmt.Fprintln(w, strings.TrimSpace(synopsis))
		fmt.Fprintln(w, "\nFlags:")
		fs.VisitAll(func(f *flag.Flag) {
			name, usage := flag.UnquoteUsage(f)
			line := "  --" + f.Name
			if name != "" {
				line += " " + name
			}
			fmt.Fprintln(w, line)
			detail := "    \t" + usage
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
				detail += " (default " + f.DefValue + ")"
			}
			if v, ok := env[f.Name]; ok {
				detail += " [$" + v + "]"
			}
			fmt.Fprintln(w, detail)
		})
	}
}
