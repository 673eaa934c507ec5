package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/backends"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/envconfig"
)

// A command that records refuses a model that does not open before it
// creates its results database: the failed command leaves no file behind.
func TestRefusedModelLeavesNoStore(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(suite, []byte("name: s\nmodel: { preset: no-such-model, layers: 1 }\nbackend: cpu\nrepetitions: 1\nwarmup: 0\n"+
		"cases:\n  - name: c\n    kind: model\n    params: { prompt_len: 8, gen_len: 2 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bench", []string{"bench", "-m", "no-such-model", "--layers", "1", "-p", "8", "-n", "2", "-r", "1", "--backend", "cpu", "-q"}, "--model: "},
		{"bench-layers", []string{"bench", "-m", "qwen2-0.5b", "--layers", "999", "-p", "8", "-n", "2", "-r", "1", "--backend", "cpu", "-q"}, "--layers: "},
		{"run", []string{"run", suite, "--backend", "cpu", "-q"}, suite},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(dir, tc.name, "results.db")
			_, _, err := mtl(t, append(tc.args, "--db", db)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
			if _, serr := os.Stat(db); !os.IsNotExist(serr) {
				t.Errorf("%s refused (%v) but left %s behind (stat: %v)", tc.name, err, db, serr)
			}
		})
	}
}

// export of a store that holds no runs is refused, writing nothing, as
// import refuses an input with no runs: the two never disagree on an
// empty store.
func TestExportOfAnEmptyStore(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "empty.db")
	store, err := results.OpenToWrite(db)
	if err != nil {
		t.Fatal(err)
	}
	store.Close()
	for _, tc := range []struct {
		name string
		args []string
		file string // the file export must not write; "" for stdout
	}{
		{"file", []string{"export", "--db", db, "-o", filepath.Join(dir, "runs.jsonl")}, filepath.Join(dir, "runs.jsonl")},
		{"stdout", []string{"export", "--db", db}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := mtl(t, tc.args...)
			if want := db + " holds no runs: nothing to export"; err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want %q", err, want)
			}
			if out != "" {
				t.Errorf("wrote %q to stdout", out)
			}
			if tc.file != "" {
				if _, serr := os.Stat(tc.file); !os.IsNotExist(serr) {
					t.Errorf("%s was written (stat: %v)", tc.file, serr)
				}
			}
		})
	}
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, nil, 0o644)
	_, _, err = mtl(t, "import", empty, "--db", filepath.Join(dir, "to.db"))
	if want := empty + ": no runs: an export holds one JSON line a run"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("import of an empty file: %v, want %q", err, want)
	}
}

// compare with no case of A matching one of B compared nothing: it exits 3,
// gate's "cannot tell", naming both sides' cases, while the table of the
// cases one side holds is still printed.
func TestCompareNothingMatches(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	for _, side := range []struct{ tag, prompt string }{{"a", "8"}, {"b", "9"}} {
		if _, _, err := mtl(t, "bench", "-m", "qwen2-0.5b", "--layers", "1", "-p", side.prompt, "-n", "2", "-r", "1", "--warmup", "0",
			"--backend", "cpu", "-q", "--tag", side.tag, "--db", db); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		format string
	}{{"table"}, {"csv"}} {
		t.Run(tc.format, func(t *testing.T) {
			out, _, err := mtl(t, "compare", "a", "b", "--db", db, "--format", tc.format)
			want := "nothing to compare: no case of A (bench/batch=1/prompt_len=8/gen_len=2) matches a case of B (bench/batch=1/prompt_len=9/gen_len=2)"
			if err == nil || exitCode(err) != 3 || !strings.Contains(err.Error(), want) {
				t.Fatalf("err %v (exit %d), want exit 3 and %q", err, exitCode(err), want)
			}
			if !strings.Contains(out, "prompt_len=9") {
				t.Errorf("the cases only one side holds are not printed:\n%s", out)
			}
		})
	}
}

