package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/results"
)

// badInputs writes one file of each kind a user may name by mistake where
// another is wanted: a results database, a suite, an empty file, a folder
// of neither, and copies of a safetensors file and of a GGUF file that
// carries no tokenizer.
func badInputs(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	p := map[string]string{
		"db":     filepath.Join(dir, "results.db"),
		"suite":  filepath.Join(dir, "mine.yaml"),
		"empty":  filepath.Join(dir, "empty"),
		"folder": filepath.Join(dir, "folder"),
		"st":     filepath.Join(dir, "model.safetensors"),
		"gguf":   filepath.Join(dir, "notok.gguf"),
		"none":   filepath.Join(dir, "nope.json"),
		"gz":     filepath.Join(dir, "runs.jsonl.gz"),
	}
	store, err := results.OpenToWrite(p["db"])
	if err != nil {
		t.Fatal(err)
	}
	store.Close()
	write := func(path string, data []byte) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(p["suite"], []byte("name: s\nmodel: {preset: qwen3-moe-mini}\ncases:\n  - name: c\n"))
	write(p["empty"], nil)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("{\"format\":\"mtlbench-run/2\"}\n"))
	zw.Close()
	write(p["gz"], gz.Bytes())
	if err := os.Mkdir(p["folder"], 0o755); err != nil {
		t.Fatal(err)
	}
	for key, from := range map[string]string{
		"st":   filepath.Join("..", "..", "runner", "testdata", "hf", "qwen3", "model.safetensors"),
		"gguf": filepath.Join("..", "..", "runner", "testdata", "gguf", "mixtral-f32.gguf"),
	} {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		write(p[key], data)
	}
	return p
}

// A file of another kind given to --tokenizer is named for what it is,
// with what --tokenizer takes, an input error (exit 2): never as JSON that
// does not parse.
func TestTokenizerOfAnotherKind(t *testing.T) {
	in := badInputs(t)
	const takes = "; --tokenizer takes a tokenizer.json or tekken.json, a folder holding one, or a .gguf file carrying one"
	for _, tc := range []struct {
		name, file, want string
	}{
		{"suite", "suite", in["suite"] + ": a suite, not a tokenizer" + takes},
		{"results database", "db", in["db"] + ": an SQLite database, not a tokenizer" + takes},
		{"safetensors", "st", in["st"] + ": a safetensors weights file, not a tokenizer" + takes},
		{"gguf without a tokenizer", "gguf", in["gguf"] + " (a GGUF model file): the file carries no tokenizer (no tokenizer.ggml.model)" + takes},
		{"empty file", "empty", in["empty"] + ": an empty file, not a tokenizer" + takes},
		{"folder without one", "folder", in["folder"] + ": no tokenizer (the folder holds no tokenizer.json or tekken.json)" + takes},
		{"missing", "none", in["none"] + ": no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := mtl(t, "generate", "--model", "qwen3-moe-mini", "--layers", "1", "--backend", "cpu",
				"--prompt", "hi", "--tokenizer", in[tc.file])
			if err == nil || err.Error() != "--tokenizer: "+tc.want {
				t.Fatalf("err = %v\nwant --tokenizer: %s", err, tc.want)
			}
			if code := exitCode(err); code != 2 {
				t.Errorf("exit %d, want 2 (an input error)", code)
			}
		})
	}
}

// suites validate says of each file what run says of it, and counts the
// files by why they failed: one not there or of another kind is not an
// invalid suite, and exits 2 as run does.
func TestSuitesValidateOfBadInput(t *testing.T) {
	in := badInputs(t)
	invalid := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(invalid, []byte("name: s\ncases: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	for _, tc := range []struct {
		name    string
		files   []string
		summary string
		code    int
	}{
		{"missing", []string{missing}, "1 of 1 suite not found", 2},
		{"folder", []string{in["folder"]}, "1 of 1 suite not a suite file", 2},
		{"results database", []string{in["db"]}, "1 of 1 suite not a suite file", 2},
		{"gguf", []string{in["gguf"]}, "1 of 1 suite not a suite file", 2},
		{"empty", []string{in["empty"]}, "1 of 1 suite invalid", 1},
		{"invalid", []string{invalid}, "1 of 1 suite invalid", 1},
		{"mixed", []string{in["suite"], invalid, missing, in["db"]}, "3 of 4 suites failed: 1 invalid, 1 not found, 1 not a suite file", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := mtl(t, append([]string{"suites", "validate"}, tc.files...)...)
			if err == nil || err.Error() != tc.summary {
				t.Fatalf("err = %v, want %q", err, tc.summary)
			}
			if code := exitCode(err); code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			// Each file's line is the error run gives for it.
			for _, f := range tc.files {
				if f == in["suite"] {
					continue
				}
				_, _, rerr := mtl(t, "run", f, "--backend", "cpu", "--db", filepath.Join(t.TempDir(), "r.db"))
				if rerr == nil || !strings.Contains(stderr, rerr.Error()+"\n") {
					t.Errorf("run %s: %v\nnot among validate's lines:\n%s", f, rerr, stderr)
				}
			}
		})
	}
}

