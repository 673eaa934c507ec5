package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mtlbench/mtlbench/runner/tune"
)

// cancelAfter is a progress writer that ends the command's context once a
// line holding every one of want was written: an interrupt at a known
// point, as a Ctrl-C there would be (stopOnSignals ends the same context).
type cancelAfter struct {
	mu     sync.Mutex
	b      bytes.Buffer
	want   []string
	cancel context.CancelFunc
}

func (w *cancelAfter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	for _, line := range strings.Split(w.b.String(), "\n") {
		all := w.cancel != nil
		for _, s := range w.want {
			all = all && strings.Contains(line, s)
		}
		if all {
			w.cancel()
		}
	}
	return len(p), nil
}

// tuneWith runs the program's tune with stderr to errw and ctx as the
// command's context.
func tuneWith(ctx context.Context, errw *cancelAfter, args ...string) (string, error) {
	var o bytes.Buffer
	app := newApp(&o, errw)
	full := append([]string{"mtlbench"}, args...)
	app.Metadata = map[string]any{argsKey: full}
	err := app.RunContext(ctx, interspersed(app, full))
	return o.String(), err
}

// A tune of three buckets interrupted once the first ended keeps its winner
// and prints a command that tunes the other two, leaving the first alone;
// the resumed run's report lists all three, and the file holds three
// winners. A winner not shown to be this build's (another commit, tool
// version or kernel source, or no tune run of this store) is tuned again.
func TestTuneInterruptAndResume(t *testing.T) {
	tmp := isolate(t)
	suite := mmSuite(t, tmp)
	out, db := filepath.Join(tmp, "tuned.json"), filepath.Join(tmp, "r.db")
	args := []string{"tune", suite, "--backend", "cpu", "--threads", "1", "--db", db, "--out", out,
		"--rounds", "3", "--confirm", "6", "--sample-time", "1ms", "--budget", "0"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := &cancelAfter{want: []string{"[1/3]", ": done: "}, cancel: cancel}
	report, err := tuneWith(ctx, first, args...)
	var ee *exitError
	if err == nil || !errors.As(err, &ee) || ee.code != 130 {
		t.Fatalf("interrupted tune: %v, want exit 130\n%s", err, first.b.String())
	}
	f, rerr := tune.ReadFile(out)
	if rerr != nil || len(f.Entries) != 1 {
		t.Fatalf("after the interrupt the file holds %v (%v), want the first bucket's winner", f, rerr)
	}
	kept := f.Entries[0]
	said := first.b.String()
	var resume string
	for _, line := range strings.Split(said, "\n") {
		if r, ok := strings.CutPrefix(line, "resume with: "); ok {
			resume = r
		}
	}
	for _, want := range []string{"tune: interrupted: 1 of 3 buckets finished, their winners kept in " + out + ": " + kept.Describe()} {
		if !strings.Contains(said, want) {
			t.Errorf("interrupted tune lacks %q:\n%s", want, said)
		}
	}
	if resume == "" {
		t.Fatalf("no resume command:\n%s\n%s", said, report)
	}
	// The printed command, parsed back as a shell would split it.
	words := strings.Fields(resume)
	if words[0] != "mtlbench" || words[len(words)-1] != "--skip-tuned" {
		t.Fatalf("resume command %q", resume)
	}

	// A dry run of the resume lists what it would do, timing nothing: the
	// finished bucket skipped with its stored winner and run, the others
	// tuned; the store and the file are as they were.
	// The winner as the interrupted tune named it.
	_, winner, _ := strings.Cut(said, kept.Describe()+": ")
	winner, _, _ = strings.Cut(winner, "\n")
	dbBefore, _ := os.ReadFile(db)
	dry := &cancelAfter{}
	plan, err := tuneWith(context.Background(), dry, append(words[1:], "--dry-run")...)
	if err != nil {
		t.Fatalf("resume --dry-run: %v\n%s", err, dry.b.String())
	}
	for _, want := range []string{
		"--skip-tuned: skipped: tuned earlier (run 1) for this build: " + winner + " kept",
		"--skip-tuned: tuned: no stored winner in " + out,
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("resume --dry-run lacks %q:\n%s", want, plan)
		}
	}
	if n := strings.Count(plan, "--skip-tuned: tuned: "); n != 2 {
		t.Errorf("resume --dry-run tunes %d buckets, want 2:\n%s", n, plan)
	}
	if said := dry.b.String(); !strings.Contains(said, "tune: --skip-tuned --dry-run: 1 of 3 buckets would be skipped, 2 tuned") || strings.Contains(said, "done: ") {
		t.Errorf("resume --dry-run said:\n%s", said)
	}
	if g, _ := tune.ReadFile(out); len(g.Entries) != 1 {
		t.Errorf("resume --dry-run changed %s: %v", out, g)
	}
	if dbAfter, _ := os.ReadFile(db); !bytes.Equal(dbBefore, dbAfter) {
		t.Errorf("resume --dry-run wrote to %s", db)
	}
	// A store that is not there holds no tune run: the winner is tuned
	// again, and the dry run makes no store.
	none := filepath.Join(tmp, "none.db")
	noStore := slices.Clone(words[1:])
	noStore[slices.Index(noStore, db)] = none
	plan, err = tuneWith(context.Background(), &cancelAfter{}, append(noStore, "--dry-run")...)
	if err != nil || !strings.Contains(plan, "--skip-tuned: tuned: its winner names no tune run in this results database") || strings.Contains(plan, "skipped: ") {
		t.Errorf("resume --dry-run with no store: %v\n%s", err, plan)
	}
	if _, err := os.Stat(none); err == nil {
		t.Errorf("resume --dry-run made the store %s", none)
	}

	rest := &cancelAfter{}
	report, err = tuneWith(context.Background(), rest, words[1:]...)
	if err != nil {
		t.Fatalf("resumed tune: %v\n%s", err, rest.b.String())
	}
	said = rest.b.String()
	for _, want := range []string{"[1/3] mm/n=8: skipped: tuned earlier (run 1)", "tune: --skip-tuned: 1 of 3 buckets tuned earlier for this build",
		"[2/3] mm/n=16: done: ", "[3/3] mm/n=32: done: "} {
		if !strings.Contains(said, want) {
			t.Errorf("resumed tune lacks %q:\n%s", want, said)
		}
	}
	if strings.Contains(said, "[1/3] mm/n=8: time") || strings.Contains(said, "[1/3] mm/n=8: done") {
		t.Errorf("the finished bucket was tuned again:\n%s", said)
	}
	if strings.Count(report, "│ matmul │") != 3 || !strings.Contains(report, "tuned earlier (run 1)") {
		t.Errorf("resumed report does not list the three buckets:\n%s", report)
	}
	f, rerr = tune.ReadFile(out)
	if rerr != nil || len(f.Entries) != 3 {
		t.Fatalf("after the resume the file holds %v (%v), want 3 winners", f, rerr)
	}
	for _, e := range f.Entries {
		if e.Key() == kept.Key() && !e.Same(kept) {
			t.Errorf("the first bucket's winner was replaced: %+v, was %+v", e, kept)
		}
	}

	// A stored winner not of this build is tuned again.
	for _, tc := range []struct {
		name   string
		edit   func(*tune.Entry)
		commit string // this build's, where not the tree's
		why    string
	}{
		{"commit", func(*tune.Entry) {}, "0123abcd", `this build is "0123abcd"`},
		{"tool version", func(e *tune.Entry) { e.ToolVersion = "v0.0.1" }, "", "tuned by mtlbench v0.0.1"},
		{"kernel source", func(e *tune.Entry) { e.SourceHash = "abc" }, "", `tuned on kernel source "abc"`},
		{"no run", func(e *tune.Entry) { e.RunID = 0 }, "", "names no tune run in this results database"},
		{"other run", func(e *tune.Entry) { e.RunID = 999 }, "", "tune run 999 cannot be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.commit != "" {
				t.Setenv("MTLBENCH_GIT_COMMIT", tc.commit)
			}
			g, err := tune.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			for i := range g.Entries {
				if g.Entries[i].Key() == kept.Key() {
					tc.edit(&g.Entries[i])
				}
			}
			if err := g.Write(out); err != nil {
				t.Fatal(err)
			}
			// A dry run names the reason as the tune does.
			plan, err := tuneWith(context.Background(), &cancelAfter{}, append(words[1:], "--dry-run")...)
			_, line, _ := strings.Cut(plan, "(mm/n=8)\n")
			line, _, _ = strings.Cut(line, "\n")
			if err != nil || !strings.HasPrefix(line, "  --skip-tuned: tuned: ") || !strings.Contains(line, tc.why) {
				t.Errorf("--dry-run of a stored winner of another %s: %v: %q\n%s", tc.name, err, line, plan)
			}
			w := &cancelAfter{want: []string{"[2/3]"}, cancel: func() {}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w.cancel = cancel // the first bucket is all this needs to see
			tuneWith(ctx, w, words[1:]...)
			said := w.b.String()
			if !strings.Contains(said, "[1/3] mm/n=8: space: tuned again: ") || !strings.Contains(said, tc.why) || !strings.Contains(said, "[1/3] mm/n=8: done: ") {
				t.Errorf("a stored winner of another %s was not tuned again:\n%s", tc.name, said)
			}
		})
	}
}

