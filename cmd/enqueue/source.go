package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// maxSpool is the most of a stream (standard input from a pipe or a
// terminal, a named pipe) that enqueue bulk copies to a temporary file so
// as to read it twice: 1 GiB, some 14 million lines of 75 bytes. A larger
// input must be saved to a file first.
const maxSpool = 1 << 30

// source is the input of enqueue bulk, read twice: once to check every
// line, once to enqueue the valid ones. A regular file is read again from
// where the first read began, and refused if it changed in between; a
// stream is copied to a temporary file as it is first read.
type source struct {
	name string // for messages: the path, or "standard input"

	file  *os.File    // a regular file; nil for a stream
	start int64       // file's offset when the first read began
	info  os.FileInfo // file's size and time then

	stream io.Reader // the input when it is not a regular file
	closer io.Closer // what closes stream, if anything
	spool  *os.File  // stream's copy
	limit  int64     // the most of stream that spool holds
}

// errTooLarge is the error of reading more of a stream than the spool's
// limit.
var errTooLarge = errors.New("too large to keep for the second pass")

// openSource returns the source of path, stdin for "-", with streams
// spooled up to limit bytes.
func openSource(path string, stdin io.Reader, limit int64) (*source, error) {
	s := &source{name: path, stream: stdin, limit: limit}
	if path == "-" {
		s.name = "standard input"
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		s.stream, s.closer = f, f
	}
	if f, ok := s.stream.(*os.File); ok {
		if info, err := f.Stat(); err == nil && info.Mode().IsRegular() {
			if s.start, err = f.Seek(0, io.SeekCurrent); err == nil {
				s.file, s.info = f, info
				return s, nil
			}
		}
	}
	spool, err := os.CreateTemp("", "sluice-bulk-*.jsonl")
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("a copy of %s for the second pass: %w", s.name, err)
	}
	s.spool = spool
	return s, nil
}

// first returns the reader of the first pass: the file, or the stream
// copied to the spool as it is read.
func (s *source) first() io.Reader {
	if s.file != nil {
		return s.file
	}
	return io.TeeReader(&limitReader{r: s.stream, left: s.limit}, s.spool)
}

// second returns the reader of the second pass, from the same start as
// the first. A file whose size or time changed since the first pass
// began is an error.
func (s *source) second() (io.Reader, error) {
	r := s.spool
	if s.file != nil {
		info, err := s.file.Stat()
		if err != nil {
			return nil, err
		}
		if info.Size() != s.info.Size() || !info.ModTime().Equal(s.info.ModTime()) {
			return nil, fmt.Errorf("%s changed while it was checked; nothing enqueued", s.name)
		}
		r = s.file
	}
	if _, err := r.Seek(s.start, io.SeekStart); err != nil {
		return nil, fmt.Errorf("read %s again: %w", s.name, err)
	}
	return r, nil
}

// Close closes what openSource opened and removes the spool.
func (s *source) Close() {
	if s.closer != nil {
		_ = s.closer.Close()
	}
	if s.spool != nil {
		_ = s.spool.Close()
		_ = os.Remove(s.spool.Name())
	}
}

// limitReader reads r, and fails with errTooLarge past left bytes.
type limitReader struct {
	r    io.Reader
	left int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, errTooLarge
	}
	p = p[:min(int64(len(p)), l.left+1)] // one byte more tells a stream of exactly left bytes from a longer one
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, errTooLarge
	}
	return n, err
}
