package model

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/runner/gguf"
)

// withQ8Tensor is the GGUF file at src with its F32 tensor name stored as
// Q8_0 (quant.PackQ8_0 of its values) and the data after it moved up: a
// file whose writer quantized a tensor llama.cpp's keeps in floats. It
// returns the path and the values Q8_0 gives back.
func withQ8Tensor(t *testing.T, src, name string) (string, []float32) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	up := func(n uint64) uint64 { return (n + f.Alignment - 1) / f.Alignment * f.Alignment }
	end := uint64(0)
	for _, ti := range f.Tensors {
		end = max(end, up(ti.Offset+ti.Size))
	}
	data := uint64(len(b)) - end
	info := func(s string) int { // where tensor s's type field is
		i := strings.LastIndex(string(b[:data]), string(binary.LittleEndian.AppendUint64(nil, uint64(len(s))))+s)
		if i < 0 {
			t.Fatalf("no %s in %s", s, src)
		}
		i += 8 + len(s)
		return i + 4 + 8*int(binary.LittleEndian.Uint32(b[i:]))
	}
	ts := slices.Clone(f.Tensors)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Offset < ts[j].Offset })
	out := slices.Clone(b[:data])
	var body []byte
	var back []float32
	for _, ti := range ts {
		bytes := b[data+ti.Offset : data+ti.Offset+ti.Size]
		at := info(ti.Name)
		if ti.Name == name {
			if ti.Type != gguf.F32 || len(ti.Dims) != 2 {
				t.Fatalf("%s is %v %v, want a 2-D F32 tensor", name, ti.Type, ti.Dims)
			}
			w := make([]float32, len(bytes)/4)
			for i := range w {
				w[i] = math.Float32frombits(binary.LittleEndian.Uint32(bytes[4*i:]))
			}
			m := quant.PackQ8_0(w, int(ti.Dims[1]), int(ti.Dims[0]))
			bytes, back = m.Data, m.Dequantize()
			binary.LittleEndian.PutUint32(out[at:], uint32(gguf.Q8_0))
		}
		binary.LittleEndian.PutUint64(out[at+4:], uint64(len(body)))
		body = append(body, bytes...)
		body = append(body, make([]byte, up(uint64(len(body)))-uint64(len(body)))...)
	}
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, append(out, body...), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, back
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
