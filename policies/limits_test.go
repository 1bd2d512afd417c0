package policies_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/policies"
)

// manyKeys returns n keys of a YAML flow mapping, "k0: 1, k1: 1, ...".
func manyKeys(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d: 1", i)
	}
	return strings.Join(keys, ", ")
}

// overrides returns a file of one sms:send rule with n tenant overrides.
func overrides(n int) []byte {
	var b strings.Builder
	b.WriteString("tasks:\n  sms:send:\n    - name: a\n      scope: tenant\n      limit: 10\n      window: 1s\n      tenants:\n")
	for i := range n {
		fmt.Fprintf(&b, "        t%d: {limit: %d}\n", i, i%100+1)
	}
	return []byte(b.String())
}

// TestParseLimits: a file over MaxFileSize, or with more than
// MaxOverrides overrides, is refused with the limit in the error.
func TestParseLimits(t *testing.T) {
	t.Parallel()
	if _, err := policies.Parse("p.yaml", overrides(policies.MaxOverrides)); err != nil {
		t.Errorf("Parse of %d overrides: %v", policies.MaxOverrides, err)
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"too many overrides", overrides(policies.MaxOverrides + 1),
			fmt.Sprintf("p.yaml: invalid policies: %d tenant overrides, more than the limit of %d", policies.MaxOverrides+1, policies.MaxOverrides)},
		{"too large", append([]byte("tasks: {}\n"), make([]byte, policies.MaxFileSize)...),
			"p.yaml: invalid policies: the file is 1048586 bytes, more than the limit of 1 MiB"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := policies.Parse("p.yaml", tc.data)
			if err == nil || err.Error() != tc.want {
				t.Errorf("Parse error = %v, want %q", err, tc.want)
			}
			if !errors.Is(err, policies.ErrInvalid) {
				t.Errorf("error %v does not match ErrInvalid", err)
			}
		})
	}
}

// TestLoadRefusesLargeFile: a 50 MB file is refused by its size, before
// any of it is read (the file is sparse, and its size is in the error),
// and an input without end is refused after MaxFileSize bytes.
func TestLoadRefusesLargeFile(t *testing.T) {
	t.Parallel()
	big := filepath.Join(t.TempDir(), "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Truncate(50<<20), f.Close()); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ path, want string }{
		{big, big + ": invalid policies: the file is 50 MiB, more than the limit of 1 MiB"},
		{"/dev/zero", "/dev/zero: invalid policies: the file is more than the limit of 1 MiB"},
	}
	for _, tc := range cases {
		_, err := policies.Load(tc.path)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Load(%s) error = %v, want %q", tc.path, err, tc.want)
		}
		if !errors.Is(err, policies.ErrInvalid) {
			t.Errorf("Load(%s) error %v does not match ErrInvalid", tc.path, err)
		}
	}
}

// BenchmarkParseOverrides parses files of n overrides: the time per
// override stays flat as n grows (yaml.v3 alone compares every pair of
// keys of a mapping).
func BenchmarkParseOverrides(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		data := overrides(n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := policies.Parse("p.yaml", data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/override")
		})
	}
}
