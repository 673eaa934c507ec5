// Package atomicfile writes a file whole or not at all: into a temporary
// file beside it, renamed over it once written, so a reader never sees
// half a file and a write that fails leaves what the file held before.
//
// A path that is a symbolic link is written through: the link's target is
// replaced and the link kept, as a shell's > or cp would do, rather than the
// link being replaced by a plain file (a results file linked into a shared
// folder stays linked). docs/data.md states the rule.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// maxLinks bounds a chain of links, as the kernel's ELOOP does.
const maxLinks = 40

// Target is the file a write to path replaces: path itself, or, where path
// is a symbolic link, the file the chain of links ends at (which need not
// exist yet).
func Target(path string) (string, error) {
	p := path
	for range maxLinks {
		st, err := os.Lstat(p)
		if err != nil || st.Mode()&fs.ModeSymlink == 0 {
			return p, nil // not there yet, or no link: written where it is
		}
		l, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(l) {
			l = filepath.Join(filepath.Dir(p), l)
		}
		p = l
	}
	return "", fmt.Errorf("%s: more than %d symbolic links in a chain", path, maxLinks)
}

// Write writes path (its target, where it is a link) through write, mode
// 0644, whole or not at all. An error writing leaves the file unchanged and
// says so. A folder is refused before anything is written; a pipe or a
// device is written in place.
func Write(path string, write func(io.Writer) error) error {
	target, err := Target(path)
	if err != nil {
		return err
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a folder: name a file to write", path)
	} else if err == nil && !st.Mode().IsRegular() {
		// A pipe or device (/dev/stdout, /dev/null) holds no file to keep
		// whole, and a rename would put a file in its place: it is written
		// as a shell's > writes it.
		return writeInPlace(path, write)
	}
	dir := filepath.Dir(target)
	// Hidden and with no extension of its own: a write killed before its
	// rename leaves a file no folder's lookup reads.
	f, err := os.CreateTemp(dir, "."+filepath.Base(target)+".tmp*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the temporary file's name means nothing to the user
		}
		return fmt.Errorf("cannot write into folder %s: %w", dir, err)
	}
	defer os.Remove(f.Name()) // once renamed, there is nothing to remove
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%w (the file is unchanged)", err)
	}
	// CreateTemp's 0600 would keep a shared folder's file from everyone else.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%w (the file is unchanged)", err)
	}
	return os.Rename(f.Name(), target)
}

func writeInPlace(path string, write func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
