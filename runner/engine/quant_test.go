package engine

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/runner/model"
)

// Quantized checkpoints in the layouts mlx-lm and llama.cpp write, with the
// logits transformers computed on their dequantized weights
// (tools/fixtures/make_quant_fixtures.py).
var quantFixtures = []struct{ path, ref string }{
	{"../testdata/mlx/llama-q4", "../testdata/mlx/llama-q4/reference.json"},
	{"../testdata/mlx/llama-q8", "../testdata/mlx/llama-q8/reference.json"},
	{"../testdata/mlx/qwen3-q4", "../testdata/mlx/qwen3-q4/reference.json"},
	{"../testdata/mlx/qwen3-q8", "../testdata/mlx/qwen3-q8/reference.json"},
	{"../testdata/mlx/qwen3_moe-q4", "../testdata/mlx/qwen3_moe-q4/reference.json"},
	{"../testdata/mlx/qwen3_moe-q8", "../testdata/mlx/qwen3_moe-q8/reference.json"},
	// Qwen2 shaped as Qwen2-0.5B is: q, k and v biases in floats beside
	// packed weights, seven query heads over one KV head, rows of 14 and
	// 20 units, the packed embedding as the LM head.
	{"../testdata/mlx/qwen2-q4", "../testdata/mlx/qwen2-q4/reference.json"},
	{"../testdata/mlx/qwen2-q8", "../testdata/mlx/qwen2-q8/reference.json"},
	// Mistral shaped as Devstral-Small is: heads of 128 that do not make up
	// the hidden size, four query heads over one KV head, RoPE base 1e9.
	{"../testdata/mlx/mistral-q4", "../testdata/mlx/mistral-q4/reference.json"},
	{"../testdata/mlx/mistral-q8", "../testdata/mlx/mistral-q8/reference.json"},
	// mlx's "mxfp4" mode (transcoded, kernels/quant/mlxfp.go); Qwen3-MoE's
	// router an affine 8-bit override that names no mode.
	{"../testdata/mlx/llama-mxfp4", "../testdata/mlx/llama-mxfp4/reference.json"},
	{"../testdata/mlx/qwen3-mxfp4", "../testdata/mlx/qwen3-mxfp4/reference.json"},
	{"../testdata/mlx/qwen3_moe-mxfp4", "../testdata/mlx/qwen3_moe-mxfp4/reference.json"},
	// mlx's "nvfp4" and "mxfp8" modes (laid out in blocks, kernels on
	// every backend: NVFP4, MXFP8).
	{"../testdata/mlx/llama-nvfp4", "../testdata/mlx/llama-nvfp4/reference.json"},
	{"../testdata/mlx/qwen3-nvfp4", "../testdata/mlx/qwen3-nvfp4/reference.json"},
	{"../testdata/mlx/qwen3_moe-nvfp4", "../testdata/mlx/qwen3_moe-nvfp4/reference.json"},
	{"../testdata/mlx/llama-mxfp8", "../testdata/mlx/llama-mxfp8/reference.json"},
	{"../testdata/mlx/qwen3-mxfp8", "../testdata/mlx/qwen3-mxfp8/reference.json"},
	{"../testdata/mlx/qwen3_moe-mxfp8", "../testdata/mlx/qwen3_moe-mxfp8/reference.json"},
	// GPT-2 as mlx-lm saves it: "model." names, Linear [out, in] weights,
	// wte (the LM head) and wpe (dequantized once: positions are added as
	// floats) at 4 bits.
	{"../testdata/mlx/gpt2-q4", "../testdata/mlx/gpt2-q4/reference.json"},
	{"../testdata/gguf/llama-q8_0.gguf", "../testdata/gguf/llama-q8_0.json"},
	{"../testdata/gguf/llama-q4_0.gguf", "../testdata/gguf/llama-q4_0.json"},
	{"../testdata/gguf/llama-q4_k_m.gguf", "../testdata/gguf/llama-q4_k_m.json"},
	{"../testdata/gguf/qwen3_moe-q8_0.gguf", "../testdata/gguf/qwen3_moe-q8_0.json"},
	{"../testdata/gguf/qwen3_moe-q4_0.gguf", "../testdata/gguf/qwen3_moe-q4_0.json"},
	{"../testdata/gguf/qwen3_moe-q4_k_m.gguf", "../testdata/gguf/qwen3_moe-q4_k_m.json"},
	// Mixtral: mlx-lm's 4-bit layout (block_sparse_moe.switch_mlp, a 4-bit
	// router) and llama.cpp's (llama with stacked experts), f32 weights; and
	// llama.cpp's older layout, each expert's matrices a tensor of its own
	// (Q4_0, the down projections Q8_0).
	{"../testdata/mlx/mixtral-q4", "../testdata/mlx/mixtral-q4/reference.json"},
	{"../testdata/gguf/mixtral-f32.gguf", "../testdata/gguf/mixtral-f32.json"},
	{"../testdata/gguf/mixtral-split-q4_0.gguf", "../testdata/gguf/mixtral-split-q4_0.json"},
	// Types read by transcoding (kernels/quant/ggml.go).
	{"../testdata/gguf/llama-q4_1.gguf", "../testdata/gguf/llama-q4_1.json"},
	{"../testdata/gguf/llama-q5_0.gguf", "../testdata/gguf/llama-q5_0.json"},
	{"../testdata/gguf/llama-q5_1.gguf", "../testdata/gguf/llama-q5_1.json"},
	{"../testdata/gguf/qwen3_moe-q5_k_m.gguf", "../testdata/gguf/qwen3_moe-q5_k_m.json"},
	{"../testdata/gguf/llama-iq4_nl.gguf", "../testdata/gguf/llama-iq4_nl.json"},
	{"../testdata/gguf/qwen3_moe-q3_k_m.gguf", "../testdata/gguf/qwen3_moe-q3_k_m.json"},
	{"../testdata/gguf/qwen3_moe-iq4_xs.gguf", "../testdata/gguf/qwen3_moe-iq4_xs.json"},
	// Files llama.cpp's own tools wrote (tools/fixtures/make_llamacpp_fixtures.py):
	// convert_hf_to_gguf.py's metadata, names and tokenizer, then
	// llama-quantize's type mixes and fallbacks, or the converter's Q8_0.
	{"../testdata/gguf/llamacpp-llama-q4_k_m.gguf", "../testdata/gguf/llamacpp-llama-q4_k_m.json"},
	{"../testdata/gguf/llamacpp-llama-q3_k_m.gguf", "../testdata/gguf/llamacpp-llama-q3_k_m.json"},
	{"../testdata/gguf/llamacpp-qwen2-q4_k_m.gguf", "../testdata/gguf/llamacpp-qwen2-q4_k_m.json"},
	{"../testdata/gguf/llamacpp-qwen3-q8_0.gguf", "../testdata/gguf/llamacpp-qwen3-q8_0.json"},
	{"../testdata/gguf/llamacpp-qwen3_moe-q4_k_m.gguf", "../testdata/gguf/llamacpp-qwen3_moe-q4_k_m.json"},
	{"../testdata/gguf/llamacpp-qwen3_moe-iq4_xs.gguf", "../testdata/gguf/llamacpp-qwen3_moe-iq4_xs.json"},
	{"../testdata/gguf/llamacpp-llama-q2_k.gguf", "../testdata/gguf/llamacpp-llama-q2_k.json"},
	{"../testdata/gguf/llamacpp-qwen3_moe-q2_k.gguf", "../testdata/gguf/llamacpp-qwen3_moe-q2_k.json"},
	{"../testdata/gguf/llamacpp-qwen3_moe-mxfp4_moe.gguf", "../testdata/gguf/llamacpp-qwen3_moe-mxfp4_moe.json"},
	// GPT-2 as the converter writes it (Conv1D weights transposed, c_attn
	// as attn_qkv, learned positions in F32), in its Q8_0 and in
	// llama-quantize's Q4_K_M mix (Q4_K, Q6_K).
	{"../testdata/gguf/llamacpp-gpt2-q8_0.gguf", "../testdata/gguf/llamacpp-gpt2-q8_0.json"},
	{"../testdata/gguf/llamacpp-gpt2-q4_k_m.gguf", "../testdata/gguf/llamacpp-gpt2-q4_k_m.json"},
	// and with an LM head of its own (output.weight), as llama.cpp reads it.
	{"../testdata/gguf/llamacpp-gpt2_untied-q8_0.gguf", "../testdata/gguf/llamacpp-gpt2_untied-q8_0.json"},
	// Heads of 16, 48 and 80 (no Metal kernel of their own: run padded).
	{"../testdata/gguf/llamacpp-qwen3-hd16-q4_k_m.gguf", "../testdata/gguf/llamacpp-qwen3-hd16-q4_k_m.json"},
	{"../testdata/gguf/llamacpp-qwen3_moe-hd80-q8_0.gguf", "../testdata/gguf/llamacpp-qwen3_moe-hd80-q8_0.json"},
	{"../testdata/gguf/llamacpp-llama-hd48-q4_0.gguf", "../testdata/gguf/llamacpp-llama-hd48-q4_0.json"},
	{"../testdata/gguf/llamacpp-gpt2-hd16-q8_0.gguf", "../testdata/gguf/llamacpp-gpt2-hd16-q8_0.json"},
	// Experts packed in part (floats where rows are no whole number of
	// blocks or groups): run in f32 (model.Config.ExpertsInF32).
	{"../testdata/gguf/llamacpp-qwen3_moe-partial-q8_0.gguf", "../testdata/gguf/llamacpp-qwen3_moe-partial-q8_0.json"},
	{"../testdata/mlx/qwen3_moe-q4-partial", "../testdata/mlx/qwen3_moe-q4-partial/reference.json"},
	// The IQ grid formats, each file llama-quantize's mix of it (with a
	// random importance matrix for the 1- and 2-bit ones).
	{"../testdata/gguf/llamacpp-llama-iq2_xxs.gguf", "../testdata/gguf/llamacpp-llama-iq2_xxs.json"},
	{"../testdata/gguf/llamacpp-qwen3_moe-iq2_xs.gguf", "../testdata/gguf/llamacpp-qwen3_moe-iq2_xs.json"},
	{"../testdata/gguf/llamacpp-llama-iq2_m.gguf", "../testdata/gguf/llamacpp-llama-iq2_m.json"},
	{"../testdata/gguf/llamacpp-llama-iq3_m.gguf", "../testdata/gguf/llamacpp-llama-iq3_m.json"},
	{"../testdata/gguf/llamacpp-qwen3_moe-iq1_s.gguf", "../testdata/gguf/llamacpp-qwen3_moe-iq1_s.json"},
	{"../testdata/gguf/llamacpp-llama-iq1_m.gguf", "../testdata/gguf/llamacpp-llama-iq1_m.json"},
	{"../testdata/gguf/llamacpp-qwen3_moe-iq3_xxs.gguf", "../testdata/gguf/llamacpp-qwen3_moe-iq3_xxs.json"},
	// The ternary types, transcoded into Q2_K.
	{"../testdata/gguf/llamacpp-llama-tq1_0.gguf", "../testdata/gguf/llamacpp-llama-tq1_0.json"},
	{"../testdata/gguf/llamacpp-qwen3_moe-tq2_0.gguf", "../testdata/gguf/llamacpp-qwen3_moe-tq2_0.json"},
	// attention_bias: biases on q, k, v and o in floats beside mlx-lm's
	// packed weights, and in GGUF with q's and k's rows permuted as the
	// converter permutes their weights.
	{"../testdata/mlx/llama_bias-q4", "../testdata/mlx/llama_bias-q4/reference.json"},
	{"../testdata/gguf/llama_bias-q8_0.gguf", "../testdata/gguf/llama_bias-q8_0.json"},
	// mlp_bias: biases on gate, up and down beside the packed weights.
	{"../testdata/mlx/llama_mlp_bias-q4", "../testdata/mlx/llama_mlp_bias-q4/reference.json"},
	{"../testdata/gguf/llama_mlp_bias-q8_0.gguf", "../testdata/gguf/llama_mlp_bias-q8_0.json"},
}

