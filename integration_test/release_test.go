package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// release010 is the commit of Sluice 0.1.0 (CHANGELOG.md), whose workers
// and producers TestUpgradeFrom010 runs beside this version's.
const release010 = "bc154264e97aaf3a45aab7cd549df9309ceec486"

// errNoGit says that the tests do not run in a git checkout (a source
// export), and errNoRelease that the checkout lacks release010.
var (
	errNoGit     = errors.New("not a git checkout: 0.1.0 is built from the repository's history")
	errNoRelease = errors.New("this checkout does not hold Sluice 0.1.0's commit " + release010 +
		" (a shallow clone? git fetch --unshallow; .ci/test-deps.sh does)")
)

// buildRelease010 builds 0.1.0's cmd/worker and cmd/enqueue from this
// repository's history, once per test binary, into a directory of
// binDirs, and returns it. Its source is taken with git archive, so the
// build uses 0.1.0's go.mod and nothing of the working tree.
var buildRelease010 = sync.OnceValues(func() (string, error) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", errNoGit
	}
	if err := exec.Command("git", "cat-file", "-e", release010+"^{commit}").Run(); err != nil {
		return "", errNoRelease
	}
	dir, err := binDirs.make("sluice-0.1.0-")
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("git", "archive", "--format=tar", release010)
	archive.Dir = strings.TrimSpace(string(top)) // from a subdirectory, git archive takes only it
	extract := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	extract.Stdin = pipe
	if err := extract.Start(); err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	archive.Stderr = &stderr
	if err := archive.Run(); err != nil {
		return "", fmt.Errorf("git archive %s: %v\n%s", release010, err, stderr.Bytes())
	}
	if err := extract.Wait(); err != nil {
		return "", fmt.Errorf("extract 0.1.0's source: %w", err)
	}
	for _, name := range []string{"worker", "enqueue"} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./cmd/"+name)
		build.Dir = src
		if out, err := build.CombinedOutput(); err != nil {
			return "", fmt.Errorf("build 0.1.0's cmd/%s: %v\n%s", name, err, out)
		}
	}
	return dir, nil
})