// A results database or a model's file given to a command that imports a
// file is named for what it is, with the commands that read it, an input
// error (exit 2), whatever the command: not parsed as what it reads; an
// empty path is said to be one.
func TestImportOfAnotherKind(t *testing.T) {
	in := badInputs(t)
	dbHint := func(p string) string {
		return "(mtlbench keeps its results in one: list its runs with `mtlbench runs --db " + p + "`"
	}
	ggufHint := "(benchmark it with `mtlbench bench -m " + in["gguf"] + "`"
	stHint := "(a checkpoint is the folder that holds it and its config.json, which " + filepath.Dir(in["st"]) + " lacks)"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"peer import db", []string{"peer", "import", in["db"]}, in["db"] + ": an SQLite database, not a peer's results " + dbHint(in["db"])},
		{"peer import gguf", []string{"peer", "import", in["gguf"]}, in["gguf"] + ": a GGUF model file, not a peer's results " + ggufHint},
		{"peer import safetensors", []string{"peer", "import", in["st"]}, in["st"] + ": a safetensors weights file, not a peer's results " + stHint},
		{"tune import db", []string{"tune", "import", in["db"], "--dir", t.TempDir()}, in["db"] + ": an SQLite database, not a tuned-config file " + dbHint(in["db"])},
		{"tune import gguf", []string{"tune", "import", in["gguf"], "--dir", t.TempDir()}, in["gguf"] + ": a GGUF model file, not a tuned-config file " + ggufHint},
		{"history import gguf", []string{"history", "import", in["gguf"], "--model", "m", "--dry-run"}, in["gguf"] + ": a GGUF model file, not a history page " + ggufHint},
		{"history import safetensors", []string{"history", "import", in["st"], "--model", "m", "--dry-run"}, in["st"] + ": a safetensors weights file, not a history page " + stHint},
		{"import gguf", []string{"import", in["gguf"]}, in["gguf"] + ": a GGUF model file, not an export file " + ggufHint},
		{"import safetensors", []string{"import", in["st"]}, in["st"] + ": a safetensors weights file, not an export file " + stHint},
		// The store's own advice stands: export it first.
		{"import db", []string{"import", in["db"]}, in["db"] + " is an SQLite database (a results store?), not an export: import its runs from `mtlbench export --db " + in["db"]},
		// An empty argument (a shell variable left unset) says so.
		{"import empty path", []string{"import", ""}, "an empty path given for an export file (name a file, or - for standard input)"},
		{"peer import empty path", []string{"peer", "import", ""}, "an empty path given for a peer's results (name a file, or - for standard input)"},
		{"tune import empty path", []string{"tune", "import", ""}, "an empty path given for a tuned-config file (name a file, or - for standard input)"},
		// Piped in, the kind is named as of a file, without the commands
		// that would need its path.
		{"peer import - gguf", []string{"peer", "import", "-", "<" + in["gguf"]}, "standard input: a GGUF model file, not a peer's results"},
		{"tune import - db", []string{"tune", "import", "-", "--dir", t.TempDir(), "<" + in["db"]}, "standard input: an SQLite database, not a tuned-config file"},
		{"history import - safetensors", []string{"history", "import", "-", "--model", "m", "--source", "s", "--dry-run", "<" + in["st"]}, "standard input: a safetensors weights file, not a history page"},
		{"import - gguf", []string{"import", "-", "<" + in["gguf"]}, "standard input: a GGUF model file, not an export file"},
		// A compressed file (an export sent as runs.jsonl.gz) is named by
		// its compression, with the command that decompresses it.
		{"import gzip", []string{"import", in["gz"]}, in["gz"] + ": gzip-compressed, not an export file (decompress it first: gunzip -k " + in["gz"] + ")"},
		{"import - gzip", []string{"import", "-", "<" + in["gz"]}, "standard input: gzip-compressed, not an export file (decompress it on its way in: gunzip -c)"},
		{"peer import gzip", []string{"peer", "import", in["gz"]}, in["gz"] + ": gzip-compressed, not a peer's results (decompress it first: gunzip -k "},
		{"tune import gzip", []string{"tune", "import", in["gz"], "--dir", t.TempDir()}, in["gz"] + ": gzip-compressed, not a tuned-config file"},
		{"history import - gzip", []string{"history", "import", "-", "--model", "m", "--source", "s", "--dry-run", "<" + in["gz"]}, "standard input: gzip-compressed, not a history page"},
		{"run gzip", []string{"run", in["gz"], "--backend", "cpu"}, in["gz"] + ": gzip-compressed, not a suite (decompress it first: gunzip -k "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Those that store runs are given a store, which they must not make.
			db, args := filepath.Join(t.TempDir(), "r.db"), tc.args
			if args[0] == "import" || args[0] == "peer" {
				args = append(args, "--db", db)
			}
			// An argument "<FILE" is standard input.
			var stdin io.Reader = noInput{}
			for i, a := range args {
				if strings.HasPrefix(a, "<") {
					data, err := os.ReadFile(a[1:])
					if err != nil {
						t.Fatal(err)
					}
					stdin, args = bytes.NewReader(data), append(args[:i:i], args[i+1:]...)
					break
				}
			}
			err := run(append([]string{"mtlbench"}, args...), stdin, io.Discard, io.Discard)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant it to begin %s", err, tc.want)
			}
			if code := exitCode(err); code != 2 {
				t.Errorf("exit %d, want 2 (an input error)", code)
			}
			if _, serr := os.Stat(db); serr == nil {
				t.Errorf("a refused import made the store %s", db)
			}
		})
	}
}

