package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"
)

func stepsFlag() cli.Flag {
	return &cli.StringFlag{Name: "steps", TakesFile: true, Usage: "write every step of the model cases (warm-ups included) to `FILE`, a JSON object a line: " +
		"case, rep, step, kind, tokens, seqs, ms, encode_ms, device_ms, sample_ms, graph_misses (docs/data.md, \"Step logs\"); not -, stdout takes the summary"}
}

// openStepLog checks --steps' file before any work, or returns a nil
// writer without the flag. The file is made, or a log already there
// emptied, only as the run writes its first step, or as done is called
// for a run that recorded: a command refused before then (a backend that
// does not open) neither leaves a file nor empties an earlier run's log.
// A --resume appends to the log, as the command the interrupted run
// printed names it: emptied, it lost the steps before the interruption.
// done flushes and closes it.
func openStepLog(c *cli.Context, store string) (w io.Writer, done func(recorded bool) error, err error) {
	path := c.String("steps")
	if path == "" {
		return nil, func(bool) error { return nil }, nil
	}
	if err := noStdout("--steps", path, "standard output carries the run's summary"); err != nil {
		return nil, nil, err
	}
	if err := notTheStore(store, "--steps", path); err != nil {
		return nil, nil, err
	}
	if err := checkWritable("--steps", path); err != nil {
		return nil, nil, err
	}
	// A file there that may not be written is refused now, unchanged.
	if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("--steps: %w", err)
	}
	l := &stepLog{path: path, resume: c.Int64("resume") != 0}
	return l, func(recorded bool) error {
		err := l.close(recorded)
		if err != nil {
			return fmt.Errorf("--steps: %w", err)
		}
		return nil
	}, nil
}

// stepLog is --steps' file, made as it is first written; a resume's
// appends to the log there.
type stepLog struct {
	path   string
	resume bool
	f      *os.File
	b      *bufio.Writer
}

func (l *stepLog) open() error {
	if l.f != nil {
		return nil
	}
	if !l.resume {
		f, err := os.Create(l.path)
		if err != nil {
			return err
		}
		l.f, l.b = f, bufio.NewWriter(f)
		return nil
	}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o666)
	if err != nil {
		return err
	}
	// A line a run stopped at once (a second signal) cut short is
	// dropped, not continued by the resume's first.
	end, err := endOfLastLine(f)
	if err == nil {
		err = f.Truncate(end)
	}
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.b = f, bufio.NewWriter(f)
	return nil
}

// endOfLastLine is f's size up to the end of its last whole line.
func endOfLastLine(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 4096)
	for end := st.Size(); end > 0; {
		start := max(end-int64(len(buf)), 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

func (l *stepLog) Write(p []byte) (int, error) {
	if err := l.open(); err != nil {
		return 0, err
	}
	return l.b.Write(p)
}

// close flushes and closes the file; a run that recorded and wrote no
// step (kernel cases only) still leaves its empty log.
func (l *stepLog) close(recorded bool) error {
	if l.f == nil {
		if !recorded {
			return nil
		}
		if err := l.open(); err != nil {
			return err
		}
	}
	err := l.b.Flush()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}
