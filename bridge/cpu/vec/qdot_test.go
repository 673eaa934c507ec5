package vec

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mtlbench/mtlbench/kernels/quant"
)

// qSpecs are every packing QDots reads: the row kernels' (affine 4 and 8
// bits, each group size and scale dtype, the GGUF types) and the generic
// dots' other bit widths.
func qSpecs() []quant.Spec {
	var s []quant.Spec
	for _, bits := range []int{4, 8} {
		for _, g := range quant.AffineGroups {
			for _, f := range []quant.Float{quant.F32, quant.F16, quant.BF16} {
				s = append(s, quant.Spec{Type: quant.Affine, Bits: bits, Group: g, Scale: f})
			}
		}
	}
	for _, bits := range []int{2, 3, 5, 6} {
		s = append(s, quant.Spec{Type: quant.Affine, Bits: bits, Group: 64, Scale: quant.BF16})
	}
	return append(s, quant.Spec{Type: quant.Q8_0}, quant.Spec{Type: quant.Q4_0},
		quant.Spec{Type: quant.Q4_K}, quant.Spec{Type: quant.Q6_K}, quant.Spec{Type: quant.Q2_K},
		quant.Spec{Type: quant.IQ2_XXS}, quant.Spec{Type: quant.IQ2_XS}, quant.Spec{Type: quant.IQ2_S},
		quant.Spec{Type: quant.IQ3_XXS}, quant.Spec{Type: quant.IQ3_S}, quant.Spec{Type: quant.IQ1_S},
		quant.Spec{Type: quant.IQ1_M})
}