// An output named where a results database or a model's file is (--out,
// --summary, --steps) is refused before any work, naming what is there,
// and the file is left as it was: the text written would destroy it.
func TestOutputOverAnotherKind(t *testing.T) {
	in := badInputs(t)
	store := filepath.Join(t.TempDir(), "r.db")
	llama := filepath.Join("..", "..", "reports", "peers", "testdata", "llama-bench.json")
	if _, _, err := mtl(t, "peer", "import", llama, "--db", store, "--model", "qwen3-moe-mini"); err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(t.TempDir(), "page.md")
	if err := os.WriteFile(md, []byte("| Date | Batch | Decode tok/s |\n| --- | --- | --- |\n| 2025-01-02 | 1 | 50 |\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		file string // what the output names
		want string
	}{
		{"export over a database", []string{"export", "--db", store, "-o", in["db"]}, in["db"], "--out " + in["db"] + ": an SQLite database, which writing there would destroy: name another file"},
		{"export over safetensors", []string{"export", "--db", store, "-o", in["st"]}, in["st"], "--out " + in["st"] + ": a safetensors weights file, which writing there would destroy"},
		{"gate summary over a database", []string{"gate", "--db", store, "--baseline", "1", "--candidate", "1", "--summary", in["db"]}, in["db"], "--summary " + in["db"] + ": an SQLite database, which writing there would destroy"},
		{"bench steps over gguf", []string{"bench", "-m", "qwen3-moe-mini", "--layers", "1", "-p", "4", "-n", "2", "-r", "1", "--backend", "cpu", "-q", "--db", filepath.Join(t.TempDir(), "s.db"), "--steps", in["gguf"]}, in["gguf"], "--steps " + in["gguf"] + ": a GGUF model file, which writing there would destroy"},
		{"history out over a database", []string{"history", "import", md, "--model", "m", "--out", in["db"]}, in["db"], "--out " + in["db"] + ": an SQLite database, which writing there would destroy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = mtl(t, tc.args...)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant it to begin %s", err, tc.want)
			}
			if code := exitCode(err); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if after, err := os.ReadFile(tc.file); err != nil || string(after) != string(before) {
				t.Errorf("%s changed (%v)", tc.file, err)
			}
		})
	}
}

// Every command's unknown --format names the flag, the value, the near
// miss where there is one, and the formats that command takes.
func TestUnknownFormatFlag(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	const tables = "(want one of: table, md, csv, json, jsonl)"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"env", "--format", "yaml"}, `--format: unknown output format "yaml" ` + tables},
		{[]string{"devices", "--format", "jsn"}, `--format: unknown output format "jsn" ` + tables + ` (did you mean "json"?)`},
		{[]string{"models", "--format", "csvv"}, `--format: unknown output format "csvv" ` + tables + ` (did you mean "csv"?)`},
		{[]string{"suites", "list", "--format", "xml"}, `--format: unknown output format "xml" ` + tables},
		{[]string{"runs", "--format", "benchfmt", "--db", db}, `--format: unknown output format "benchfmt" ` + tables + `; benchfmt is for the commands that print samples: show, run and bench`},
		{[]string{"show", "1", "--format", "benchfnt", "--db", db}, `--format: unknown output format "benchfnt" (want one of: table, md, csv, json, jsonl, benchfmt) (did you mean "benchfmt"?)`},
	} {
		_, _, err := mtl(t, tc.args...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v\nwant %s", tc.args, err, tc.want)
		}
		if code := exitCode(err); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
	}
}

