package cli

import (
	"bytes"
	"flag"
	"testing"
)

// TestParseFlags: help goes to the command's stdout with the synopsis and
// the flags, status 0; a bad flag, variable or argument is one line on its
// stderr, begun by the flag set's name, status 2; a variable of env is
// read only for a flag that the flag set defines.
func TestParseFlags(t *testing.T) {
	t.Setenv("TEST_SLUICE_PF_TENANT", "acme")
	t.Setenv("TEST_SLUICE_PF_OTHER", "not a number")
	env := map[string]string{
		"tenant": "TEST_SLUICE_PF_TENANT",
		"other":  "TEST_SLUICE_PF_OTHER", // no flag of fs: never read
	}
	const synopsis = "\nusage: prog cmd [--tenant T] [FILE]\n"
	cases := []struct {
		name   string
		args   []string
		names  []string
		ok     bool
		code   int
		stdout string
		stderr string
		tenant string
	}{
		{name: "flags", args: []string{"--count", "3"}, ok: true, tenant: "acme"},
		{name: "flag over variable", args: []string{"--tenant", "globex"}, ok: true, tenant: "globex"},
		{name: "argument taken", args: []string{"in.jsonl"}, names: []string{"FILE"}, ok: true, tenant: "acme"},
		{name: "help", args: []string{"--help"},
			stdout: "usage: prog cmd [--tenant T] [FILE]\n\nFlags:\n  --count int\n    \thow many (default 1)\n  --tenant string\n    \ttenant id [$TEST_SLUICE_PF_TENANT]\n"},
		{name: "-h", args: []string{"-h", "--count", "x"},
			stdout: "usage: prog cmd [--tenant T] [FILE]\n\nFlags:\n  --count int\n    \thow many (default 1)\n  --tenant string\n    \ttenant id [$TEST_SLUICE_PF_TENANT]\n"},
		{name: "bad flag", args: []string{"--nope"}, code: 2, stderr: "prog cmd: flag provided but not defined: -nope\n"},
		{name: "bad value", args: []string{"--count", "x"}, code: 2, stderr: "prog cmd: invalid value \"x\" for flag -count: parse error\n"},
		{name: "argument not taken", args: []string{"in.jsonl"}, code: 2, stderr: "prog cmd: unexpected argument \"in.jsonl\": only flags are taken (see --help)\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("prog cmd", flag.ContinueOnError)
			tenant := fs.String("tenant", "", "tenant id")
			fs.Int("count", 1, "how many")
			var stdout, stderr bytes.Buffer
			code, ok := ParseFlags(fs, tc.args, env, synopsis, &stdout, &stderr, tc.names...)
			if code != tc.code || ok != tc.ok {
				t.Errorf("ParseFlags(%q) = %d, %t, want %d, %t", tc.args, code, ok, tc.code, tc.ok)
			}
			if got, want := stdout.String(), tc.stdout; got != want {
				t.Errorf("ParseFlags(%q) stdout = %q, want %q", tc.args, got, want)
			}
			if got, want := stderr.String(), tc.stderr; got != want {
				t.Errorf("ParseFlags(%q) stderr = %q, want %q", tc.args, got, want)
			}
			if ok {
				if got, want := *tenant, tc.tenant; got != want {
					t.Errorf("ParseFlags(%q): --tenant %q, want %q", tc.args, got, want)
				}
			}
		})
	}
}
