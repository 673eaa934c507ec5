package model

import (
	"os"
	"path/filepath"
	"testing"
)

// A checkpoint folder opens as one whatever its name ends in: a folder
// named like a GGUF file is not read as one; a GGUF file opens whatever its
// name, as before.
func TestFolderNamedGGUF(t *testing.T) {
	for _, fx := range []string{"../testdata/hf/llama", "../testdata/mlx/qwen3-q4"} {
		dir := filepath.Join(t.TempDir(), filepath.Base(fx)+".GGUF")
		if err := os.Rename(copyFolder(t, fx, func(_ string, b []byte) []byte { return b }), dir); err != nil {
			t.Fatal(err)
		}
		for _, synthetic := range []bool{false, true} {
			cfg, src, err := Open(Spec{Model: dir, Synthetic: synthetic})
			if err != nil {
				t.Fatalf("%s (synthetic %v): %v", dir, synthetic, err)
			}
			src.Close()
			if cfg.Layers != 2 {
				t.Fatalf("%s: %d layers", dir, cfg.Layers)
			}
		}
	}
	if err := openAll("../testdata/gguf/llama-q8_0.gguf"); err != nil {
		t.Fatal(err)
	}
}
