package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/readlimit"
)

// TestBulkStreams: the first pass of enqueue bulk keeps no task. A file
// of 60,000 valid lines and one invalid (5 MB) is checked and refused in
// no more memory than one of 1,000 lines, give or take maxGrowth, read
// from a path and from a pipe (issue 27 measured 937 MB for a file of a
// million lines: some 900 bytes a line).
func TestBulkStreams(t *testing.T) {
	t.Parallel()
	const maxGrowth = 16 << 20
	small, big := bulkFile(t, 1_000), bulkFile(t, 60_000)
	for _, stdin := range []bool{false, true} {
		t.Run(fmt.Sprintf("stdin=%v", stdin), func(t *testing.T) {
			t.Parallel()
			base, peak := bulkPeakRSS(t, small, 1_000, stdin), bulkPeakRSS(t, big, 60_000, stdin)
			t.Logf("peak RSS %d MiB for 1,000 lines, %d MiB for 60,000", base>>20, peak>>20)
			if peak-base > maxGrowth {
				t.Errorf("peak RSS grew by %d MiB from 1,000 lines to 60,000, want at most %d MiB", (peak-base)>>20, maxGrowth>>20)
			}
		})
	}
}

// bulkFile writes a bulk file of n valid lines without IDs, then an
// invalid one, and returns its path.
func bulkFile(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "big.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(w, `{"type":"sms","tenant":"acme","to":"+15551234567","body":"Your code is %06d"}`+"\n", i)
	}
	fmt.Fprintln(w, `{"type":"fax"}`)
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}
	return path
}

// bulkPeakRSS runs enqueue bulk on the file at path, of valid lines and
// one invalid, as a process of its own, given the path or, with stdin,
// the file through a pipe; it checks that nothing was enqueued, and
// returns the process's peak RSS in bytes.
func bulkPeakRSS(t *testing.T, path string, valid int, stdin bool) int64 {
	t.Helper()
	arg := path
	if stdin {
		arg = "-"
	}
	cmd := exec.Command(os.Args[0], "bulk", "--redis", unreachable, arg)
	cmd.Env = append(os.Environ(), asMain+"=1")
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if stdin {
		in, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		w, err := cmd.StdinPipe() // a pipe, not the file: spooled
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(w, in); _ = w.Close() }()
	}
	err := cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1", err)
	}
	if got, want := stdout.String(), fmt.Sprintf("enqueued 0 of %d tasks; 1 rejected (line %d); nothing enqueued because of them (--skip-invalid enqueues the valid lines)\n", valid+1, valid+1); got != want {
		t.Errorf("stdout\n got %q\nwant %q", got, want)
	}
	return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
}

// TestSourceSpoolLimit: a stream larger than the spool's limit is
// refused, not kept.
func TestSourceSpoolLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		size int
		want error
	}{{10, nil}, {11, errTooLarge}} {
		src, err := openSource("-", strings.NewReader(strings.Repeat("x", tc.size)), 10)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, src.first())
		src.Close()
		if !errors.Is(err, tc.want) {
			t.Errorf("%d bytes: read error = %v, want %v", tc.size, err, tc.want)
		}
	}
}

// TestSourceChanged: a file that changes between the passes is refused
// before anything is enqueued.
func TestSourceChanged(t *testing.T) {
	t.Parallel()
	path := writeFile(t, lines(`{"type":"sms","tenant":"acme","to":"+15551234567","body":"hi"}`))
	src, err := openSource(path, nil, maxSpool)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := io.Copy(io.Discard, src.first()); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if _, err := src.second(); err == nil || !strings.Contains(err.Error(), "changed while it was checked; nothing enqueued") {
		t.Errorf("second pass error = %v, want the file changed", err)
	}
}

// TestBulkHelpNamesSpoolLimit: the help gives maxSpool as it is.
func TestBulkHelpNamesSpoolLimit(t *testing.T) {
	t.Parallel()
	if want := "up to " + readlimit.Bytes(maxSpool) + "."; !strings.Contains(bulkSynopsis, want) {
		t.Errorf("bulk --help does not say %q", want)
	}
}
