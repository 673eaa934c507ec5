package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An export line that gives a key twice (an edit: mtlbench writes each
// once) is refused, naming the file, line, key and both places, and
// nothing is stored: encoding/json took the last value without a word (a
// run's tag, a sample's value) and merged an object given twice.
func TestImportRefusesAKeyGivenTwice(t *testing.T) {
	line := exportLineWith("0.5")
	for _, tc := range []struct {
		name, data, want string
	}{
		{"a run's tag", strings.Replace(line, `"suite_name":"s",`, `"suite_name":"s","tag":"a","tag":"b",`, 1),
			`b.jsonl:1: key "tag" is given twice in run (`},
		{"a sample's value", strings.Replace(line, `"value":50,`, `"value":50,"value":5000,`, 1),
			`b.jsonl:1: key "value" is given twice in cases[0].samples[0] (`},
		{"the run, as two objects", strings.Replace(line, `"cases":`, `"run":{"tag":"x"},"cases":`, 1),
			`b.jsonl:1: key "run" is given twice in the top level (`},
		{"each key once", line, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			want := tc.want
			if want != "" {
				want = dir + string(filepath.Separator) + want
			}
			db := importExpecting(t, dir, "b.jsonl", tc.data+"\n", want)
			if _, err := os.Stat(db); tc.want != "" && err == nil {
				t.Error("a refused import made the store")
			}
		})
	}
}
