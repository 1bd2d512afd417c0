// Package readlimit reads files and streams up to a size limit, so that no
// input (a huge file, /dev/zero, a pipe that never ends) can take memory
// or time without bound. Each caller names its own limit.
package readlimit

import (
	"io"
	"os"
	"strconv"
)

// TooLargeError reports an input larger than its limit.
type TooLargeError struct {
	Size  int64 // the input's size in bytes, when known before reading; 0 otherwise
	Limit int64 // the most bytes the caller takes
}

// Error returns, for example, "is 50 MiB, more than the limit of 1 MiB"
// or, for a stream, "is more than the limit of 64 KiB".
func (e *TooLargeError) Error() string {
	if e.Size > 0 {
		return "is " + Bytes(e.Size) + ", more than the limit of " + Bytes(e.Limit)
	}
	return "is more than the limit of " + Bytes(e.Limit)
}

// File reads the file at path, refusing one larger than limit bytes with a
// *TooLargeError: a regular file by its size, before reading any of it,
// anything else (a device, a pipe) once limit bytes are read. Other errors
// are those of os.Open and Read.
func File(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() && info.Size() > limit {
		return nil, &TooLargeError{Size: info.Size(), Limit: limit}
	}
	return All(f, limit)
}

// All reads r to its end, refusing more than limit bytes with a
// *TooLargeError, after reading limit+1 of them at most.
func All(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	return data, nil
}

// Bytes returns n bytes as people write a limit: "1 GiB", "512 KiB", or
// "52428801 bytes" when n is not a whole number of KiB.
func Bytes(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, " GiB"}, {20, " MiB"}, {10, " KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
