package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/results"
)

// A command that only reads the store, stopped by a signal while it has
// the store open, closes it before the process ends, so the folder is left
// as it was: killed at once, it left SQLite's -wal and -shm beside the
// store. Each command is this test binary run again as mtlbench, its
// output a pipe the test leaves unread, so it stops with the store open.
func TestReaderClosesStoreOnSignal(t *testing.T) {
	if args := os.Getenv("MTLB_READER_CHILD_ARGS"); args != "" {
		err := run(append([]string{"mtlbench"}, strings.Fields(args)...), os.Stdin, os.Stdout, os.Stderr)
		if closingOnSignal.Load() {
			select {} // closeOnSignals ends the process, as main leaves it to
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "mtlbench:", err)
			os.Exit(exitCode(err))
		}
		os.Exit(0)
	}
	dir := t.TempDir()
	store := filepath.Join(dir, "r.db")
	db, err := results.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.CreateRun(&results.Run{SuiteName: "s", Backend: "cpu", Status: results.RunComplete})
	if err != nil {
		t.Fatal(err)
	}
	cases := []results.Case{{Key: "model/decode", Name: "decode", Kind: results.CaseModel}}
	if err := db.AddCases(id, cases); err != nil {
		t.Fatal(err)
	}
	// Enough samples that the output fills the pipe: some thousands of rows.
	if err := db.Batch(func(b *results.DB) error {
		for rep := range 4000 {
			if err := b.AddRep(cases[0].ID, rep, []results.Sample{{Rep: rep, Metric: "decode_tok_s", Value: float64(100 + rep%7)}}, nil); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishCase(cases[0].ID, nil, nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	db.Close()
	names := func() []string {
		es, _ := os.ReadDir(dir)
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		slices.Sort(out)
		return out
	}
	before := names()
	for _, tc := range []struct {
		name string
		args string
		sig  syscall.Signal
	}{
		{"show, interrupted", fmt.Sprintf("show %d --format jsonl --raw", id), syscall.SIGINT},
		{"show, terminated", fmt.Sprintf("show %d --format csv --raw", id), syscall.SIGTERM},
		{"show, its terminal closed", fmt.Sprintf("show %d --format json --raw", id), syscall.SIGHUP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sig == syscall.SIGHUP && signal.Ignored(syscall.SIGHUP) {
				t.Skip("SIGHUP is ignored here (nohup), and so in the command")
			}
			child := exec.Command(os.Args[0], "-test.run=^TestReaderClosesStoreOnSignal$")
			child.Env = append(os.Environ(), "MTLB_READER_CHILD_ARGS="+tc.args+" --db "+store)
			stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
			if err != nil {
				t.Fatal(err)
			}
			defer stderr.Close()
			child.Stderr = stderr
			said := func() string { b, _ := os.ReadFile(stderr.Name()); return string(b) }
			out, err := child.StdoutPipe()
			defer out.Close()
			if err != nil {
				t.Fatal(err)
			}
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			// Its first line out: the store is open, and the pipe, unread,
			// fills and holds the command there.
			if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
				t.Fatalf("no output: %v (stderr %s)", err, said())
			}
			deadline := time.Now().Add(10 * time.Second)
			for !slices.Contains(names(), "r.db-wal") && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if err := child.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			// Its output left unread: the command cannot end on its own.
			state, err := child.Process.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if state.ExitCode() != 130 {
				t.Errorf("exit %v, want status 130 (stderr %s)", state, said())
			}
			if after := names(); !reflect.DeepEqual(after, before) {
				t.Errorf("folder held %v before the command, %v after it was stopped", before, after)
			}
		})
	}
}
