package safetensors

import (
	"os"
	"path/filepath"
	"testing"
)

// model.safetensors.index.json is read as transformers reads it, through
// Python's json: a key given twice keeps its last value whole, so a
// weight_map given again replaces the first rather than adding to it.
func TestIndexKeyGivenTwice(t *testing.T) {
	ts := sampleTensors()
	for _, c := range []struct{ name, index string }{
		{"object", `{"weight_map": {"` + ts[0].Name + `": "gone.safetensors", "` + ts[1].Name + `": "s1.safetensors"},
			"weight_map": {"` + ts[1].Name + `": "s1.safetensors"}}`},
		{"scalar", `{"weight_map": {"` + ts[1].Name + `": "gone.safetensors", "` + ts[1].Name + `": "s1.safetensors"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := Write(filepath.Join(dir, "s1.safetensors"), ts[1:2], nil); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, IndexName), []byte(c.index), 0o644); err != nil {
				t.Fatal(err)
			}
			ck, err := OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			if names := ck.Names(); len(names) != 1 || names[0] != ts[1].Name {
				t.Errorf("tensors %v, want %s alone", names, ts[1].Name)
			}
		})
	}
}
