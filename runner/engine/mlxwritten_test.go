package engine_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/engine/enginetest"
	"github.com/mtlbench/mtlbench/runner/model"
)

// mlx's save_safetensors pads no header, so an mlx-lm folder's tensors sit
// at any byte, most often not even at a multiple of their element size:
// every mlx fixture laid out so (its data at an odd offset) gives
// transformers' logits on the CPU, which reads them in place.
func TestMLXWrittenMatchesTransformers(t *testing.T) {
	dirs, err := filepath.Glob("../testdata/mlx/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no mlx fixtures (%v)", err)
	}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "reference.json")); err != nil {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cfg, src, err := model.Open(model.Spec{Model: enginetest.MLXWritten(t, dir)})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			e, err := engine.New(cpu.New(cpu.Options{}), cfg, src, engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			enginetest.MatchesReference(t, e, enginetest.ReadReference(t, filepath.Join(dir, "reference.json")), 0, 1e-3)
		})
	}
}
