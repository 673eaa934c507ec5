package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/internal/readfile/kindtest"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/tune"
	"github.com/mtlbench/mtlbench/runner/tune/tuner"
)

// mtlTune runs the program with the tune command, registered or not yet.
func mtlTune(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	app := newApp(&o, &e)
	found := false
	for _, c := range app.Commands {
		found = found || c.Name == "tune"
	}
	if !found {
		app.Commands = append(app.Commands, tuneCommand())
	}
	err = app.Run(interspersed(app, append([]string{"mtlbench"}, args...)))
	return o.String(), e.String(), err
}

// isolate keeps the test away from the user's tuned configs.
func isolate(t *testing.T) string {
	tmp := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(tmp, "cache"))
	t.Setenv("HOME", tmp)
	t.Setenv("MTLBENCH_TUNED", "")
	return tmp
}

func TestTuneShapeShowExportImport(t *testing.T) {
	tmp := isolate(t)
	dir, db := filepath.Join(tmp, "tuned"), filepath.Join(tmp, "r.db")
	out, errOut, err := mtlTune(t, "tune", "--kernel", "moe", "--shape", "tokens=2,experts=4,top_k=2,hidden=32,intermediate=16",
		"--dtype", "f32", "--backend", "cpu", "--threads", "2", "--db", db, "--dir", dir, "--rounds", "3", "--confirm", "6", "--sample-time", "1ms")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	for _, want := range []string{"tune run 1", "moe", "experts=4,hidden=32,intermediate=16,threads=2,tokens=2,top_k=2"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"[1/1]", "reference check", "confirm", "tuned configs: 1 new"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("progress lacks %q:\n%s", want, errOut)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.cpu.json"))
	if len(files) != 1 {
		t.Fatalf("tuned files %v", files)
	}

	out, _, err = mtlTune(t, "tune", "show", "--dir", dir, "--backend", "cpu", "--threads", "2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "user cache: "+dir+" (1 entry)") || !strings.Contains(out, "tokens=2") || !strings.Contains(out, " ok ") {
		t.Errorf("show:\n%s", out)
	}

	exported := filepath.Join(tmp, "export.json")
	if _, errOut, err := mtlTune(t, "tune", "export", exported, "--dir", dir); err != nil || !strings.Contains(errOut, "exported 1 tuned config from ") {
		t.Fatalf("export: %v %s", err, errOut)
	}
	dir2 := filepath.Join(tmp, "other")
	if _, errOut, err := mtlTune(t, "tune", "import", exported, "--dir", dir2); err != nil || !strings.Contains(errOut, "imported 1 tuned config into ") || !strings.Contains(errOut, "1 new") {
		t.Fatalf("import: %v %s", err, errOut)
	}
	a, _ := tune.ReadFile(files[0])
	b, err := tune.ReadFile(filepath.Join(dir2, filepath.Base(files[0])))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("export/import round trip differs:\n%+v\n%+v", a, b)
	}
	// Importing again neither duplicates nor replaces: the entry is the one
	// stored, counted as unchanged (it was "1 replaced", which said the
	// store had changed when it had not).
	if _, errOut, _ := mtlTune(t, "tune", "import", exported, "--dir", dir2); !strings.Contains(errOut, "0 new, 0 replaced, 1 unchanged") {
		t.Errorf("re-import: %s", errOut)
	}
	// An entry of the same bucket that differs replaces the stored one.
	if f, err := tune.ReadFile(exported); err != nil {
		t.Fatal(err)
	} else {
		f.Entries[0].Note = "retuned"
		changed := filepath.Join(tmp, "changed.json")
		if err := f.Write(changed); err != nil {
			t.Fatal(err)
		}
		if _, errOut, _ := mtlTune(t, "tune", "import", changed, "--dir", dir2); !strings.Contains(errOut, "0 new, 1 replaced, 0 unchanged") {
			t.Errorf("import of a changed entry: %s", errOut)
		}
	}
	// An entry no kernel takes is refused, naming it, and nothing of its
	// file is imported.
	for _, bad := range []struct {
		edit func(*tune.Entry)
		want string
	}{
		{func(e *tune.Entry) { e.Config = tune.Config{"strategy": "banana"} }, "strategy=banana is not a value"},
		{func(e *tune.Entry) { e.Config = tune.Config{"nope": "1"} }, `no parameter "nope"`},
		{func(e *tune.Entry) { e.Kernel = "nope" }, `kernel "nope"`},
		{func(e *tune.Entry) { e.DType = "q99" }, `dtype "q99"`},
		{func(e *tune.Entry) { e.Shape = tune.Shape{"tokens": -1} }, "tokens=-1"},
		{func(e *tune.Entry) { e.Shape = tune.Shape{} }, "no shape"},
		{func(e *tune.Entry) { e.Shape["zz"] = 3 }, "shape zz=3: moe's buckets are over"},
		{func(e *tune.Entry) { e.Speedup = -5 }, "speedup -5: want a ratio above 0"},
		{func(e *tune.Entry) { e.P = 7 }, "p_value 7: want 0 to 1"},
		{func(e *tune.Entry) { e.Samples = -3 }, "samples -3"},
		{func(e *tune.Entry) { e.Config = tune.Config{"chunk": "8"} }, "lacks moe's strategy"},
		{func(e *tune.Entry) { e.Device = strings.Repeat("x", 300) }, "a device name of 300 bytes (at most 256)"},
		// The lookup matches the device's dimensions too.
		{func(e *tune.Entry) { delete(e.Shape, "threads") }, "lacks threads"},
		// The float kernels take float weights, and a config replaces the
		// default only when measured faster.
		{func(e *tune.Entry) { e.DType = "q4" }, `unknown dtype "q4"`},
		{func(e *tune.Entry) { e.Config, e.Speedup = tune.Config{"strategy": "loop"}, 0.5 }, "speedup 0.5: a tuned config replaces its default"},
		{func(e *tune.Entry) { e.Config, e.Speedup, e.Samples = tune.Config{"strategy": "loop"}, 1.2, 0 }, "no samples"},
	} {
		f, _ := tune.ReadFile(exported)
		bad.edit(&f.Entries[0])
		path := filepath.Join(tmp, "bad.json")
		if err := f.Write(path); err != nil {
			t.Fatal(err)
		}
		dir3 := filepath.Join(tmp, "bad")
		if _, _, err := mtlTune(t, "tune", "import", path, "--dir", dir3); err == nil || !strings.Contains(err.Error(), bad.want) ||
			!strings.Contains(err.Error(), "entry 0") {
			t.Errorf("import of a bad entry: %v, want %q", err, bad.want)
		}
		if _, err := os.Stat(dir3); err == nil {
			t.Errorf("a bad entry's file was imported (%s)", bad.want)
		}
	}
	// Two files run together, and two winners of one bucket, are refused
	// whole.
	raw, _ := os.ReadFile(exported)
	joined := filepath.Join(tmp, "joined.json")
	os.WriteFile(joined, append(append([]byte{}, raw...), raw...), 0o644)
	if _, _, err := mtlTune(t, "tune", "import", joined, "--dir", filepath.Join(tmp, "joined")); err == nil || !strings.Contains(err.Error(), "more after the tuned-config object") {
		t.Errorf("two objects in one file: %v", err)
	}
	twice, _ := tune.ReadFile(exported)
	other := twice.Entries[0]
	other.Config = other.Default
	twice.Entries = append(twice.Entries, other)
	dup := filepath.Join(tmp, "dup.json")
	if err := twice.Write(dup); err != nil {
		t.Fatal(err)
	}
	if _, _, err := mtlTune(t, "tune", "import", dup, "--dir", filepath.Join(tmp, "dup")); err == nil || !strings.Contains(err.Error(), "entries 0 and 1 are both for") {
		t.Errorf("two winners of one bucket: %v", err)
	}
	// An export never overwrites a file.
	if _, _, err := mtlTune(t, "tune", "export", joined, "--dir", dir); err == nil || !strings.Contains(err.Error(), "exists: not overwritten") {
		t.Errorf("export over a file: %v", err)
	}
	// Entries of two devices, one of whose files cannot be read: nothing
	// is written.
	two, _ := tune.ReadFile(exported)
	second := two.Entries[0]
	second.Device = "Another CPU"
	two.Entries = append(two.Entries, second)
	twoPath := filepath.Join(tmp, "two.json")
	if err := two.Write(twoPath); err != nil {
		t.Fatal(err)
	}
	dir4 := filepath.Join(tmp, "half")
	os.MkdirAll(dir4, 0o755)
	os.WriteFile(filepath.Join(dir4, tune.FileName("Another CPU", "cpu")), []byte("{"), 0o644)
	if _, _, err := mtlTune(t, "tune", "import", twoPath, "--dir", dir4); err == nil || !strings.Contains(err.Error(), "nothing imported") {
		t.Errorf("import beside an unreadable file: %v", err)
	}
	if fs, _ := filepath.Glob(filepath.Join(dir4, "*.json")); len(fs) != 1 {
		t.Errorf("files after a refused import: %v", fs)
	}
	// A stale entry shows as such.
	a.Entries[0].SourceHash = "0000"
	a.Write(files[0])
	out, _, _ = mtlTune(t, "tune", "show", "--dir", dir, "--backend", "cpu", "--threads", "2")
	if !strings.Contains(out, "stale") {
		t.Errorf("show after a source change:\n%s", out)
	}
}

