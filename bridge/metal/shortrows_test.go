package metal_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/quanttest"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// TestShortRowsShareLanes: a packed GEMV whose rows are at most 16 units a
// chunk lays several rows side by side in a simdgroup, each in an aligned
// block of lanes (docs/metal-kernels.md, "Short rows"). Its outputs are bit
// for bit those of one row a simdgroup, where a row's units sit at lanes
// 0.., for units of 32 values (affine, at 3 bits across words, NVFP4, an
// IQ grid) and of 64 (Q4_K, Q5_K, Q6_K, Q3_K, Q2_K), rows of 3 to 16
// units a chunk, a last chunk shorter than the first, and row counts
// that leave a simdgroup part filled.
func TestShortRowsShareLanes(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: compiles a GEMV pipeline for each format and row count")
	}
	rows := []int{1, 2, 3, 4}
	bes := make([]*metal.Backend, len(rows))
	for i, r := range rows {
		bes[i] = newEmu(t, metal.Tuning{QMatVecRows: r})
	}
	cases := []struct {
		spec   quant.Spec
		shapes []quanttest.Shape
	}{
		// 3, 8 and 16 units; eight rows of x stage 512 values a chunk, so 768
		// are chunks of 16 units and 8 (as Qwen3-30B-A3B's down projections
		// in qmoe_mv_sum), and 4608 at one row chunks of 128 and 16.
		{quant.Spec{Type: quant.Affine, Bits: 4, Group: 32, Scale: quant.F32},
			[]quanttest.Shape{{M: 1, N: 37, K: 96}, {M: 1, N: 37, K: 256}, {M: 2, N: 13, K: 512}, {M: 8, N: 13, K: 768},
				{M: 1, N: 9, K: 4608}}},
		{quant.Spec{Type: quant.Affine, Bits: 3, Group: 64, Scale: quant.BF16}, []quanttest.Shape{{M: 1, N: 21, K: 320}}},
		{quant.Spec{Type: quant.NVFP4}, []quanttest.Shape{{M: 1, N: 11, K: 160}}},
		{quant.Spec{Type: quant.IQ2_XXS}, []quanttest.Shape{{M: 1, N: 7, K: 256}}},
		// 16 units of 64 values; Q6_K's and Q5_K's 12 and 16, and at eight
		// rows of x chunks of 8 and 4 (Q3_K too).
		{quant.Spec{Type: quant.Q4_K}, []quanttest.Shape{{M: 1, N: 19, K: 1024}}},
		{quant.Spec{Type: quant.Q6_K}, []quanttest.Shape{{M: 1, N: 19, K: 768}, {M: 1, N: 19, K: 1024}, {M: 8, N: 6, K: 768}}},
		{quant.Spec{Type: quant.Q5_K}, []quanttest.Shape{{M: 1, N: 19, K: 768}, {M: 1, N: 19, K: 1024}, {M: 8, N: 6, K: 768}}},
		{quant.Spec{Type: quant.Q3_K}, []quanttest.Shape{{M: 8, N: 6, K: 768}}},
		{quant.Spec{Type: quant.Q2_K}, []quanttest.Shape{{M: 1, N: 19, K: 768}}},
	}
	for _, c := range cases {
		for _, sh := range c.shapes {
			name := fmt.Sprintf("%v m=%d n=%d k=%d", c.spec, sh.M, sh.N, sh.K)
			var first []float32
			for i, be := range bes {
				got, want, err := quanttest.Run(be, c.spec, sh, 5)
				if err != nil {
					t.Fatalf("%s, %d rows a simdgroup: %v", name, rows[i], err)
				}
				if e := quanttest.RelErr(got, want); !(e <= 1e-5) {
					t.Errorf("%s, %d rows a simdgroup: relative error %.3g against the reference", name, rows[i], e)
				}
				if i == 0 {
					first = got
					continue
				}
				for j := range got {
					if math.Float32bits(got[j]) != math.Float32bits(first[j]) {
						t.Errorf("%s: output %d is %v at %d rows a simdgroup, %v at 1", name, j, got[j], rows[i], first[j])
						break
					}
				}
			}
		}
	}
}
