package policies_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/policies"
)

// perSecond is a policies file whose one rule allows limit a second.
func perSecond(limit int) string {
	return fmt.Sprintf("tasks:\n  sms:send:\n    - {name: per-second, scope: tenant, limit: %d, window: 1s}\n", limit)
}

// configMap lays out dir as Kubernetes mounts a ConfigMap: the file is
// dir/policies.yaml -> ..data/policies.yaml, ..data -> ..<version>, and a
// new version is written beside the old and swapped in by renaming a new
// ..data symlink over the old one.
type configMap struct {
	t       *testing.T
	dir     string
	version int
}

func (c *configMap) path() string { return filepath.Join(c.dir, "policies.yaml") }

// publish writes content as a new version and swaps it in.
func (c *configMap) publish(content string) {
	c.t.Helper()
	c.version++
	v := fmt.Sprintf("..2026_11_30_%02d", c.version)
	if err := os.Mkdir(filepath.Join(c.dir, v), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, v, "policies.yaml"), []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(v, tmp); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		c.t.Fatal(err)
	}
	if c.version == 1 {
		if err := os.Symlink(filepath.Join("..data", "policies.yaml"), c.path()); err != nil {
			c.t.Fatal(err)
		}
	}
}

// TestWatch: a watched file reloads on an edit in place, on a rename over
// it, and on a ConfigMap's symlink swap, each once; a bad version is
// refused once, the policies in force kept, and not tried again until the
// file changes.
func TestWatch(t *testing.T) {
	t.Parallel()
	cm := &configMap{t: t, dir: t.TempDir()}
	cm.publish(perSecond(1))
	f, err := policies.Open(cm.path())
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan error, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Watch(ctx, 10*time.Millisecond, func(err error) { results <- err })

	limit := func() int { return f.Current().Rules("sms:send")[0].Policy.Limit }
	next := func(what string) error {
		t.Helper()
		select {
		case err := <-results:
			return err
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no reload within 5 s", what)
			return nil
		}
	}
	quiet := func(what string) {
		t.Helper()
		select {
		case err := <-results:
			t.Fatalf("%s: a reload more (%v), want none", what, err)
		case <-time.After(200 * time.Millisecond): // 20 looks
		}
	}

	cm.publish(perSecond(2))
	if err := next("the symlink swap"); err != nil || limit() != 2 {
		t.Fatalf("after the symlink swap: %v, limit %d; want reloaded to 2", err, limit())
	}
	quiet("after the swap")

	target := filepath.Join(cm.dir, fmt.Sprintf("..2026_11_30_%02d", cm.version), "policies.yaml")
	if err := os.WriteFile(target, []byte(perSecond(30)), 0o644); err != nil { // in place, another size
		t.Fatal(err)
	}
	// An edit in place is not atomic: a look between its truncation and
	// its write finds a file to refuse, and the next look the whole one.
	err = next("the edit in place")
	for err != nil {
		err = next("the edit in place, written")
	}
	if limit() != 30 {
		t.Fatalf("after the edit in place: limit %d, want reloaded to 30", limit())
	}

	tmp := target + ".new"
	if err := os.WriteFile(tmp, []byte(perSecond(4)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, target); err != nil {
		t.Fatal(err)
	}
	if err := next("the rename over it"); err != nil || limit() != 4 {
		t.Fatalf("after the rename over it: %v, limit %d; want reloaded to 4", err, limit())
	}

	cm.publish("tasks:\n  sms:send:\n    - {name: per-second, scope: tenant, limit: 4, windw: 1s}\n")
	if err := next("a bad version"); err == nil || !strings.Contains(err.Error(), "windw") || limit() != 4 {
		t.Fatalf("after a bad version: %v, limit %d; want refused naming windw, 4 in force", err, limit())
	}
	quiet("a bad version, unchanged")

	cm.publish(perSecond(5))
	if err := next("a good version after a bad one"); err != nil || limit() != 5 {
		t.Fatalf("after a good version: %v, limit %d; want reloaded to 5", err, limit())
	}
	quiet("after the last version")
}
