package policies

import (
	"context"
	"os"
	"time"
)

// WatchEvery is how often Watch looks at the policies file.
const WatchEvery = time.Second

// stamp is what tells one version of a file from another: the file the
// path reaches (symlinks followed), its size and its modification time.
type stamp struct {
	info os.FileInfo
}

// stampOf stats path, following symlinks; nil when it cannot.
func stampOf(path string) stamp {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}
	}
	return stamp{info: fi}
}

// same reports whether s and o are one version of one file.
func (s stamp) same(o stamp) bool {
	if s.info == nil || o.info == nil {
		return s.info == nil && o.info == nil
	}
	return os.SameFile(s.info, o.info) && s.info.Size() == o.info.Size() && s.info.ModTime().Equal(o.info.ModTime())
}

// Watch reloads the file whenever the file its path reaches changes,
// looking every `every` (WatchEvery when 0) until ctx ends: an edit in
// place, a rename over it, or the swap of a symlink on the way, as
// Kubernetes updates a mounted ConfigMap (docs/DAYONE.md). Each attempt
// is reported to reloaded, nil or Reload's error; a version that failed
// is not tried again until the file changes once more. A path that
// cannot be read is left alone until it can. Static files never change.
func (f *File) Watch(ctx context.Context, every time.Duration, reloaded func(error)) {
	if f.path == "" {
		return
	}
	if every <= 0 {
		every = WatchEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := stampOf(f.path)
		f.mu.Lock()
		changed := now.info != nil && !now.same(f.seen)
		if changed {
			f.seen = now
		}
		f.mu.Unlock()
		if changed {
			reloaded(f.Reload())
		}
	}
}