// A command that records and is refused before it records anything (a
// backend that does not open here, a bad --set or --threads, an output
// that is the store, a binary that is not there) leaves no new results
// database behind: a new store is made only as the first run is recorded.
func TestRefusedCommandLeavesNoStore(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "s.yaml")
	text := []byte("name: s\nmodel: { preset: qwen2-0.5b, layers: 1 }\nbackend: cpu\nrepetitions: 1\nwarmup: 0\n" +
		"cases:\n  - name: c\n    kind: model\n    params: { prompt_len: 8, gen_len: 2 }\n")
	if err := os.WriteFile(suite, text, 0o644); err != nil {
		t.Fatal(err)
	}
	// No compiler: metal-emu cannot open on any machine.
	t.Setenv("MTLBENCH_CLANG", filepath.Join(dir, "no-clang++"))
	bo, err := envconfig.Backends()
	if err != nil {
		t.Fatal(err)
	}
	bench := []string{"bench", "-m", "qwen2-0.5b", "--layers", "1", "-p", "8", "-n", "2", "-r", "1", "--warmup", "0", "-q"}
	type row struct {
		name    string
		backend string // one that must not open here, else the row is skipped
		args    []string
		want    string
	}
	var rows []row
	for _, be := range []string{"metal-emu", "cuda", "metal"} {
		own := filepath.Join(dir, be+".yaml")
		if err := os.WriteFile(own, []byte(strings.Replace(string(text), "backend: cpu", "backend: "+be, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		rows = append(rows,
			row{"run-file-" + be, be, []string{"run", own, "-q"}, own + ":3:10: backend " + be + ": "},
			row{"tune-file-" + be, be, []string{"tune", own, "--out", filepath.Join(dir, "tuned.json"), "-q"}, own + ":3:10: backend " + be + ": "},
			row{"run-" + be, be, []string{"run", suite, "--backend", be, "-q"}, "--backend " + be + ": "},
			row{"run-suite-" + be, be, []string{"run", suite, "--set", "backend=" + be, "-q"}, "--set backend=" + be + ": "},
			row{"bench-" + be, be, append(slices.Clone(bench), "--backend", be), "--backend " + be + ": "},
			row{"tune-" + be, be, []string{"tune", "--kernel", "rmsnorm", "--backend", be, "--out", filepath.Join(dir, "tuned.json"), "-q"}, "--backend " + be + ": "},
		)
	}
	rows = append(rows,
		row{"run-set", "", []string{"run", suite, "--set", "no_such_param=1", "-q"}, "--set no_such_param=1"},
		row{"run-threads", "", []string{"run", suite, "--backend", "cpu", "--threads", "-1", "-q"}, "--threads -1"},
		row{"bench-steps-is-the-store", "", append(slices.Clone(bench), "--backend", "cpu", "--steps", "STORE"), "--steps"},
		row{"tune-out-is-the-store", "", []string{"tune", "--kernel", "matmul", "--shape", "m=1,n=8,k=64", "--backend", "cpu", "--out", "STORE", "-q"}, "--out"},
		row{"ab-no-baseline", "", []string{"ab", suite, "--baseline-bin", filepath.Join(dir, "no-such-binary"), "-q"}, "--baseline-bin"},
	)
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			if tc.backend != "" {
				if be, err := backends.Open(tc.backend, bo); err == nil {
					be.Close()
					t.Skipf("the %s backend opens on this machine", tc.backend)
				}
			}
			db := filepath.Join(dir, tc.name, "results.db")
			args := slices.Clone(tc.args)
			for i, a := range args {
				if a == "STORE" {
					args[i] = db
				}
			}
			_, _, err := mtl(t, append(args, "--db", db)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
			if _, serr := os.Stat(db); !os.IsNotExist(serr) {
				t.Errorf("%s refused (%v) but left %s behind (stat: %v)", tc.name, err, db, serr)
			}
			t.Log(err)
		})
	}
}

// A run stopped because its --steps file cannot be written keeps what it
// measured and says how to finish it, as an interrupted one does; the
// resume (without the --steps) finishes it.
func TestStepLogFailureSaysHowToResume(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here to fail the step log's writes")
	}
	dir := t.TempDir()
	suite := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(suite, []byte("name: s\nmodel: { preset: qwen2-0.5b, layers: 1 }\nbackend: cpu\nrepetitions: 2\nwarmup: 0\n"+
		"cases:\n  - name: c\n    kind: model\n    matrix: { batch: [1, 2] }\n    params: { prompt_len: 8, gen_len: 40 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		resume []string // the command that finishes run 1
	}{
		{"run", []string{"run", suite, "--backend", "cpu", "-q"}, []string{"run", suite, "--backend", "cpu", "-q", "--resume", "1"}},
		{"bench", []string{"bench", "-m", "qwen2-0.5b", "--layers", "1", "-p", "8", "-n", "40", "-b", "1,2", "-r", "2", "--warmup", "0", "--backend", "cpu", "-q"},
			[]string{"bench", "-m", "qwen2-0.5b", "--layers", "1", "-p", "8", "-n", "40", "-b", "1,2", "-r", "2", "--warmup", "0", "--backend", "cpu", "-q", "--resume", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(dir, tc.name+".db")
			_, stderr, err := mtl(t, append(tc.args, "--db", db, "--steps", "/dev/full")...)
			if err == nil || !strings.Contains(err.Error(), "step log: ") {
				t.Fatalf("err = %v, want the step log's failure", err)
			}
			if !strings.Contains(stderr, "resume with: mtlbench "+tc.name+" ") || !strings.Contains(stderr, "--resume 1") {
				t.Errorf("stderr does not say how to resume run 1:\n%s", stderr)
			}
			if _, _, err := mtl(t, append(tc.resume, "--db", db)...); err != nil {
				t.Fatalf("resume: %v", err)
			}
			store, err := results.Open(db)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			cases, err := store.Cases(1)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				if c.Status != results.CaseDone || c.RepsDone != 2 {
					t.Errorf("case %s: %s with %d repetitions after the resume, want done with 2", c.Name, c.Status, c.RepsDone)
				}
			}
		})
	}
}

