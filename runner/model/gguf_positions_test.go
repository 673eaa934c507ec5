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
