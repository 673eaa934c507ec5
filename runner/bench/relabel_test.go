package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mtlbench/mtlbench/suites"
)

// A case's label says what ran: an override joins the name when the name
// carries none, and one that changes a value the name carries is said
// after it, the name keeping its own value, so two cases of a swept
// parameter keep two labels.
func TestRelabel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		set    map[string]string
		params map[string]string
		want   string
	}{
		{"moe-chunk/moe_chunk=64", map[string]string{"moe_chunk": "1"}, map[string]string{"moe_chunk": "1", "batch": "4"}, "moe-chunk/moe_chunk=64 (--set moe_chunk=1)"},
		{"moe-chunk/moe_chunk=1", map[string]string{"moe_chunk": "1"}, map[string]string{"moe_chunk": "1", "batch": "4"}, "moe-chunk/moe_chunk=1"},
		// as typed on the command line, read as the name spells it
		{"moe-chunk/moe_chunk=16", map[string]string{"moe_chunk": "0x10"}, map[string]string{"moe_chunk": "16"}, "moe-chunk/moe_chunk=16"},
		{"decode/batch=4", map[string]string{"moe_chunk": "1"}, map[string]string{"moe_chunk": "1", "batch": "4"}, "decode/batch=4/moe_chunk=1"},
		{"matmul/m=8", map[string]string{"moe_chunk": "1"}, map[string]string{"m": "8"}, "matmul/m=8"},
		{"decode/batch=4", map[string]string{"fusion": "off", "batch": "2"}, map[string]string{"fusion": "off", "batch": "2"}, "decode/batch=4/fusion=off (--set batch=2)"},
		{"grid/batch=4/prompt_len=8", map[string]string{"prompt_len": "16", "batch": "2"}, map[string]string{"prompt_len": "16", "batch": "2"}, "grid/batch=4/prompt_len=8 (--set batch=2 --set prompt_len=16)"},
		{"decode", nil, map[string]string{"batch": "1"}, "decode"},
	} {
		if got := relabel(tc.name, tc.set, tc.params); got != tc.want {
			t.Errorf("relabel(%q, %v) = %q, want %q", tc.name, tc.set, got, tc.want)
		}
	}
}

// A run records its suite file's absolute path, and a name for a suite no
// file holds (bench's flags, a built-in), whatever file shares the name.
func TestRecordedPath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	yaml := []byte("name: x\nmodel: {preset: qwen3-moe-mini}\ncases:\n  - {name: d, kind: model}\n")
	os.WriteFile("x.yaml", yaml, 0o644)
	s, err := suites.Load("x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := recordedPath(s); got != filepath.Join(dir, "x.yaml") {
		t.Errorf("a suite file: %q", got)
	}
	flags, err := suites.Parse("bench", yaml) // as bench parses the suite its flags make
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile("bench", []byte("name: other\n"), 0o644)
	if got := recordedPath(flags); got != "bench" {
		t.Errorf("bench's suite beside a file named bench: %q", got)
	}
	shipped, err := suites.Resolve("ci")
	if err != nil {
		t.Fatal(err)
	}
	if got := recordedPath(shipped); got != "shipped:ci.yaml" {
		t.Errorf("a built-in suite: %q", got)
	}
}