// tune's --shape errors name the flag and its value once, and a mistyped
// --kernel says which kernel was meant.
func TestTuneKernelAndShapeFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kernel", "matmull", "--shape", "m=1,n=64,k=64"}, `--kernel "matmull": kernel "matmull" has no tunables on the cpu backend (tunable: matmul, moe; did you mean "matmul"?)`},
		{[]string{"--kernel", "matmul,moee", "--shape", "m=1,n=64,k=64"}, `--kernel "matmul,moee": kernel "moee" has no tunables on the cpu backend (tunable: matmul, moe; did you mean "moe"?)`},
		{[]string{"../../suites/ci.yaml", "--kernel", "moee"}, `--kernel "moee": kernel "moee" has no tunables on the cpu backend (tunable: matmul, moe; did you mean "moe"?)`},
		{[]string{"--kernel", "matmul", "--shape", "m=0,n=64,k=64"}, `--shape "m=0,n=64,k=64": m=0 is not a positive integer`},
		{[]string{"--kernel", "matmul", "--shape", "m=-1,n=64,k=64"}, `--shape "m=-1,n=64,k=64": m=-1 is not a positive integer`},
		// An empty item is said as every list of the command line says it
		// (internal/listarg), where --shape said it in words of its own.
		{[]string{"--kernel", "matmul", "--shape", "m=1,,n=64"}, `--shape "m=1,,n=64": item 2 of 3 is empty (a comma or semicolon too many, or a variable left unset?)`},
		{[]string{"--kernel", "matmul", "--shape", "m=1;n=64;"}, `--shape "m=1;n=64;": item 3 of 3 is empty (a comma or semicolon too many, or a variable left unset?)`},
		{[]string{"--kernel", "matmul", "--shape", " "}, `--shape " ": item 1 of 1 is empty (a comma or semicolon too many, or a variable left unset?)`},
		{[]string{"--kernel", "matmul", "--shape", "m=1,m=2"}, `--shape "m=1,m=2": m is given twice`},
		{[]string{"--kernel", "matmul", "--shape", "m"}, `--shape "m": want name=value pairs, got "m"`},
	} {
		_, _, err := mtl(t, append([]string{"tune", "--backend", "cpu", "--dry-run"}, tc.args...)...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v\nwant %s", tc.args, err, tc.want)
		}
		if code := exitCode(err); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
	}
}

// A flag of named values refuses another the one way, whatever the
// command: the flag, the value, the values it takes and a near miss's.
func TestEnumFlagTypos(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	gen := []string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "--backend", "cpu", "--layers", "1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(gen, "--moe-strategy", "grouppd"), `--moe-strategy "grouppd": want loop, chunked or grouped (did you mean "grouped"?)`},
		{append(gen, "--fusion", "offf"), `--fusion "offf": want on or off (did you mean "off"?)`},
		{append(gen, "--against", "cpu", "--against-fusion", "maybe"), `--against-fusion "maybe": want on or off`},
		{append(gen, "--against", "metl"), `--against "metl": want auto, cpu, metal, metal-emu or cuda (did you mean "metal"?)`},
		{append(gen, "--sampling", "gredy"), `--sampling: sampling "gredy": "gredy" is not key:value`},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--strategy", "exhaustve", "--dry-run"}, `--strategy "exhaustve": want exhaustive, random or local (did you mean "exhaustive"?)`},
		{[]string{"runs", "--db", db, "--kind", "sute"}, `--kind "sute": want suite, tune or peer (did you mean "suite"?)`},
	} {
		_, _, err := mtl(t, tc.args...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v\nwant %s", tc.args, err, tc.want)
		}
		if code := exitCode(err); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
	}
}

// A --resume of 0 or less names no run: refused before any work, where 0,
// the flag's default, would have started a new run instead.
func TestResumeOfNoRun(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "ci", "--backend", "cpu", "--resume", "-1"}, "--resume -1: want the id of the run to finish (mtlbench runs lists them)"},
		{[]string{"run", "ci", "--backend", "cpu", "--resume", "0"}, "--resume 0: want the id of the run to finish (mtlbench runs lists them)"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--backend", "cpu", "--resume", "0"}, "--resume 0: want the id of the run to finish (mtlbench runs lists them)"},
	} {
		stdout, stderr, err := mtl(t, append(tc.args, "--db", db)...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v\nwant %s", tc.args, err, tc.want)
		}
		if code := exitCode(err); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if stdout != "" || stderr != "" {
			t.Errorf("%v: work began before the refusal:\n%s%s", tc.args, stdout, stderr)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("a refused resume made the store %s", db)
	}
}
