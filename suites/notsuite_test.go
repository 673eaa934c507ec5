package suites

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/internal/readfile/kindtest"
)

// A results database, a GGUF file, a safetensors file or a checkpoint
// folder given as a suite is named for what it is and for the commands that
// read it, read whole or too large to be; a suite that begins like one is
// still read as a suite, and another folder is only not one.
func TestNotASuite(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string { return kindtest.Write(t, dir, name, data) }
	sqlite := kindtest.Bytes(readfile.SQLite)
	gguf := kindtest.Bytes(readfile.GGUF)
	safetensors := kindtest.Bytes(readfile.Safetensors)

	db := write("results.db", sqlite)
	spaced := write("my runs.db", sqlite)
	model := write("qwen.gguf", gguf)
	st := write("ckpt/model.safetensors", safetensors)
	ckpt := filepath.Dir(write("ckpt/config.json", []byte(`{"model_type": "qwen3"}`)))
	loose := write("loose/model.safetensors", safetensors)
	// Past a suite's bound, as real models are: told by their first bytes.
	big := write("big.gguf", gguf)
	if err := os.Truncate(big, readfile.Suite+1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"results database", db, db + ": an SQLite database, not a suite (mtlbench keeps its results in one: list its runs with `mtlbench runs --db " + db + "`, or report them with `mtlbench report --db " + db + "`)"},
		{"quoted path", spaced, "`mtlbench runs --db '" + spaced + "'`"},
		{"gguf", model, model + ": a GGUF model file, not a suite (benchmark it with `mtlbench bench -m " + model + "`, run it with `mtlbench generate --model " + model + "`, or name it in a suite's model: {path: ...})"},
		{"gguf too large to read", big, big + ": a GGUF model file, not a suite (benchmark it with `mtlbench bench -m " + big + "`"},
		{"checkpoint folder", ckpt, ckpt + ": a checkpoint folder (it holds config.json), not a suite (benchmark it with `mtlbench bench -m " + ckpt + "`, run it with `mtlbench generate --model " + ckpt + "`, or name it in a suite's model: {path: ...})"},
		// No command runs a folder without config.json: what it lacks is said.
		{"safetensors outside a checkpoint", loose, loose + ": a safetensors weights file, not a suite (a checkpoint is the folder that holds it and its config.json, which " + filepath.Dir(loose) + " lacks)"},
		{"safetensors", st, st + ": a safetensors weights file, not a suite (a checkpoint is the folder that holds it and its config.json: benchmark it with `mtlbench bench -m " + filepath.Dir(st) + "`"},
	} {
		for _, read := range []struct {
			name string
			f    func(string) error
		}{
			{"Resolve", func(p string) error { _, err := Resolve(p); return err }},
			{"Load", func(p string) error { _, err := Load(p); return err }},
		} {
			err := read.f(tc.path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %s: %v\nwant it to hold %q", tc.name, read.name, err, tc.want)
				continue
			}
			if !errors.Is(err, readfile.ErrNotAFile) {
				t.Errorf("%s: %s: %v is not an input error (readfile.ErrNotAFile)", tc.name, read.name, err)
			}
		}
	}

	// A file named without its folder is said to lie in the current one.
	t.Chdir(filepath.Dir(loose))
	if _, err := Load(filepath.Base(loose)); err == nil || !strings.HasSuffix(err.Error(), "its config.json, which the current folder lacks)") {
		t.Errorf("safetensors in the current folder: %v", err)
	}

	if _, err := Load(dir); err == nil || err.Error() != dir+": a folder, not a suite" {
		t.Errorf("a folder that is no checkpoint: %v", err)
	}

	// Suites whose first bytes look like a format's are suites.
	for _, tc := range []struct {
		file, src, wantErr string
	}{
		{"params-first.yaml", "params: {batch: 1}\nname: s\nmodel: {preset: p}\ncases:\n  - name: c\n", ""},
		{"comment.yaml", "# SQLite format 3 holds the results\nname: s\nmodel: {preset: p}\ncases:\n  - name: c\n", ""},
		{"gguf-key.yaml", "GGUF: 1\nname: s\nmodel: {preset: p}\ncases:\n  - name: c\n", `gguf-key.yaml:1:1: unknown key "GGUF"`},
	} {
		_, err := Resolve(write(tc.file, []byte(tc.src)))
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.file, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: %v, want %q", tc.file, err, tc.wantErr)
		}
	}
}