// CheckQuantFixtures runs every quantized fixture on be: last-position
// logits within tol of transformers on the dequantized weights, and equal
// greedy tokens.
func checkQuantFixtures(t *testing.T, newBackend func() bridge.Backend, tol float64) {
	for _, fx := range quantFixtures {
		t.Run(strings.TrimSuffix(filepath.Base(fx.path), ".gguf"), func(t *testing.T) {
			var ref reference
			readJSON(t, fx.ref, &ref)
			cfg, src, err := model.Open(model.Spec{Model: fx.path})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if cfg.Quant == nil {
				t.Fatalf("%s opened without packed weights", fx.path)
			}
			if cfg.Architecture != ref.Architecture {
				t.Fatalf("architecture %q, fixture says %q", cfg.Architecture, ref.Architecture)
			}
			e, err := New(newBackend(), cfg, src, Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkAgainstReference(t, e, &ref, tol)
		})
	}
}

// TestQuantMatchesTransformers: MLX 4- and 8-bit (llama, qwen3,
// qwen3_moe; Mixtral at 4), GGUF Q8_0, Q4_0, Q4_K_M (llama, qwen3moe), the
// transcoded Q4_1, Q5_0, Q5_1, IQ4_NL (llama), Q5_K_M, Q3_K_M and IQ4_XS
// (qwen3moe), and Mixtral as llama.cpp writes it, on the CPU, logits
// within 1e-3.
func TestQuantMatchesTransformers(t *testing.T) {
	checkQuantFixtures(t, func() bridge.Backend { return cpu.New(cpu.Options{}) }, 1e-3)
}

// fourEight is the CPU backend as a GPU backend sees packed formats: affine
// at 4 and 8 bits only.
type fourEight struct{ *cpu.Backend }

func (f fourEight) SupportsQuant(s quant.Spec) error {
	if s.Type == quant.Affine && s.Bits != 4 && s.Bits != 8 {
		return fmt.Errorf("affine %d-bit weights are not supported", s.Bits)
	}
	return nil
}

// asStored is the CPU backend running every affine width as stored, with
// no preference for wider ones.
type asStored struct{ *cpu.Backend }

func (asStored) PrefersWider(quant.Spec) bool { return false }

// A backend without a width, or one that runs it faster wider (the CPU's
// 3- and 6-bit dots), runs it widened (RunConfig): counted and loaded at 4
// or 8 bits, the same tokens and logits as the width run as stored; widths
// it has keep their config.
func TestRunConfigWidens(t *testing.T) {
	cfg, src, err := model.Open(model.Spec{Model: "qwen3-moe-mini", Quant: "q4", Layers: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if RunConfig(fourEight{cpu.New(cpu.Options{})}, cfg) != cfg {
		t.Error("a config the backend runs as it is was copied")
	}
	cfg.Quant.Default.Bits = 3 // the source reads the same scheme
	for name, s := range cfg.Quant.Per {
		if s != nil && strings.HasSuffix(name, "mlp.gate.weight") {
			s.Bits = 6
		}
	}
	reqs := []Request{{ID: 1, Prompt: []int32{5, 17, 300, 42}, MaxNewTokens: 4, WantLogits: true}}
	var outs [3][]Output
	for i, be := range []bridge.Backend{asStored{cpu.New(cpu.Options{})}, fourEight{cpu.New(cpu.Options{})}, cpu.New(cpu.Options{})} {
		e, err := New(be, cfg, src, Options{KVDType: "f32"})
		if err != nil {
			t.Fatal(err)
		}
		router, _ := e.Config().Quant.For(model.LayerPrefix(0) + "mlp.gate.weight")
		if got, want := [2]int{e.Config().Quant.Default.Bits, router.Bits}, [3][2]int{{3, 6}, {4, 8}, {4, 8}}[i]; got != want {
			t.Errorf("backend %d runs 3- and 6-bit weights at %v bits, want %v", i, got, want)
		}
		if outs[i], err = e.Generate(reqs); err != nil {
			t.Fatal(err)
		}
	}
	if cfg.Quant.Default.Bits != 3 {
		t.Errorf("the model's own config changed to %d bits", cfg.Quant.Default.Bits)
	}
	for _, o := range outs[1:] {
		var d float64
		for i, v := range o[0].Logits {
			d = math.Max(d, math.Abs(float64(v-outs[0][0].Logits[i])))
		}
		if !slices.Equal(o[0].Tokens, outs[0][0].Tokens) || d > 1e-5 {
			t.Errorf("widened: tokens %v against %v, logits within %.3g", o[0].Tokens, outs[0][0].Tokens, d)
		}
	}
}
