package quanttest

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// ShortBias: a matmul, float or packed, whose bias holds fewer values than
// its outputs a row fails the step, saying so, fused or not and at GEMV and
// GEMM rows, rather than reading past the bias or panicking. The loaders
// check every bias tensor's shape; this holds the backends to it for op
// lists built by hand.
func ShortBias(t *testing.T, be bridge.Backend) {
	const n, k = 40, 64
	r := rand.New(rand.NewPCG(31, 37))
	for _, packed := range []bool{false, true} {
		for _, m := range []int{1, 16} {
			for _, fuse := range []bool{false, true} {
				mm := &matmul{be: be}
				var op bridge.Op
				x, err := mm.keep(be.Weight(bridge.F32, []int{m, k}, F32Bytes(randn(r, m*k))))
				if err == nil {
					mm.bias, err = mm.keep(be.Weight(bridge.F32, []int{n - 3}, F32Bytes(randn(r, n-3))))
				}
				if err == nil {
					mm.out, err = mm.keep(be.Alloc(bridge.F32, m, n))
				}
				if err == nil && packed {
					qb, ok := be.(bridge.QuantBackend)
					if !ok {
						t.Fatalf("%T runs no packed weights", be)
					}
					s := quant.Spec{Type: quant.Q8_0}
					w := quant.Random(s, n, k, 0.1, r, make([]byte, n*s.RowBytes(k)), nil, nil)
					mm.w, err = mm.keep(qb.QuantWeight(s, []int{n, k}, w.Data, w.Scales, w.Biases))
					op = &bridge.QMatMulOp{Out: mm.out, X: x, W: mm.w, Bias: mm.bias}
				} else if err == nil {
					mm.w, err = mm.keep(be.Weight(bridge.F32, []int{n, k}, F32Bytes(randn(r, n*k))))
					op = &bridge.MatMulOp{Out: mm.out, X: x, W: mm.w, Bias: mm.bias}
				}
				if err != nil {
					mm.free()
					t.Fatal(err)
				}
				if err := be.BeginStep(stepMeta(m), make([]int32, m), false); err != nil {
					mm.free()
					t.Fatal(err)
				}
				var run bridge.Runner
				run.Run(be, []bridge.Op{op}, fuse, false)
				_, err = be.EndStep()
				mm.free()
				if err == nil || !strings.Contains(err.Error(), "bias of 37 values for 40 outputs a row") {
					t.Errorf("packed %v, %d rows, fused %v: %v, want the short bias named", packed, m, fuse, err)
				}
			}
		}
	}
}
