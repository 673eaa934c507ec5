package tokenizer

import (
	"errors"
	"testing"

	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/internal/readfile/kindtest"
)

// Load names a file of another kind for what it is, an input error, before
// or instead of parsing it as JSON; a malformed tokenizer.json is still
// one that does not parse.
func TestLoadFileOfAnotherKind(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string { return kindtest.Write(t, dir, name, data) }
	db := write("results.db", kindtest.Bytes(readfile.SQLite))
	st := write("model.safetensors", kindtest.Bytes(readfile.Safetensors))
	beside := write("ckpt/model.safetensors", kindtest.Bytes(readfile.Safetensors))
	tok := write("ckpt/tokenizer.json", []byte(`{"model": `))
	suite := write("mine.yaml", []byte("name: s\nmodel: {preset: p}\ncases:\n  - name: c\n"))
	empty := write("empty.json", []byte("\n"))
	for _, tc := range []struct {
		name, path, want string
		kind             bool // an input error: readfile.ErrNotAFile
	}{
		{"results database", db, db + ": an SQLite database, not a tokenizer", true},
		{"safetensors", st, st + ": a safetensors weights file, not a tokenizer", true},
		{"safetensors beside a tokenizer", beside, beside + ": a safetensors weights file, not a tokenizer (the tokenizer beside it is " + tok + ")", true},
		{"suite", suite, suite + ": a suite, not a tokenizer", true},
		{"empty", empty, empty + ": an empty file, not a tokenizer", true},
		{"folder of none", dir, dir + ": no tokenizer (the folder holds no tokenizer.json or tekken.json)", false},
		{"malformed tokenizer.json", tok, tok + ": not a tokenizer.json: not valid JSON: the text ends inside a value: cut short", false},
	} {
		_, err := Load(tc.path)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.want)
			continue
		}
		if errors.Is(err, readfile.ErrNotAFile) != tc.kind {
			t.Errorf("%s: %v: an input error (readfile.ErrNotAFile) %v, want %v", tc.name, err, !tc.kind, tc.kind)
		}
	}
}
