package readlimit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, size int) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(strings.Repeat("x", size)), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := []struct {
		name string
		path string
		want string // the error, "" for none
	}{
		{"at the limit", write("ten", 10), ""},
		{"regular, over", write("eleven", 11), "is 11 bytes, more than the limit of 10 bytes"},
		{"device without end", "/dev/zero", "is more than the limit of 10 bytes"},
		{"missing", filepath.Join(dir, "nope"), "open " + filepath.Join(dir, "nope") + ": no such file or directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data, err := File(tc.path, 10)
			if tc.want == "" {
				if err != nil || len(data) != 10 {
					t.Errorf("File = %d bytes, %v; want 10 bytes", len(data), err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Errorf("File error = %v, want %q", err, tc.want)
			}
			if _, ok := errors.AsType[*TooLargeError](err); ok != strings.Contains(tc.want, "limit") {
				t.Errorf("File error %v: is a *TooLargeError = %v", err, ok)
			}
		})
	}
}

func TestBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{1 << 30: "1 GiB", 4 << 20: "4 MiB", 64 << 10: "64 KiB", 1<<20 + 1: "1048577 bytes", 10: "10 bytes"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
