package metal_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/engine/enginetest"
	"github.com/mtlbench/mtlbench/runner/gguf"
	"github.com/mtlbench/mtlbench/runner/model"
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

// A GGUF file's experts lie in place for the kernels: float experts as
// the file's three stacked tensors (ffn_gate_exps, ffn_up_exps,
// ffn_down_exps, side by side in the file: layoutOf), and GGUF's older
// one-tensor-an-expert files stacked when each tensor's size is a multiple
// of the alignment, as the fixture's and Mixtral's are. Both are read in
// place and nothing is copied or handed back (TestFloatExpertsInPlace and
// TestStackedExpertsAliased hand back what they gather).
func TestGGUFExpertsInPlace(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	for _, c := range []struct {
		fx       string
		gathered bool
	}{{"mixtral-f32", false}, {"mixtral-split-q4_0", false}} {
		t.Run(c.fx, func(t *testing.T) {
			path := filepath.Join("../../runner/testdata/gguf", c.fx+".gguf")
			cfg, g, err := model.OpenGGUF(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			src, dropped := enginetest.CountDrops(t, g)
			e, err := engine.New(be, cfg, src, engine.Options{KVTokens: 256, KVDType: "f32"})
			if err != nil {
				t.Fatal(err)
			}
			enginetest.MatchesReference(t, e, enginetest.ReadReference(t, filepath.Join("../../runner/testdata/gguf", c.fx+".json")), 1, 1e-3)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var experts, want int64
			for _, ti := range f.Tensors {
				if n := ti.Name; strings.Contains(n, ".ffn_") && !strings.Contains(n, "ffn_gate_inp") && !strings.Contains(n, "ffn_norm") {
					experts += int64(ti.Size)
				}
			}
			if c.gathered {
				want = experts
			}
			t.Logf("%d bytes handed back of the experts' %d", dropped(), experts)
			if experts == 0 || dropped() != want {
				t.Errorf("%d bytes handed back, want %d (the experts': %d)", dropped(), want, experts)
			}
		})
	}
}