// mmSuite writes a suite of three matmul buckets small enough to tune in
// milliseconds.
func mmSuite(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "mm.yaml")
	if err := os.WriteFile(p, []byte("name: mm\nbackend: cpu\ncases:\n  - name: mm\n    kind: kernel\n    op: matmul\n"+
		"    params: { k: 64, dtype: f32 }\n    matrix:\n      n: [8, 16, 32]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The printed command names the tuned file and the store however the
// interrupted tune named them (a relative --dir or --out=, the user's
// cache), so that run from another folder it skips the finished bucket.
func TestTuneResumeCommandNamesTheFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		file  string // the tuned file, relative to the folder the tune ran in
	}{
		{"relative --dir", []string{"--dir", "tuned", "--db", "r.db"}, "tuned/*.cpu.json"},
		{"relative --out=", []string{"--out=t.json", "--db=r.db"}, "t.json"},
		{"user cache", []string{"--db", "r.db"}, "cache/mtlbench/tuned/*.cpu.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := isolate(t)
			t.Chdir(tmp)
			args := append([]string{"tune", mmSuite(t, tmp), "--backend", "cpu", "--threads", "1",
				"--rounds", "3", "--confirm", "6", "--sample-time", "1ms"}, tc.flags...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			first := &cancelAfter{want: []string{"[1/3]", ": done: "}, cancel: cancel}
			tuneWith(ctx, first, args...)
			var resume string
			for _, line := range strings.Split(first.b.String(), "\n") {
				if r, ok := strings.CutPrefix(line, "resume with: "); ok {
					resume = r
				}
			}
			if resume == "" {
				t.Fatalf("no resume command:\n%s", first.b.String())
			}
			t.Chdir(t.TempDir()) // the command is run from another folder
			rest := &cancelAfter{}
			if _, err := tuneWith(context.Background(), rest, strings.Fields(resume)[1:]...); err != nil {
				t.Fatalf("%s: %v\n%s", resume, err, rest.b.String())
			}
			if said := rest.b.String(); !strings.Contains(said, "[1/3] mm/n=8: skipped: ") || !strings.Contains(said, "[3/3] mm/n=32: done: ") {
				t.Errorf("%s did not skip the first bucket and tune the rest:\n%s", resume, said)
			}
			files, _ := filepath.Glob(filepath.Join(tmp, tc.file))
			if len(files) != 1 {
				t.Fatalf("tuned files %v, want one %s", files, tc.file)
			}
			if f, err := tune.ReadFile(files[0]); err != nil || len(f.Entries) != 3 {
				t.Errorf("%s holds %v (%v), want 3 winners", files[0], f, err)
			}
			if _, err := os.Stat("r.db"); err == nil {
				t.Errorf("%s made a store in the folder it ran in", resume)
			}
		})
	}
}