// randomQ is a random matrix whose K-quant sub-block scales are random too
// (quant.Random gives every sub-block the same one, which would hide a
// kernel that mixes them up).
func randomQ(t testing.TB, s quant.Spec, rows, k int, rng *rand.Rand) *quant.Matrix {
	t.Helper()
	sb := rows * s.Groups(k) * s.Scale.Size()
	var sc, bi []byte
	if s.Type == quant.Affine {
		sc, bi = make([]byte, sb), make([]byte, sb)
	}
	m := quant.Random(s, rows, k, 0.5, rng, make([]byte, rows*s.RowBytes(k)), sc, bi)
	for b := 0; b < len(m.Data)/max(s.BlockBytes(), 1); b++ {
		blk := m.Data[b*s.BlockBytes():]
		switch s.Type {
		case quant.Q4_K:
			for j := 4; j < 16; j++ {
				blk[j] = byte(rng.Uint32())
			}
		case quant.Q6_K:
			for j := 192; j < 208; j++ {
				blk[j] = byte(rng.IntN(128) - 64)
			}
		}
	}
	if err := m.Check("random"); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestQDots: every format against kernels/quant's reference (rows
// dequantized, dots in float64) for every implementation level, at row
// counts and offsets that leave blocks of 4 rows incomplete, and row
// lengths of one block and several. Rows are a multiple of their format's
// block, which is a multiple of the vector width, so no format has a
// partial vector. The float levels are held to 1e-5 of the largest
// result; the integer dots (levelVNNI's affine 4 and 8 bits) to that plus
// the bound of rounding x to block fixed point (QBound): half of d =
// max|x|/M (M about 2^23, 2^21 for 8-bit affine) of each block's largest
// |x|, times the block's Σ|scale·q|.
func TestQDots(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	forLevels(t, func(t *testing.T) {
		for _, s := range qSpecs() {
			for _, k := range []int{s.Block(), 3 * s.Block(), 1024 + s.Block()} {
				t.Run(fmt.Sprintf("%v/k=%d", s, k), func(t *testing.T) {
					const rows = 11
					w := randomQ(t, s, rows, k, rng)
					x := make([]float32, k)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					want := make([]float32, rows)
					quant.MatMul(want, x, nil, w, 1)
					p := make([]float32, QPrepLen(s, k))
					QPrepare(p, x, s)
					var scale float64
					for _, v := range want {
						scale = max(scale, math.Abs(float64(v)))
					}
					tol := make([]float64, rows)
					for j := range tol {
						tol[j] = 1e-5*scale + 1e-6 + QBound(w, j, x)
					}
					for _, r := range [][2]int{{0, rows}, {1, 6}, {3, 4}, {2, 10}, {5, 5}} {
						got := make([]float32, r[1]-r[0]+1)
						got[len(got)-1] = 42 // not written
						QDots(got, w, r[0], r[1], x, p)
						for j := r[0]; j < r[1]; j++ {
							if d := math.Abs(float64(got[j-r[0]] - want[j])); d > tol[j] {
								t.Fatalf("rows [%d,%d): row %d = %g, reference %g (diff %g, tolerance %g)", r[0], r[1], j, got[j-r[0]], want[j], d, tol[j])
							}
						}
						if got[len(got)-1] != 42 {
							t.Fatalf("rows [%d,%d): wrote past its rows", r[0], r[1])
						}
					}
				})
			}
		}
	})
}

// BenchmarkQDots: one core's packed GEMV of TinyLlama's gate projection
// (n=5632, k=2048, which the L3 partly holds) and its LM head (n=32000,
// which no cache holds at 8 bits), as packed bytes read per second.
func BenchmarkQDots(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range []quant.Spec{
		{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16},
		{Type: quant.Affine, Bits: 8, Group: 64, Scale: quant.BF16},
		{Type: quant.Affine, Bits: 3, Group: 64, Scale: quant.BF16},
		{Type: quant.Affine, Bits: 6, Group: 64, Scale: quant.BF16},
		{Type: quant.Q8_0}, {Type: quant.Q4_0}, {Type: quant.Q4_K}, {Type: quant.Q6_K}, {Type: quant.Q2_K},
		{Type: quant.IQ2_XXS}, {Type: quant.IQ3_S}, {Type: quant.IQ1_M},
	} {
		for _, n := range []int{5632, 32000} {
			const k = 2048
			w := randomQ(b, s, n, k, rng)
			x := randF32(rng, k)
			dst := make([]float32, n)
			b.Run(fmt.Sprintf("%v/n=%d", s, n), func(b *testing.B) {
				benchLevels(b, false, func(b *testing.B) {
					// Each level has its own layout of the prepared x.
					p := make([]float32, QPrepLen(s, k))
					QPrepare(p, x, s)
					b.SetBytes(s.Bytes(int64(n*k), k))
					for b.Loop() {
						QDots(dst, w, 0, n, x, p)
					}
				})
			})
		}
	}
}

// TestQPrepInt: the quantizing kernels (qgen.go: prepInt) write the same
// planes and d as their Go twin, and block sums within float rounding,
// for blocks of normal values, of zeros, and of values far apart in size.
func TestQPrepInt(t *testing.T) {
	if !slices.Contains(availableLevels(), levelVNNI) {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, l := range []int{qlA8, qlA4, qlK4, qlQ40} {
		U := qlUnit(l)
		const n = 5
		x := make([]float32, n*U)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			switch i / qIntBlock % 4 {
			case 1:
				x[i] = 0
			case 2:
				x[i] *= 1e-20
			case 3:
				x[i] *= float32(math.Pow(10, float64(rng.IntN(20)-10)))
			}
		}
		ub := qlBytes(l)
		got, want := make([]byte, n*ub), make([]byte, n*ub)
		gs, ws := make([]float32, n*U/qIntBlock), make([]float32, n*U/qIntBlock)
		prepIntArch(l, x, got, gs, n, 8355000)
		prepIntGeneric(l, x, want, ws, n, 8355000)
		for i := range got {
			if l == qlQ40 && i%ub >= 448 {
				continue // 2·Σx, a float sum: below
			}
			if got[i] != want[i] {
				t.Fatalf("layout %d: byte %d of unit %d = %#x, Go %#x", l, i%ub, i/ub, got[i], want[i])
			}
		}
		if l == qlQ40 {
			for u := range n {
				for j := 0; j < 16; j++ {
					o := u*ub + 448 + 4*j
					g := math.Float32frombits(binary.LittleEndian.Uint32(got[o:]))
					w := math.Float32frombits(binary.LittleEndian.Uint32(want[o:]))
					var a float64 // Σ|x| of the lane's block
					for _, v := range x[u*U+j/4*qIntBlock : u*U+(j/4+1)*qIntBlock] {
						a += math.Abs(float64(v))
					}
					if d := math.Abs(float64(g - w)); d > 2e-6*a {
						t.Fatalf("unit %d lane %d: 2·Σx %g, Go %g", u, j, g, w)
					}
				}
			}
		}
		for b := range gs {
			var a float64
			for _, v := range x[b*qIntBlock : (b+1)*qIntBlock] {
				a += math.Abs(float64(v))
			}
			if d := math.Abs(float64(gs[b] - ws[b])); d > 1e-6*a {
				t.Fatalf("layout %d: block %d's sum %g, Go %g", l, b, gs[b], ws[b])
			}
		}
	}
}
