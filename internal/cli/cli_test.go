package cli

import (
	"errors"
	"flag"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testFlags returns a flag set with a flag of each kind the commands use.
func testFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.String("body", "", "")
	fs.String("tenant", "", "")
	fs.Int("count", 1, "")
	fs.Bool("json", false, "")
	return fs
}

// TestParseLeftovers: an argument left after the flags is refused with a
// one-line usage error that names it, the words after it, and the likely
// fix; a command that takes arguments gets as many as it names.
func TestParseLeftovers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		args  []string
		names []string // ParseArgs's
		want  string   // the error; "" for none
	}{
		{"flags only", []string{"--body", "hi", "--count", "3"}, nil, ""},
		{"unquoted value, flags after it",
			[]string{"--tenant", "acme", "--body", "hello", "world", "--count", "3"}, nil,
			`unexpected argument "world" (then "--count", "3"): flags go before arguments, and a value with spaces needs quotes: --body "hello world"`},
		{"unquoted value at the end", []string{"--body", "hello", "big", "world"}, nil,
			`unexpected argument "big" (then "world"): only flags are taken, and a value with spaces needs quotes: --body "hello big world"`},
		{"unquoted value given with =", []string{"-body=hello", "world"}, nil,
			`unexpected argument "world": only flags are taken, and a value with spaces needs quotes: --body "hello world"`},
		{"after a number", []string{"--count", "3", "4"}, nil, `unexpected argument "4": only flags are taken (see --help)`},
		{"after a bool flag", []string{"--json", "sms:send"}, nil, `unexpected argument "sms:send": only flags are taken (see --help)`},
		{"before the flags", []string{"now", "--json"}, nil, `unexpected argument "now" (then "--json"): flags go before arguments`},
		{"after --", []string{"--body", "hi", "--", "x"}, nil, `unexpected argument "x": only flags are taken (see --help)`},
		{"many", []string{"a", "b", "c", "d", "e", "f"}, nil, `unexpected argument "a" (then "b", "c", "d" and 2 more): only flags are taken (see --help)`},
		{"argument taken", []string{"--json", "in.jsonl"}, []string{"FILE"}, ""},
		{"no argument, one taken", []string{"--json"}, []string{"FILE"}, ""},
		{"standard input taken", []string{"-"}, []string{"FILE"}, ""},
		{"two files, one taken", []string{"a.jsonl", "b.jsonl"}, []string{"FILE"},
			`unexpected argument "b.jsonl": after the flags, only FILE is taken (see --help)`},
		{"flag after the argument", []string{"-", "--count", "3"}, []string{"FILE"},
			`unexpected argument "--count" (then "3"): flags go before arguments`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := ParseArgs(testFlags(), tc.args, nil, tc.names...)
			if tc.want == "" {
				if err != nil {
					t.Errorf("ParseArgs(%q, %q) = %v, want no error", tc.args, tc.names, err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Errorf("ParseArgs(%q, %q)\n got %v\nwant %s", tc.args, tc.names, err, tc.want)
			}
			if !errors.Is(err, ErrUsage) {
				t.Errorf("ParseArgs(%q, %q) = %v, which does not match ErrUsage", tc.args, tc.names, err)
			}
			if tc.names == nil {
				if perr := Parse(testFlags(), tc.args, nil); fmt.Sprint(perr) != fmt.Sprint(err) {
					t.Errorf("Parse(%q) = %v, want what ParseArgs without names says, %v", tc.args, perr, err)
				}
			}
		})
	}
}

// TestParseArgsKeepsArguments: the arguments a command takes are left in
// fs.Args(), after flags read as usual.
func TestParseArgsKeepsArguments(t *testing.T) {
	t.Parallel()
	fs := testFlags()
	if err := ParseArgs(fs, []string{"--count", "3", "in.jsonl"}, nil, "FILE"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"in.jsonl"}, fs.Args()); diff != "" {
		t.Errorf("fs.Args() (-want +got):\n%s", diff)
	}
	if got, want := fs.Lookup("count").Value.String(), "3"; got != want {
		t.Errorf("--count = %s, want %s", got, want)
	}
}

// TestParseErrors: every error of Parse but help is a usage error (exit
// status 2), and reads as the flag package's or names the variable.
// Not parallel: it sets the environment.
func TestParseErrors(t *testing.T) {
	t.Setenv("TEST_SLUICE_COUNT", "many")
	cases := []struct {
		name     string
		args     []string
		env      map[string]string
		want     string
		wantCode int
	}{
		{"undefined flag", []string{"--nope"}, nil, "flag provided but not defined: -nope", 2},
		{"bad value", []string{"--count", "x"}, nil, `invalid value "x" for flag -count: parse error`, 2},
		{"bad variable", nil, map[string]string{"count": "TEST_SLUICE_COUNT"}, "environment variable TEST_SLUICE_COUNT: parse error", 2},
		{"help", []string{"--help"}, nil, flag.ErrHelp.Error(), 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := testFlags()
			fs.Usage = func() {}
			err := Parse(fs, tc.args, tc.env)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Parse(%q) = %v, want %s", tc.args, err, tc.want)
			}
			if got, want := ExitStatus(err), tc.wantCode; got != want {
				t.Errorf("ExitStatus(%v) = %d, want %d", err, got, want)
			}
		})
	}
	// A variable is not read for a flag given on the command line.
	fs := testFlags()
	if err := Parse(fs, []string{"--count", "2"}, map[string]string{"count": "TEST_SLUICE_COUNT"}); err != nil {
		t.Errorf("Parse with --count given: %v, want the bad variable unread", err)
	}
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want int
	}{
		{ErrUsage, 2},
		{fmt.Errorf("--redis %q: %w", "http://x", ErrUsage), 2},
		{errors.New("Redis at redis://127.0.0.1:1 unreachable"), 1},
	}
	for _, tc := range cases {
		if got, want := ExitStatus(tc.err), tc.want; got != want {
			t.Errorf("ExitStatus(%v) = %d, want %d", tc.err, got, want)
		}
	}
}
