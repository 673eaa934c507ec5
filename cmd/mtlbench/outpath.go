package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/suites"
)

// stdoutPath is the output path that means standard output, as most tools
// take it: `mtlbench tune export - | ssh mac mtlbench tune import -`.
const stdoutPath = "-"

// stdinPath is the input path that means standard input, likewise
// (`mtlbench export -o - | mtlbench import -`), for every command that
// reads a file a user names (import, peer import, history import, tune
// import), through openInput and readInput alone.
const stdinPath = "-"

// stdinName is what messages call standard input where a path would go.
const stdinName = "standard input"

// openInput opens what path names for a reader that takes it as it comes
// (an export, a line at a time): standard input where path is "-", else
// the file (readfile.Open's checks). name is what errors call it: the
// path, or "standard input".
func openInput(stdin io.Reader, path, what string) (r io.ReadCloser, name string, err error) {
	if err := emptyInput(path, what); err != nil {
		return nil, path, err
	}
	if path == stdinPath {
		return io.NopCloser(stdin), stdinName, nil
	}
	f, err := readfile.Open(path, what)
	if err != nil {
		return nil, path, err
	}
	return f, path, nil
}

// readInput reads what path names whole, within max bytes: standard input
// where path is "-", else the file (readfile.Read's checks). name is what
// errors call it: the path, or "standard input".
func readInput(stdin io.Reader, path string, max int64, what string) (data []byte, name string, err error) {
	if err := emptyInput(path, what); err != nil {
		return nil, path, err
	}
	if path == stdinPath {
		data, err = readfile.ReadFrom(stdin, stdinName, max, what)
		if err == nil {
			err = stdinOfAnotherKind(data, what)
		}
		return data, stdinName, err
	}
	data, err = readfile.Read(path, max, what)
	// The results database or a model given by mistake is named for what
	// it is, as a suite path of another kind is, not parsed as what nor
	// refused as too large (its first bytes tell).
	head := data
	if err != nil {
		head = readfile.Head(path)
	}
	if e := suites.NotAText(path, head, what); e != nil {
		return nil, path, e
	}
	return data, path, err
}

// stdinOnce refuses "-" given more than once among a command's files:
// standard input is read once, so a second "-" would read nothing.
func stdinOnce(cmd string, paths []string) error {
	if n := countOf(paths, stdinPath); n > 1 {
		return fmt.Errorf("%s: - (standard input) given %d times: it is read once", cmd, n)
	}
	return nil
}

// countOf is how many of args are a.
func countOf(args []string, a string) int {
	n := 0
	for _, x := range args {
		if x == a {
			n++
		}
	}
	return n
}

// writeOutput writes through write to w (standard output) where path is
// "-", else to path whole or not at all (writeWhole).
func writeOutput(w io.Writer, path string, write func(io.Writer) error) error {
	if path == stdoutPath {
		return write(w)
	}
	return writeWhole(path, write)
}

// noStdout refuses "-" for an output (what names it: a flag) that cannot
// be standard output, saying why (what standard output carries, or what
// the output must be), rather than write a file named "-".
func noStdout(what, path, why string) error {
	if path == stdoutPath {
		return fmt.Errorf("%s -: %s, so \"-\" (standard output) cannot be it", what, why)
	}
	return nil
}

// notAFolder refuses a file named where what writes a folder (report and
// compare --out), or a folder that would be made inside a file, before any
// work: as checkWritable says a folder named where a file goes.
func notAFolder(what, path, why string) error {
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		return fmt.Errorf("%s %s: a file, not a folder: %s", what, path, why)
	} else if err == nil {
		return nil
	}
	if f := results.FileInPath(path); f != "" {
		return fmt.Errorf("%s %s: %s is a file, not a folder: %s", what, path, f, why)
	}
	return nil
}

// fileNamed are the extensions of the files mtlbench writes, which a
// folder it makes is not named with (makeFolder).
var fileNamed = map[string]bool{".html": true, ".htm": true, ".csv": true, ".json": true, ".jsonl": true, ".md": true, ".db": true, ".png": true, ".svg": true}

// makeFolder makes dir, the folder an output (what names it: a flag)
// writes into, before any work: a file there or above it is refused as
// notAFolder says (why: what the output is), and a folder that cannot be
// made is said with the flag and the path in words, not Go's mkdir.
func makeFolder(what, dir, why string) error {
	if err := notAFolder(what, dir, why); err != nil {
		return err
	}
	// A folder to be made under a file's name (report -o report.html)
	// meant the file: it would hold report.html/index.html.
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) && fileNamed[strings.ToLower(filepath.Ext(dir))] {
		return fmt.Errorf("%s %s: named as a file, but %s; name the folder (%s %s), or make it first to use this name",
			what, dir, why, what, strings.TrimSuffix(dir, filepath.Ext(dir)))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = fmt.Errorf("%s: %w", pe.Path, pe.Err)
		}
		return fmt.Errorf("%s %s: the folder cannot be made: %w", what, dir, err)
	}
	return nil
}

// stdinOfAnotherKind names the results database or a model's file piped
// in where what is wanted, as suites.NotA names a file of one, without the
// commands that read it, which would need its path.
func stdinOfAnotherKind(head []byte, what string) error {
	if c, ok := readfile.Compression(head); ok {
		return readfile.NotA(fmt.Sprintf("%s: %s-compressed, not %s (decompress it on its way in: %s)", stdinName, c.Name, what, c.Pipe))
	}
	if k := readfile.KindOf(head); k != readfile.Unknown {
		return readfile.NotA(fmt.Sprintf("%s: %s, not %s", stdinName, k, what))
	}
	return nil
}

// emptyInput refuses an empty argument where a file is wanted (a shell
// variable left unset): the system would say ": no such file or
// directory", naming nothing.
func emptyInput(path, what string) error {
	if path == "" {
		return fmt.Errorf("an empty path given for %s (name a file, or - for standard input)", what)
	}
	return nil
}
