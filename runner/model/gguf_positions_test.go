package model

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/runner/gguf"
)

// withQ8Tensor is the GGUF file at src with its F32 tensor name stored as
// Q8_0 (quant.PackQ8_0 of its values): a file whose writer quantized a
// tensor llama.cpp's keeps in floats. It returns the path and the values
// Q8_0 gives back.
func withQ8Tensor(t *testing.T, src, name string) (string, []float32) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ti, ok := f.Tensor(name)
	if !ok || ti.Type != gguf.F32 || len(ti.Dims) != 2 {
		t.Fatalf("%s is %v %v in %s, want a 2-D F32 tensor", name, ti.Type, ti.Dims, src)
	}
	raw := f.Bytes(ti)
	w := make([]float32, len(raw)/4)
	for i := range w {
		w[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	m := quant.PackQ8_0(w, int(ti.Dims[1]), int(ti.Dims[0]))
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, retypeData(t, b, name, gguf.Q8_0, m.Data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, m.Dequantize()
}

// GPT-2's learned positions are added as floats on every backend: a file
// that stores them packed gives them dequantized, never as a packed weight
// (which the Metal backend's position kernel could not take).
func TestGGUFPackedPositionsLoadAsFloats(t *testing.T) {
	p, want := withQ8Tensor(t, filepath.Join("..", "testdata", "gguf", "llamacpp-gpt2-q8_0.gguf"), "position_embd.weight")
	cfg, src, err := OpenGGUF(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if s, ok := cfg.Quant.For(GPT2Positions); ok {
		t.Errorf("the positions are configured packed: %v", s)
	}
	var spec TensorSpec
	for _, s := range cfg.Tensors() {
		if s.Name == GPT2Positions {
			spec = s
		}
	}
	if _, ok, err := src.Packed(spec); ok || err != nil {
		t.Fatalf("Packed: %v %v, want the positions given as floats", ok, err)
	}
	dt, data, err := src.Tensor(spec)
	if err != nil || dt != bridge.F32 || len(data) != 4*len(want) {
		t.Fatalf("Tensor: %v %d bytes %v, want %d f32 values", dt, len(data), err, len(want))
	}
	for i, w := range want {
		if g := math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])); g != w {
			t.Fatalf("value %d: %g, want Q8_0's %g", i, g, w)
		}
	}
}

// A GGUF file's context is the one its scaled RoPE states, by the rule a
// config.json's follows (Config.Context): convert_hf_to_gguf writes Qwen3's
// yarn of factor 4 over 32768 positions as context_length 40960 with
// rope.scaling.original_context_length 32768, which runs 131072 positions;
// without original_context_length yarn stretches context_length, as
// llama.cpp's loader takes n_ctx_orig_yarn from n_ctx_train; a context past
// what mtlbench runs is refused naming the factor's key.
func TestGGUFScaledContext(t *testing.T) {
	u32 := func(key string, v uint32) func(t *testing.T, b []byte) {
		return func(t *testing.T, b []byte) { binary.LittleEndian.PutUint32(b[after(t, b, key)+4:], v) }
	}
	f32 := func(key string, v float32) func(t *testing.T, b []byte) {
		return func(t *testing.T, b []byte) {
			binary.LittleEndian.PutUint32(b[after(t, b, key)+4:], math.Float32bits(v))
		}
	}
	// A key renamed within its length is one no loader reads: absent.
	drop := func(key string) func(t *testing.T, b []byte) {
		return func(t *testing.T, b []byte) { b[after(t, b, key)-1] = 'X' }
	}
	for _, c := range []struct {
		name     string
		fixture  string
		edits    []func(*testing.T, []byte)
		ctx      int
		orig     int
		want     string
		refusing string
	}{
		{"as written", "yarn", nil, 64, 16, "64 positions (yarn rope scaling: llama.rope.scaling.original_context_length 16 × factor 4)", ""},
		{"qwen3 yarn", "yarn", []func(*testing.T, []byte){u32("llama.context_length", 40960), u32("rope.scaling.original_context_length", 32768)},
			131072, 32768, "131072 positions (yarn rope scaling: llama.rope.scaling.original_context_length 32768 × factor 4)", ""},
		{"no original", "yarn", []func(*testing.T, []byte){u32("llama.context_length", 40960), drop("rope.scaling.original_context_length")},
			163840, 40960, "163840 positions (yarn rope scaling: llama.context_length 40960 × factor 4)", ""},
		{"linear", "linear", nil, 1024, 0, "1024 positions (linear rope scaling: llama.context_length 256 × factor 4)", ""},
		// As llama.cpp's loader reads it, yarn of no factor (or 0) is a
		// frequency scale of 1: plain RoPE, over context_length.
		{"yarn without a factor", "yarn", []func(*testing.T, []byte){drop("rope.scaling.factor")}, 256, 0, "256 positions", ""},
		{"yarn of factor 0", "yarn", []func(*testing.T, []byte){f32("rope.scaling.factor", 0)}, 256, 0, "256 positions", ""},
		// A factor no loader reads so is refused naming the key.
		{"yarn of factor 0.5", "yarn", []func(*testing.T, []byte){f32("rope.scaling.factor", 0.5)},
			0, 0, "", "llama.rope.scaling: rope scaling factor 0.5 must be a number from 1 to"},
		{"past the limit", "yarn", []func(*testing.T, []byte){u32("rope.scaling.original_context_length", 32768), f32("rope.scaling.factor", 1024)},
			0, 0, "", "llama.rope.scaling.factor=1024 states a context of 33554432 positions (yarn rope scaling: llama.rope.scaling.original_context_length 32768 × factor 1024), beyond what mtlbench runs (at most 16777216)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := os.ReadFile("../testdata/gguf/llama-rope-" + c.fixture + ".gguf")
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range c.edits {
				e(t, b)
			}
			p := filepath.Join(t.TempDir(), "m.gguf")
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if c.refusing != "" {
				openRefused(t, p, c.refusing)
				return
			}
			cfg, src, err := Open(Spec{Model: p})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			n, what := cfg.Context()
			if n != c.ctx || what != c.want {
				t.Errorf("context %d (%s), want %d (%s)", n, what, c.ctx, c.want)
			}
			if c.orig > 0 && cfg.RopeScaling.OriginalMax != c.orig {
				t.Errorf("yarn's original context %d, want %d", cfg.RopeScaling.OriginalMax, c.orig)
			}
		})
	}
}