// A run refused before it records (its backend does not open here) leaves
// the --steps file as it found it: an earlier run's log is not emptied,
// and no file is made where none was.
func TestRefusedRunLeavesTheStepLog(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(suite, []byte("name: s\nmodel: { preset: qwen2-0.5b, layers: 1 }\nbackend: metal-emu\nrepetitions: 1\nwarmup: 0\n"+
		"cases:\n  - name: c\n    kind: model\n    params: { prompt_len: 8, gen_len: 2 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MTLBENCH_CLANG", filepath.Join(dir, "no-clang++"))
	const earlier = `{"case":"c","rep":0,"step":0,"kind":"prefill","tokens":8,"seqs":1,"ms":1}` + "\n"
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"run", []string{"run", suite, "-q"}},
		{"bench", []string{"bench", "-m", "qwen2-0.5b", "--layers", "1", "-p", "8", "-n", "2", "-r", "1", "--backend", "metal-emu", "-q"}},
	} {
		for _, there := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/log-there=%v", tc.name, there), func(t *testing.T) {
				steps := filepath.Join(t.TempDir(), "steps.jsonl")
				if there {
					if err := os.WriteFile(steps, []byte(earlier), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				_, _, err := mtl(t, append(tc.args, "--db", filepath.Join(dir, tc.name+".db"), "--steps", steps)...)
				if err == nil || !strings.Contains(err.Error(), "metal-emu") {
					t.Fatalf("err = %v, want the backend's refusal", err)
				}
				got, rerr := os.ReadFile(steps)
				switch {
				case there && string(got) != earlier:
					t.Errorf("the earlier log now holds %q (%v), want it kept", got, rerr)
				case !there && !os.IsNotExist(rerr):
					t.Errorf("a refused run made %s (%v)", steps, rerr)
				}
			})
		}
	}
}

// The resume an interrupted run prints repeats its --steps, and appends to
// the log: it emptied it, so the steps logged before the interruption were
// lost by following the run's own advice. A line cut short (a run stopped
// at once) is dropped, not continued.
func TestResumeAppendsToStepLog(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here to stop a run by its step log")
	}
	for _, tc := range []struct {
		name, earlier, kept string
	}{
		{"whole lines", `{"case":"x","rep":0}` + "\n", `{"case":"x","rep":0}` + "\n"},
		{"a line cut short", `{"case":"x","rep":0}` + "\n" + `{"case":"x","re`, `{"case":"x","rep":0}` + "\n"},
		{"no log yet", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db, steps := filepath.Join(dir, "r.db"), filepath.Join(dir, "steps.jsonl")
			bench := []string{"bench", "-m", "qwen3-moe-mini", "--layers", "1", "-p", "4", "-n", "40", "-r", "2", "--warmup", "0", "--backend", "cpu", "-q", "--db", db}
			// Run 1 stops after its first repetition: its log cannot be written.
			if _, _, err := mtl(t, append(bench, "--steps", "/dev/full")...); err == nil || !strings.Contains(err.Error(), "step log: ") {
				t.Fatalf("err = %v, want the step log's failure", err)
			}
			if tc.earlier != "" {
				if err := os.WriteFile(steps, []byte(tc.earlier), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, stderr, err := mtl(t, append(bench, "--steps", steps, "--resume", "1")...); err != nil {
				t.Fatalf("resume: %v\n%s", err, stderr)
			}
			got, err := os.ReadFile(steps)
			if err != nil {
				t.Fatal(err)
			}
			rest, ok := strings.CutPrefix(string(got), tc.kept)
			if !ok || rest == "" || strings.Contains(rest, `{"case":"x"`) {
				t.Fatalf("the log after the resume:\n%s\nwant it to start with what was there, %q, then the resume's steps, and hold no line cut short", got, tc.kept)
			}
			for _, l := range strings.Split(strings.TrimSuffix(rest, "\n"), "\n") {
				if !json.Valid([]byte(l)) || !strings.Contains(l, `"rep":1`) {
					t.Errorf("resume logged %q, want the steps of repetition 1, the one left", l)
				}
			}
		})
	}
}
