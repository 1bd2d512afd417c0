package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADMEEnvironment: the README's claim about which of the worker's
// flags have environment variables is what --help shows, and every
// variable the README names is one that some flag or secret reads.
func TestREADMEEnvironment(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	claim := regexp.MustCompile("Every worker flag but ((?:`--[a-z-]+`(?:, | and )?)+) can also be set from the environment").FindStringSubmatch(text)
	if claim == nil {
		t.Fatal("README.md does not say which worker flags have no environment variable (\"Every worker flag but `--x` and `--y` can also be set from the environment\")")
	}
	var claimed []string
	for _, m := range regexp.MustCompile("`--([a-z-]+)`").FindAllStringSubmatch(claim[1], -1) {
		claimed = append(claimed, m[1])
	}

	r := runWorker(t, "--help")
	var without, variables []string
	var flag string
	for line := range strings.Lines(r.stdout) {
		if name, ok := strings.CutPrefix(line, "  --"); ok {
			flag = strings.Fields(name)[0]
			without = append(without, flag)
			continue
		}
		if m := regexp.MustCompile(`\[\$([A-Z_]+)\]`).FindStringSubmatch(line); m != nil && flag != "" {
			without = slices.DeleteFunc(without, func(f string) bool { return f == flag })
			variables = append(variables, m[1])
		}
	}
	slices.Sort(claimed)
	slices.Sort(without)
	if !slices.Equal(claimed, without) {
		t.Errorf("README.md says the worker flags without a variable are %q; --help shows %q", claimed, without)
	}
	if len(variables) < 10 {
		t.Fatalf("--help shows %d variables; the parse of its output is broken:\n%s", len(variables), r.stdout)
	}
	// The secrets' variables are read without flags; the help names them.
	for _, v := range regexp.MustCompile(`\bSLUICE_[A-Z_]+\b|\bREDIS_URL\b`).FindAllString(string(readme), -1) {
		if !slices.Contains(variables, v) && !strings.Contains(r.stdout, v) && !otherCommandReads(v) {
			t.Errorf("README.md names %s, which the worker's --help does not", v)
		}
	}
}

// otherCommandReads reports whether v is a variable of a command other than
// the worker, or of the tests, that the README names.
func otherCommandReads(v string) bool {
	return slices.Contains([]string{"SLUICE_QUEUE", "SLUICE_STATUS_SCREENSHOT"}, v)
}
