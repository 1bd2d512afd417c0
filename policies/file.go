package policies

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// File is a policies file that can be reloaded while workers run: each
// task reads the policies current when it starts. Safe for concurrent use.
type File struct {
	path string
	opts []Option
	cur  atomic.Pointer[Policies]

	mu     sync.Mutex // serializes reloads and Require, and guards seen
	checks []func(*Policies) error
	seen   stamp // the version of the file last read, or tried (Watch)
}

// Open loads the policies file at path, as Load; each Reload reads it with
// the same options.
func Open(path string, opts ...Option) (*File, error) {
	if path == "" {
		return nil, fmt.Errorf("policies: %w: no file named", ErrInvalid)
	}
	f := &File{path: path, opts: opts}
	if err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Static returns a File that always holds p.
func Static(p *Policies) *File {
	f := &File{}
	f.cur.Store(p)
	return f
}

// Reload reads the file again. On error the policies in force stay.
// New limits apply at once to tenants that already have windows: the
// limiter stores no policy.
func (f *File) Reload() error {
	if f.path == "" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = stampOf(f.path) // before the read: a change after it is seen again
	p, err := Load(f.path, f.opts...)
	if err != nil {
		return err
	}
	for _, check := range f.checks {
		if err := check(p); err != nil {
			return fmt.Errorf("policies: %w: %s: %w", ErrInvalid, f.path, err)
		}
	}
	f.cur.Store(p)
	return nil
}

// Require makes check a condition of the policies: it returns check's
// error for those in force, and from then on a Reload whose policies fail
// it keeps the previous ones and returns the error. A worker of more than
// one shard requires its global rules to be sliding logs, for example.
func (f *File) Require(check func(*Policies) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := check(f.Current()); err != nil {
		return err
	}
	f.checks = append(f.checks, check)
	return nil
}

// Current returns the policies in force.
func (f *File) Current() *Policies { return f.cur.Load() }