func TestTuneDryRunShowsPruning(t *testing.T) {
	isolate(t)
	out, _, err := mtlTune(t, "tune", "--kernel", "matmul", "--shape", "m=1,n=128,k=512", "--backend", "cpu", "--threads", "2", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"9 candidates", "piece <= n: a piece of 256 rows exceeds n=128", "coverage: 1 piece of 128 rows cannot keep 2 threads busy"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	// counts are words: "1 candidate", not "1 candidates"
	out, _, err = mtlTune(t, "tune", "--kernel", "matmul", "--shape", "m=1,n=8,k=64", "--backend", "cpu", "--threads", "1", "--dry-run")
	if err != nil || !strings.Contains(out, "\n  1 candidate: even/1t\n") {
		t.Errorf("dry run of one candidate: %v\n%s", err, out)
	}
	// Without --shape, the kernel's default shape, named.
	out, errOut, err := mtlTune(t, "tune", "--kernel", "matmul", "--threads", "2", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, "no --shape: tuning matmul at its default shape k=2048,m=1,n=2048,threads=2") || !strings.Contains(out, "(default shape)") {
		t.Errorf("dry run without --shape:\n%s\n%s", out, errOut)
	}
}

func TestTuneErrors(t *testing.T) {
	isolate(t)
	// Refused before any timing: the tuning would be lost.
	notJSON := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(notJSON, []byte("not a tuned config"), 0o644)
	// A results database: named, and not advised to be removed.
	store := kindtest.Write(t, t.TempDir(), "r.db", kindtest.Bytes(readfile.SQLite))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tune"}, "tune needs a suite"},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--out", os.TempDir()}, "is not a regular file: want a tuned-config file"},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--out", notJSON}, "not overwritten; fix or remove it"},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--out", store}, store + " is an SQLite database, not a tuned-config file: name one to merge the winners into with --out (not overwritten)"},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--dir", notJSON}, "is not a folder: the tuned configs cannot go in it"},
		{[]string{"tune", "show", "--dir", notJSON}, notJSON + " is not a folder: the tuned configs cannot go in it (--dir)"},
		{[]string{"tune", "show", "--dir", filepath.Join(notJSON, "tuned")}, notJSON + " is not a folder: the tuned configs cannot go in it (--dir " + filepath.Join(notJSON, "tuned") + ")"},
		{[]string{"tune", "export", "x.json", "--dir", filepath.Join(notJSON, "tuned")}, notJSON + " is not a folder: the tuned configs cannot go in it (--dir " + filepath.Join(notJSON, "tuned") + ")"},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--threads", "100000", "--dry-run"}, "--threads 100000: want 1 to 1024 (0: every core)"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--threads", "-1"}, "--threads -1: want 1 to 1024"},
		{[]string{"tune", "--kernel", "attention", "--shape", "tokens=1"}, "no tunables"},
		// An empty --kernel (a script's unset variable) names no kernel: it
		// is refused, not run as a tune of nothing.
		{[]string{"tune", "--kernel", "", "--shape", "m=1,n=64,k=64", "--dry-run"}, `--kernel "": item 1 of 1 is empty`},
		// Every list of the command line refuses an empty item in one
		// wording (listarg.Split): --kernel said "an empty name in
		// the list", --request-rate "rate \"\" is not a number".
		{[]string{"tune", "--kernel", "matmul,,moe", "--dry-run"}, `--kernel "matmul,,moe": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
		{[]string{"bench", "-m", "qwen3-moe-mini", "-b", "8", "--requests", "16", "--request-rate", "1,,2", "--print-suite"}, `--request-rate "1,,2": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
		// Flags that would be dropped without a word are refused.
		{[]string{"tune", "ci", "--dtype", "q4", "--dry-run"}, "tune: --dtype goes with --kernel, not a suite: each case tunes at its own dtype"},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--out", notJSON + ".new", "--dir", t.TempDir(), "--dry-run"}, "tune: give --out FILE or --dir FOLDER, not both"},
		{[]string{"tune", "--kernel", "moe", "--shape", "tokns=1"}, `unknown shape dimension "tokns"`},
		{[]string{"tune", "--kernel", "moe", "--shape", "tokens=1", "--strategy", "genetic"}, `--strategy "genetic": want exhaustive, random or local`},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--trials", "3", "--dry-run"}, "tune: --trials goes with --strategy random, the search that draws candidates; --strategy exhaustive draws none"},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--strategy", "local", "--trials", "3", "--dry-run"}, "--strategy local draws none"},
		{[]string{"tune", "--kernel", "moe", "--shape", "tokens=1", "--witness-gpu", "M3 Ulta"}, `--witness-gpu: unknown Apple GPU "M3 Ulta" (did you mean "M3 Ultra"?)`},
		{[]string{"tune", "export"}, "tune export needs one file (- for standard output)"},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64,threads=7", "--dry-run"}, "matmul: threads is the device's, not a shape's: tune at another count with --threads"},
		{[]string{"tune", "import", "/nonexistent.json"}, "no such file"},
		// A dry run refuses what the run would, before it lists a candidate.
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--dry-run", "--rounds", "-1"}, "--rounds -1: want a positive count"},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--dry-run", "--alpha", "2"}, "--alpha 2: want a significance level"},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--dry-run", "--min-gain", "NaN"}, "--min-gain NaN"},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--dry-run", "--budget", "-1s"}, "--budget -1s"},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--dry-run", "--confirm", "2"}, "--confirm 2"},
		{[]string{"tune", "--kernel", "moe", "--shape", "tokens=4,experts=4,top_k=8,hidden=32,intermediate=16", "--dry-run"}, "top_k=8: must be at most experts=4"},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=99999999999,k=8", "--dry-run"}, "n=99999999999: must be at most"},
		// Nor does the run record a run of buckets that could never run.
		{[]string{"tune", "--kernel", "moe", "--shape", "tokens=4,experts=4,top_k=8,hidden=32,intermediate=16"}, "top_k=8: must be at most experts=4"},
	} {
		_, _, err := mtlTune(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestWitnessGPUWithoutWitness: witness_gpu on a backend without the cost
// witness is refused as threads is on one without goroutines, by run
// (--set), bench and tune alike, naming the flag or the --set, the value
// and the backend, before anything is measured.
func TestWitnessGPUWithoutWitness(t *testing.T) {
	tmp := isolate(t)
	suite := filepath.Join(tmp, "w.yaml")
	if err := os.WriteFile(suite, []byte("name: w\nbackend: cpu\nrepetitions: 1\nwarmup: 0\ncases:\n  - name: mm\n    op: matmul\n    params: { m: 1, n: 64, k: 64 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(tmp, "r.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tune", "--backend", "cpu", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--witness-gpu", "M2 Pro", "--dry-run"},
			"--witness-gpu: witness_gpu=M2 Pro: the cpu backend has no cost witness (witness_gpu is the metal-emu backend's)"},
		{[]string{"bench", "--backend", "cpu", "-m", "qwen3-moe-mini", "-p", "4", "-n", "1", "-r", "1", "--witness-gpu", "M2 Pro", "--db", db, "-q"},
			"--witness-gpu: case bench/batch=1/prompt_len=4/gen_len=1: witness_gpu=M2 Pro: the cpu backend has no cost witness"},
		{[]string{"run", suite, "--set", "witness_gpu=M2 Pro", "--db", db, "-q"},
			"--set witness_gpu=M2 Pro: case mm: witness_gpu=M2 Pro: the cpu backend has no cost witness (witness_gpu is the metal-emu backend's)"},
	} {
		out, errOut, err := mtlTune(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q\n%s", tc.args[0], err, tc.want, errOut)
		}
		if strings.Contains(out, "witness") {
			t.Errorf("%s: stdout: %s", tc.args[0], out)
		}
	}
	if st, err := os.Stat(db); err == nil {
		rdb, err := results.Open(db)
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		if runs, _ := rdb.Runs(results.RunFilter{}); len(runs) != 0 {
			t.Errorf("%s: refused runs recorded %d runs", st.Name(), len(runs))
		}
	}
}

// Off a terminal, a phase's last round says how many it ran, in words.
func TestTuneProgressCountsRounds(t *testing.T) {
	for _, tc := range []struct {
		rounds int
		want   string
	}{
		{1, "[1/2] matmul: screen: 1 round done\n"},
		{3, "[1/2] matmul: screen: 3 rounds done\n"},
	} {
		var b strings.Builder
		p := &tuneProgress{w: &b}
		p.event(tuner.Event{Bucket: 1, Buckets: 2, Label: "matmul", Phase: "screen", Round: tc.rounds, Rounds: tc.rounds})
		if b.String() != tc.want {
			t.Errorf("%d rounds: %q, want %q", tc.rounds, b.String(), tc.want)
		}
	}
}
