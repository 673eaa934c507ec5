package model

import (
	"path/filepath"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/runner/gguf"
)

// llama.cpp's converter writes MoE routers (ffn_gate_inp) in F32 and
// llama-quantize leaves them so in every mix: the GGUF presets hold them
// in f32 as its files do, and a file's memory figure counts them at the
// four bytes it stores, not at its other matrices' f16.
func TestMoERoutersInF32(t *testing.T) {
	const router = "model.layers.0.mlp.gate.weight"
	for _, tc := range []struct {
		format string
		f32    bool // else packed at 8 bits, as mlx-lm keeps them
	}{
		{"q4_k_m", true}, {"q5_k_m", true}, {"q8_0", true}, {"iq2_xxs", true}, {"q4", false}, {"nvfp4", false},
	} {
		cfg, src, err := Open(Spec{Model: "qwen3-moe-mini", Layers: 1, Quant: tc.format, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		spec := tensorSpec(t, cfg, router)
		s, packed := cfg.Quant.For(router)
		switch {
		case tc.f32 && (packed || !cfg.LoadsInF32(router) || cfg.TensorBytes(spec, bridge.BF16) != 4*spec.Elems()):
			t.Errorf("%s: router packed %v (%v), loaded in f32 %v, %d bytes; want f32, %d bytes",
				tc.format, packed, s, cfg.LoadsInF32(router), cfg.TensorBytes(spec, bridge.BF16), 4*spec.Elems())
		case !tc.f32 && (!packed || s.Bits != 8):
			t.Errorf("%s: router packed %v as %v, want 8-bit affine", tc.format, packed, s)
		}
		if tc.f32 {
			dt, b, err := src.Tensor(spec)
			if err != nil || dt != bridge.F32 || int64(len(b)) != 4*spec.Elems() {
				t.Errorf("%s: router drawn in %v (%d bytes, %v), want f32", tc.format, dt, len(b), err)
			}
		}
		src.Close()
	}
	// A file opened as stored: every matrix's figure is the file's bytes.
	for _, name := range []string{"llamacpp-qwen3_moe-q4_k_m.gguf", "llamacpp-qwen3_moe-hd80-q8_0.gguf"} {
		path := filepath.Join("..", "testdata", "gguf", name)
		cfg, src, err := OpenGGUF(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		spec := tensorSpec(t, cfg, router)
		info, ok := f.Tensor("blk.0.ffn_gate_inp.weight")
		if !ok {
			t.Fatalf("%s: no router", name)
		}
		if got, want := cfg.TensorBytes(spec, src.DType()), int64(len(f.Bytes(info))); info.Type != gguf.F32 || got != want {
			t.Errorf("%s: router counted at %d bytes (floats in %v), the file stores %d in %v", name, got, src.DType(), want, info.Type)
		}
		f.Close()
		src.Close()
	}
}

func tensorSpec(t *testing.T, cfg *Config, name string) TensorSpec {
	t.Helper()
	for _, s := range cfg.Tensors() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no tensor %s", name)
	return TensorSpec{}
}
