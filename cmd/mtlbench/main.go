// Command mtlbench benchmarks and tunes LLM inference kernels: it runs a
// paged-attention, continuous-batching engine under YAML suites, records
// every sample to SQLite and compares runs against each other and against
// the documented performance history.
package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/results"
)

func main() {
	err := run(os.Args, os.Stdin, os.Stdout, os.Stderr)
	if closingOnSignal.Load() {
		select {} // closeOnSignals ends the process, once the store is closed
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mtlbench:", err)
		os.Exit(exitCode(err))
	}
}

// exitError carries a specific exit code (the gate's 1 and 3, say).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode is the exit status for err: an exitError's code (1 for what a
// command found wrong in what it read: a regression, an invalid suite,
// failed checks; 3, gate's or compare's cannot tell; 130 when interrupted),
// else 2, a usage or input error. An input that is not there (a missing file
// or suite) is 2 whatever the command found in the others, short of an
// interrupt (README.md, "Exit status").
func exitCode(err error) int {
	e, ok := err.(*exitError)
	switch {
	case ok && e.code == 130:
		return e.code
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, readfile.ErrNotAFile):
		return 2 // an input error, whatever else the command found
	case ok:
		return e.code
	}
	return 2
}

// summaryError says msg of errors already said one by one (a suite each),
// keeping them in its chain for exitCode.
type summaryError struct {
	msg  string
	errs []error
}

func (e *summaryError) Error() string   { return e.msg }
func (e *summaryError) Unwrap() []error { return e.errs }

// run is the whole program; tests call it with their own input and writers.
// A command reads standard input through the app's Reader (import -, tune
// import -, run --lockstep), never os.Stdin.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	out := &outWriter{w: stdout}
	app := newApp(out, stderr)
	app.Reader = stdin
	app.Metadata[argsKey] = args
	args = joinLists(app, args)
	if err := checkFlagArgs(app, args); err != nil {
		return err
	}
	args, err := expandHome(app, args)
	if err != nil {
		return err
	}
	err = app.Run(interspersed(app, args))
	if err == nil && out.err != nil {
		err = out.err
	}
	if db, ok := app.Metadata[storeKey].(*results.DB); ok {
		err = nameStore(db, err)
	}
	return err
}

// outWriter keeps the first error of a write to standard output, so a
// command whose output was lost (a full disk, a closed file) does not exit 0
// whichever command it is, the help and the version too (README.md, "Exit
// status").
type outWriter struct {
	w   io.Writer
	err error
}

func (o *outWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil && o.err == nil {
		o.err = err
	}
	return n, err
}

// storeKey holds the results database a command opened (openDB,
// openExistingDB) in the app's Metadata, so that a failure of the store
// itself names it whatever the command (nameStore).
const storeKey = "store"

// nameStore says, of an error SQLite returned under a command, which
// database failed and what to do (results.DB.StoreError), unless the
// error already names it; the exit code is kept.
func nameStore(db *results.DB, err error) error {
	if err == nil || strings.Contains(err.Error(), db.Path()) {
		return err
	}
	msg := db.StoreError(err)
	if msg == "" {
		return err
	}
	if e, ok := err.(*exitError); ok {
		return &exitError{code: e.code, err: fmt.Errorf("%s: %w", msg, e.err)}
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// requiredKey holds, in the app's Metadata, the flags a command requires
// (takeRequired), whose Required urfave/cli no longer sees: an empty value
// of one is not told to leave it out for a default (checkFlagArgs).
const requiredKey = "required"

// argsKey holds the command line as given in the app's Metadata, for
// commands that print a command to run again (bench's resume).
const argsKey = "args"
