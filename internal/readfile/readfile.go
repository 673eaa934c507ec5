// Package readfile reads the small files a user names (suites, model
// configs, tokenizers, imports) whole, within a bound: a model file or a
// device given by mistake is refused at once, not read until memory runs
// out.
package readfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/mtlbench/mtlbench/internal/standin"
)

// Bounds of the files read whole, by kind.
const (
	Suite     = 16 << 20  // a suite's YAML
	Config    = 16 << 20  // a checkpoint's config.json, a history page
	Index     = 64 << 20  // a sharded checkpoint's index, tuned configs
	Tokenizer = 512 << 20 // tokenizer.json (the largest published are tens of MB)
	Import    = 256 << 20 // peer results, a line of exported runs
)

// ErrNotAFile is what an error about a path that names a folder or a named
// pipe where a file is wanted wraps: an input error, as a path that is not
// there is (the exit status says so alike).
var ErrNotAFile = errors.New("not a file")

// notAFile says what path is instead of a file, and is ErrNotAFile.
type notAFile struct{ msg string }

func (e *notAFile) Error() string        { return e.msg }
func (e *notAFile) Is(target error) bool { return target == ErrNotAFile }

// NotA is an error saying msg, about a path that holds something other than
// the file wanted (a database given for a suite): an input error, as a
// folder given for a file is, and ErrNotAFile.
func NotA(msg string) error { return &notAFile{msg} }

// Read returns the bytes of path, which may hold at most max bytes; what
// names the file's kind in the error ("a suite").
func Read(path string, max int64, what string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, PathError(path, err)
	}
	switch {
	case fi.IsDir():
		return nil, &notAFile{fmt.Sprintf("%s: a folder, not %s", path, what)}
	case fi.Mode()&os.ModeNamedPipe != 0: // opening it would wait for a writer
		return nil, &notAFile{fmt.Sprintf("%s: a named pipe, not %s", path, what)}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, PathError(path, err)
	}
	defer f.Close()
	if fi.Mode().IsRegular() && fi.Size() > max {
		return nil, tooLarge(path, fi.Size(), max, what)
	}
	if fi.Mode().IsRegular() {
		// Room for the whole file at once: grown as read, the buffer
		// would take two or three times a large file's bytes.
		var b bytes.Buffer
		b.Grow(int(fi.Size()) + bytes.MinRead)
		if _, err := b.ReadFrom(io.LimitReader(f, max+1)); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if int64(b.Len()) > max { // grown since it was measured
			return nil, tooLarge(path, -1, max, what)
		}
		// A download may leave a Git LFS pointer or a web page in place of
		// a file (a tokenizer.json): named as that, not as bad JSON.
		if err := standin.Check(path, b.Bytes()); err != nil {
			return nil, &notAFile{err.Error()}
		}
		return b.Bytes(), nil
	}
	// Pipes and devices say no size: read one byte past the bound.
	return ReadFrom(f, path, max, what)
}

// Open opens path for a reader that takes it a line at a time (an export
// of many runs), with Read's errors: a folder is refused by path, as is a
// path that holds nothing. A pipe is read as it comes (a shell's
// <(mtlbench export), which is one).
func Open(path, what string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, PathError(path, err)
	}
	if fi.IsDir() {
		return nil, &notAFile{fmt.Sprintf("%s: a folder, not %s", path, what)}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, PathError(path, err)
	}
	return f, nil
}

// ReadFrom reads r whole as Read reads a pipe, within max bytes; name says
// what it is in errors ("standard input").
func ReadFrom(r io.Reader, name string, max int64, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if int64(len(data)) > max {
		return nil, tooLarge(name, -1, max, what)
	}
	return data, nil
}

// PathError is err without the Go operation that met it ("stat", "open"):
// the file and what is wrong with it. It still matches fs.ErrNotExist.
// Every path a user names is reported through it, so all read alike.
func PathError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", path, pe.Err)
	}
	return err
}

func tooLarge(path string, size, max int64, what string) error {
	of := ""
	if size >= 0 {
		of = Size(size) + ", "
	}
	return fmt.Errorf("%s: %smore than %s holds (at most %s): is it the file you meant?", path, of, what, Size(max))
}

// Size writes n bytes in binary units.
func Size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/unit, "KiB"
	for _, next := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, u = v/unit, next
	}
	return fmt.Sprintf("%.1f %s", v, u)
}
