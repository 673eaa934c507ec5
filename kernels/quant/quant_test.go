package quant

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// TestBlocksMatchGGUFPy: random blocks of each GGUF type, dequantized by
// gguf-py (tools/fixtures/make_quant_fixtures.py wrote them), against Row.
// The two compute in float32 in different orders: tolerance 1e-6 relative.
func TestBlocksMatchGGUFPy(t *testing.T) {
	raw, err := os.ReadFile("testdata/blocks.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx map[string]struct {
		Blocks string    `json:"blocks"`
		Values []float32 `json:"values"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	types := map[string]Type{"Q8_0": Q8_0, "Q4_0": Q4_0, "Q4_K": Q4_K, "Q6_K": Q6_K}
	if len(fx) != len(types) {
		t.Fatalf("fixture has %d types, want %d", len(fx), len(types))
	}
	for name, f := range fx {
		t.Run(name, func(t *testing.T) {
			data, _ := base64.StdEncoding.DecodeString(f.Blocks)
			s := Spec{Type: types[name]}
			m := &Matrix{Spec: s, Rows: 1, K: len(f.Values), Data: data}
			if err := m.Check(name); err != nil {
				t.Fatal(err)
			}
			got := m.Dequantize()
			for i, want := range f.Values {
				if d := math.Abs(float64(got[i] - want)); d > 1e-6*math.Abs(float64(want))+1e-12 {
					t.Fatalf("value %d: %g, gguf-py %g", i, got[i], want)
				}
			}
		})
	}
}

// TestPackRoundTrip: packers and Row agree with the values packed, within
// half a quantization step.
func TestPackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const rows, k = 4, 256
	w := make([]float32, rows*k)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	cases := []struct {
		name string
		m    *Matrix
		step float64 // largest quantization step of any value
	}{
		{"affine4", PackAffine(w, rows, k, 4, 64, BF16), 8.0 / 15},
		{"affine8", PackAffine(w, rows, k, 8, 32, F16), 8.0 / 255},
		{"affine3", PackAffine(w, rows, k, 3, 128, F32), 8.0 / 7},
		{"q8_0", PackQ8_0(w, rows, k), 4.0 / 127},
		{"q4_0", PackQ4_0(w, rows, k), 4.0 / 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.m.Check(c.name); err != nil {
				t.Fatal(err)
			}
			got := c.m.Dequantize()
			for i := range w {
				if d := math.Abs(float64(got[i] - w[i])); d > c.step/2+0.02 {
					t.Fatalf("value %d: %g packed as %g", i, w[i], got[i])
				}
			}
		})
	}
}

// TestHalf: the f16 helpers round trip every finite half.
func TestHalf(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 == 0x7c00 {
			continue
		}
		f := HalfToF32(uint16(h))
		if g := ToF16(f); g != uint16(h) && !(f == 0 && g&0x7fff == 0) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, g)
		}
	}
}

// TestValidate: unsupported bits, groups and ragged rows are errors.
func TestValidate(t *testing.T) {
	bad := []struct {
		s Spec
		k int
	}{
		{Spec{Type: Affine, Bits: 7, Group: 64}, 64},
		{Spec{Type: Affine, Bits: 4, Group: 48}, 96},
		{Spec{Type: Affine, Bits: 4, Group: 64}, 96},
		{Spec{Type: Q4_K}, 128},
		{Spec{Type: 99}, 64},
	}
	for _, b := range bad {
		if err := b.s.Validate(b.k); err == nil {
			t.Errorf("%v with k=%d: no error", b.s, b.k)
		}
	}
}
