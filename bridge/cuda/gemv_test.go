//go:build linux

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
)

// Matmuls of 9 to 16 tokens over half weights (batched decode) on the
// tensor-core GEMV (kernels/cuda/gemv_mma.cu, Options.GemvMMA) against a
// float64 reference over the activations rounded to the weights' type, and
// against the cuBLAS path, which rounds them alike: within 1e-5 of the
// reference's norm. The shapes cross its bounds: token counts that fill
// one or both token tiles or neither; rows that end inside a 16-row tile
// and inside a block's 128; k of one 32-column step, of a few, of several
// 512-column chunks, and split between 2 to 16 blocks whose partial sums
// the last one adds (slices of uneven steps among them); one to three
// matrices of one input in a launch (q, k and v), with and without bias;
// bf16 and f16. A k that is not a multiple of the step runs on cuBLAS. The
// kernels keep to registers.
func TestGemvMMAMatchesReference(t *testing.T) {
	b := gpu(t)
	// Registers decide how many of its 256-thread blocks share an SM
	// (docs/cuda.md, "Where batch-16 bf16 decode time goes").
	for _, name := range []string{"gemv_mma_bf16", "gemv_mma_f16"} {
		logKernelResources(t, b, name)
	}
	cases := []struct {
		dt    bridge.DType
		m, k  int
		ns    []int
		bias  bool
		mmaOK bool // runs on gemv_mma: one launch for all of ns
	}{
		{bridge.BF16, 16, 2048, []int{4096, 512, 512}, false, true},
		{bridge.BF16, 16, 4096, []int{2048}, true, true},
		{bridge.BF16, 9, 96, []int{100}, true, true},
		{bridge.BF16, 11, 32, []int{33}, false, true},
		{bridge.F16, 13, 4096, []int{40, 24}, true, true},
		{bridge.F16, 10, 640, []int{5632, 5632}, false, true},
		{bridge.BF16, 12, 40, []int{64}, true, false},
		{bridge.BF16, 14, 1024, []int{40000}, false, true},
		{bridge.BF16, 16, 2080, []int{300}, true, true},
	}
	for _, name := range []string{"gemv_mma_bf16", "gemv_mma_f16"} {
		if n, err := b.KernelLocalBytes(name); err != nil || n != 0 {
			t.Errorf("%s: %d bytes of local memory a thread (%v), want none", name, n, err)
		}
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v_m%d_k%d_n%v_bias%v", c.dt, c.m, c.k, c.ns, c.bias), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.m), uint64(c.k)))
			round, bytes := bf16Round, bf16Bytes
			if c.dt == bridge.F16 {
				round, bytes = f16Round, f16Bytes
			}
			x := randn(r, c.m*c.k, 1)
			xr := round(x)
			xt := upload(t, b, bridge.F32, f32Bytes(x), c.m, c.k)
			var ops []bridge.Op
			var want [][]float32
			var outs []bridge.Tensor
			for _, n := range c.ns {
				w := round(randn(r, n*c.k, 1/math.Sqrt(float64(c.k))))
				var bias []float32
				op := &bridge.MatMulOp{X: xt, W: upload(t, b, c.dt, bytes(w), n, c.k)}
				if c.bias {
					bias = randn(r, n, 0.5)
					op.Bias = upload(t, b, bridge.F32, f32Bytes(bias), n)
				}
				op.Out = upload(t, b, bridge.F32, f32Bytes(make([]float32, c.m*n)), c.m, n)
				ops, outs = append(ops, op), append(outs, op.Out)
				ref := make([]float32, c.m*n)
				for i := 0; i < c.m; i++ {
					for j := 0; j < n; j++ {
						s := 0.0
						for l := 0; l < c.k; l++ {
							s += float64(xr[i*c.k+l]) * float64(w[j*c.k+l])
						}
						if bias != nil {
							s += float64(bias[j])
						}
						ref[i*n+j] = float32(s)
					}
				}
				want = append(want, ref)
			}
			run := func(mma bool, ops []bridge.Op) ([][]float32, int) {
				defer b.SetGemvMMA(mma)()
				meta := &bridge.StepMeta{NumTokens: 1, NumSeqs: 1, MaxQueryLen: 1, MaxSeqLen: 1, NumDecodeTokens: 1,
					Positions: []int32{0}, SlotMapping: []int32{0}, QueryStartLoc: []int32{0, 1}, SeqLens: []int32{1},
					BlockTable: []int32{0}, MaxBlocks: 1, BlockSize: 16}
				if err := b.BeginStep(meta, []int32{0}, false); err != nil {
					t.Fatal(err)
				}
				var run bridge.Runner
				run.Run(b, ops, true, false)
				if _, err := b.EndStep(); err != nil {
					t.Fatal(err)
				}
				var got [][]float32
				for i, o := range outs {
					g := make([]float32, c.m*c.ns[i])
					if err := b.Read(o, g); err != nil {
						t.Fatal(err)
					}
					got = append(got, g)
				}
				return got, b.LastStepLaunches()
			}
			_, base := run(true, nil) // a step's own launches
			got, launches := run(true, ops)
			blas, _ := run(false, ops)
			for i := range c.ns {
				e, eb := relErr(got[i], want[i]), relErr(got[i], blas[i])
				t.Logf("matrix %d (%d rows): relative error %.2g, against cuBLAS %.2g", i, c.ns[i], e, eb)
				if e > 1e-5 || eb > 1e-5 {
					t.Errorf("matrix %d: relative error %.3g, against cuBLAS %.3g: want at most 1e-5", i, e, eb)
				}
			}
			if c.mmaOK && launches != base+1 {
				t.Errorf("%d launches a step, %d without the matmuls: want one launch for them", launches, base)
			}
		})
	}
}
