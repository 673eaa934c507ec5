package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"
)

func stepsFlag() cli.Flag {
	return &cli.StringFlag{Name: "steps", Usage: "write every step of the model cases (warm-ups included) to `FILE`, a JSON object a line: " +
		"case, rep, step, kind, tokens, seqs, ms, encode_ms, device_ms, sample_ms, graph_misses (docs/data.md, \"Step logs\"); not -, stdout takes the summary"}
}

// openStepLog opens --steps' file before any work, or returns a nil writer
// without the flag; done flushes and closes it.
func openStepLog(c *cli.Context, store string) (w io.Writer, done func() error, err error) {
	path := c.String("steps")
	if path == "" {
		return nil, func() error { return nil }, nil
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
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--steps: %w", err)
	}
	b := bufio.NewWriter(f)
	return b, func() error {
		err := b.Flush()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("--steps: %w", err)
		}
		return nil
	}, nil
}
