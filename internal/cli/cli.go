// Package cli holds what Sluice's commands share: flags that fall back on
// environment variables, exit statuses, and one-line errors. Reading a
// Redis URL and connecting is package redisconn's.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// ErrUsage is matched (errors.Is) by the errors of this package that are
// the user's mistake in what they typed: a flag, an argument or a URL that
// cannot be read. The commands exit 2 for them, and 1 for a failure of
// Redis, a file or a provider.
var ErrUsage = errors.New("usage error")

// ExitStatus returns the exit status of a command that failed with err: 2
// when err matches ErrUsage, 1 otherwise.
func ExitStatus(err error) int {
	if errors.Is(err, ErrUsage) {
		return 2
	}
	return 1
}

// Parse parses args into fs after applying env: for each flag name in env
// whose flag is not given on the command line, the environment variable
// named env[name], when set, gives the value. It returns flag.ErrHelp for
// -h or --help (usage is already printed, on stdout: it was asked for),
// and otherwise a one-line error naming the bad flag or variable, which
// matches ErrUsage.
//
// It is for a command that takes flags only: an argument left after the
// flags is refused, since the flag package stops at the first word that is
// not a flag and would leave every flag after it unread (a message typed
// --body hello world would be sent as "hello"). The error names the
// leftover words and the likely fix. A command that takes arguments after
// its flags uses ParseArgs.
func Parse(fs *flag.FlagSet, args []string, env map[string]string) error {
	return ParseArgs(fs, args, env)
}

// ParseArgs is Parse for a command that takes arguments after its flags,
// at most one for each name of names (such as "FILE"), which its help
// uses; they are left in fs.Args(), and the command checks that it has
// those it needs. More arguments are refused as Parse refuses any.
func ParseArgs(fs *flag.FlagSet, args []string, env map[string]string, names ...string) error {
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
		return usageError{err}
	}
	if fs.NArg() > len(names) {
		return leftover(fs, args, names)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, variable := range env {
		v, ok := os.LookupEnv(variable)
		if !ok || given[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return usageError{fmt.Errorf("environment variable %s: %v", variable, err)}
		}
	}
	return nil
}

// usageError is an error of the user's in what they typed: it matches
// ErrUsage as well as the error it holds, and reads as that error.
type usageError struct{ err error }

// Usagef returns an error of the user's in what they typed, with the
// message that format and args give: it matches ErrUsage, and ExitStatus
// gives 2 for it.
func Usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func (e usageError) Error() string   { return e.err.Error() }
func (e usageError) Unwrap() []error { return []error{e.err, ErrUsage} }

// leftover returns the error of ParseArgs for the arguments of fs past
// those that names allow: the first of them, up to three that follow, and
// what the user likely meant. args are the arguments fs parsed.
func leftover(fs *flag.FlagSet, args, names []string) error {
	extra := fs.Args()[len(names):]
	var b strings.Builder
	fmt.Fprintf(&b, "unexpected argument %q", extra[0])
	if rest := extra[1:]; len(rest) > 0 {
		quoted := make([]string, 0, 3)
		for _, a := range rest[:min(len(rest), 3)] {
			quoted = append(quoted, strconv.Quote(a))
		}
		b.WriteString(" (then " + strings.Join(quoted, ", "))
		if len(rest) > 3 {
			fmt.Fprintf(&b, " and %d more", len(rest)-3)
		}
		b.WriteString(")")
	}

	// What was wrong, then, when the word before the leftovers was the
	// value of a string flag, the likely fix: they are the rest of a
	// value with spaces.
	flagsAfter := slices.ContainsFunc(extra, looksLikeFlag)
	switch {
	case flagsAfter:
		b.WriteString(": flags go before arguments")
	case len(names) == 0:
		b.WriteString(": only flags are taken")
	default:
		b.WriteString(": after the flags, only " + strings.Join(names, " ") + " is taken")
	}
	name, value, isValue := "", "", false
	if len(names) == 0 {
		name, value, isValue = lastValue(fs, args[:len(args)-fs.NArg()])
	}
	if !isValue {
		if !flagsAfter {
			b.WriteString(" (see --help)")
		}
		return usageError{errors.New(b.String())}
	}
	words := []string{value}
	for _, a := range extra {
		if looksLikeFlag(a) {
			break
		}
		words = append(words, a)
	}
	fmt.Fprintf(&b, ", and a value with spaces needs quotes: --%s %q", name, strings.Join(words, " "))
	return usageError{errors.New(b.String())}
}

// looksLikeFlag reports whether the flag package would have read arg as a
// flag, had it come before the arguments.
func looksLikeFlag(arg string) bool {
	return len(arg) > 1 && arg[0] == '-' && arg != "--"
}

// lastValue returns the flag and value of the last of parsed, the words
// the flag package read as flags, when it is the value of a string flag:
// --name value or --name=value.
func lastValue(fs *flag.FlagSet, parsed []string) (name, value string, ok bool) {
	n := len(parsed)
	if n == 0 {
		return "", "", false
	}
	last := parsed[n-1]
	switch {
	case looksLikeFlag(last) && strings.Contains(last, "="):
		name, value, _ = strings.Cut(strings.TrimLeft(last, "-"), "=")
	case n >= 2 && looksLikeFlag(parsed[n-2]) && !strings.Contains(parsed[n-2], "=") && last != "--":
		name, value = strings.TrimLeft(parsed[n-2], "-"), last
	default:
		return "", "", false
	}
	f := fs.Lookup(name)
	if f == nil {
		return "", "", false
	}
	if g, isGetter := f.Value.(flag.Getter); !isGetter {
		return "", "", false
	} else if _, isString := g.Get().(string); !isString {
		return "", "", false
	}
	return name, value, true
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
