package policies

import (
	"fmt"
	"sync/atomic"
)

// File is a policies file that can be reloaded while workers run: each
// task reads the policies current when it starts. Safe for concurrent use.
type File struct {
	path string
	opts []Option
	cur  atomic.Pointer[Policies]
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
	p, err := Load(f.path, f.opts...)
	if err != nil {
		return err
	}
	f.cur.Store(p)
	return nil
}

// Current returns the policies in force.
func (f *File) Current() *Policies { return f.cur.Load() }
