package metal_test

import (
	"path/filepath"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/engine/enginetest"
)

// An mlx-lm folder as mlx's save_safetensors writes it has no header
// padding, so its tensors may sit at any byte: the kernels' 16-byte loads
// cannot read them in place and the backend copies them, handing each
// copied tensor's file bytes back (bridge.CopyDropper) so the weights are
// resident once; the logits stay transformers' (within 1e-3).
func TestMLXWrittenCopiedOnce(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	for _, fx := range []string{"llama-q4", "qwen3_moe-q4"} {
		t.Run(fx, func(t *testing.T) {
			enginetest.CopiedOnce(t, be, filepath.Join("../../runner/testdata/mlx", fx), engine.Options{KVTokens: 256, KVDType: "f32"}, 1e-3)
		})
	}
}
