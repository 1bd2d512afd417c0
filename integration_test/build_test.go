package integration_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// binDirs holds the directories of the commands the tests build; TestMain
// removes them when the test binary ends.
var binDirs tempDirs

// buildWorker, buildEnqueue and buildAdmin compile cmd/worker, cmd/enqueue
// and cmd/admin once per test binary.
var (
	buildWorker  = buildCommand(&binDirs, "worker")
	buildEnqueue = buildCommand(&binDirs, "enqueue")
	buildAdmin   = buildCommand(&binDirs, "admin")
)

// buildCommand returns a function that compiles cmd/name, into a
// directory of dirs, the first time it is called, and returns the
// binary's path.
func buildCommand(dirs *tempDirs, name string) func() (string, error) {
	return sync.OnceValues(func() (string, error) {
		dir, err := dirs.make("sluice-" + name + "-bin-")
		if err != nil {
			return "", err
		}
		bin := filepath.Join(dir, name)
		out, err := exec.Command("go", "build", "-o", bin, "github.com/sluicehq/sluice/cmd/"+name).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go build cmd/%s: %v\n%s", name, err, out)
		}
		return bin, nil
	})
}

// tempDirs are temporary directories made for the whole test binary, not
// for one test (t.TempDir), to be removed at its end. Safe for concurrent
// use.
type tempDirs struct {
	mu   sync.Mutex
	dirs []string
}

// make makes a new directory in the temporary directory, as os.MkdirTemp
// with pattern does, and records it for removeAll.
func (d *tempDirs) make(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dirs = append(d.dirs, dir)
	return dir, nil
}

// removeAll removes every directory that make made, with what it holds.
// The error names each one still there afterwards.
func (d *tempDirs) removeAll() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, dir := range d.dirs {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
		} else if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%s still there after its removal (stat: %v)", dir, err))
		}
	}
	d.dirs = nil
	return errors.Join(errs...)
}

// TestBuildsRemoved builds a command as the tests do, into directories of
// its own, and checks that removeAll, which TestMain calls, leaves nothing
// of them.
func TestBuildsRemoved(t *testing.T) {
	t.Parallel()
	var dirs tempDirs
	t.Cleanup(func() { _ = dirs.removeAll() }) // should the test fail first
	bin, err := buildCommand(&dirs, "sink")()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the built command: %v", err)
	}
	if got, want := len(dirs.dirs), 1; got != want || filepath.Dir(bin) != dirs.dirs[0] {
		t.Fatalf("directories recorded %q, want the one of %s only", dirs.dirs, bin)
	}
	if err := dirs.removeAll(); err != nil {
		t.Fatalf("removeAll: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(bin)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the directory of %s after removeAll: stat says %v, want it gone", bin, err)
	}
	if len(dirs.dirs) != 0 {
		t.Errorf("directories still recorded after removeAll: %q", dirs.dirs)
	}
}
