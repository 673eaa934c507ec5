package main

import (
	"fmt"
	"io"
	"os"
)

// stdoutPath is the output path that means standard output, as most tools
// take it: `mtlbench tune export - | ssh mac mtlbench tune import -`.
const stdoutPath = "-"

// stdinPath is the input path that means standard input, likewise
// (`mtlbench export -o - | mtlbench import -`).
const stdinPath = "-"

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
// compare --out), before any work: as checkWritable says a folder named
// where a file goes.
func notAFolder(what, path, why string) error {
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		return fmt.Errorf("%s %s: a file, not a folder: %s", what, path, why)
	}
	return nil
}
