//go:build linux

package cuda_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	. "github.com/mtlbench/mtlbench/bridge/cuda"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// iqSpecs are the IQ grid formats (kernels/quant iq.go): quant.cu's and
// quant_mma.cu's kernels decode a 32-value unit's grid rows, signs and
// scales as quant.IQUnit does. qmmaSpecs holds them too, so
// TestQuantMMAMatchesReference and TestQuantMoEGroupedMatchesReference
// take their tensor-core tiles.
var iqSpecs = []quant.Spec{
	{Type: quant.IQ2_XXS}, {Type: quant.IQ2_XS}, {Type: quant.IQ2_S}, {Type: quant.IQ3_XXS}, {Type: quant.IQ3_S},
	{Type: quant.IQ1_S}, {Type: quant.IQ1_M},
}

// The IQ GEMVs (qgemv_<format>_c*_r*) equal the reference on the same
// packed bytes, with a bias, in each shape the backend picks on an H200
// (132 SMs; qgemvShape): one activation row at one weight row a warp with
// and without split-K (300 rows of 768 and of 4608), two (2048 rows) and
// four (4224 rows), and several activation rows at two (3 and 5 rows).
func TestIQGEMVMatchesReference(t *testing.T) {
	b := gpu(t)
	r := rand.New(rand.NewPCG(21, 22))
	for _, s := range iqSpecs {
		if err := b.SupportsQuant(s); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ m, n, k int }{{1, 300, 768}, {1, 300, 4608}, {1, 2048, 512}, {1, 4224, 256}, {3, 37, 1280}, {5, 200, 4608}} {
			w := randomPacked(r, s, c.n, c.k, 0.1)
			wt := uploadPacked(t, b, w)
			x := randn(r, c.m*c.k, 1)
			bias := randn(r, c.n, 0.5)
			want := make([]float32, c.m*c.n)
			quant.MatMul(want, x, bias, w, c.m)
			xt := upload(t, b, bridge.F32, f32Bytes(x), c.m, c.k)
			bt := upload(t, b, bridge.F32, f32Bytes(bias), c.n)
			out := upload(t, b, bridge.F32, make([]byte, 4*c.m*c.n), c.m, c.n)
			inStep(t, b, c.m, func() { b.QMatMul(out, xt, wt, bt) })
			e := relErr(readF32(t, b, out, c.m*c.n), want)
			t.Logf("%v, m=%d n=%d k=%d: relative error %.2g", s, c.m, c.n, c.k, e)
			if !(e <= 1e-5) {
				t.Errorf("%v, m=%d n=%d k=%d: relative error %.3g > 1e-5", s, c.m, c.n, c.k, e)
			}
		}
	}
}

// A packed MoE block of a few tokens with IQ experts and an IQ router
// equals the reference: one token fused (qrouter_route1 routes, then
// qmoe_gate_up and qmoe_down_sum), three tokens (the router's qgemv,
// moe_route) and both unfused (qmoe_down and moe_combine apart).
func TestIQMoEDecodeMatchesReference(t *testing.T) {
	b := gpu(t)
	const E, K, H, I = 8, 2, 512, 768
	r := rand.New(rand.NewPCG(23, 24))
	for _, s := range iqSpecs {
		gate, up, down := randomPacked(r, s, E*I, H, 0.1), randomPacked(r, s, E*I, H, 0.1), randomPacked(r, s, E*H, I, 0.05)
		router := randomPacked(r, s, E, H, 0.5)
		w := &bridge.MoEWeights{Router: uploadPacked(t, b, router), TopK: K, NormTopK: true, Hidden: H, Inter: I}
		uploadExperts(t, b, w, gate, up, down, E)
		for _, T := range []int{1, 3} {
			x := randn(r, T*H, 1)
			want := make([]float32, T*H)
			quant.MoE(want, x, router, nil, quant.Experts{Gate: gate, Up: up, Down: down, Count: E}, K, true, H, I)
			xt := upload(t, b, bridge.F32, f32Bytes(x), T, H)
			for _, unfused := range []bool{false, true} {
				out := upload(t, b, bridge.F32, make([]byte, 4*T*H), T, H)
				inStep(t, b, T, func() { b.QMoE(out, xt, w, bridge.MoEParams{Unfused: unfused}) })
				e := relErr(readF32(t, b, out, T*H), want)
				t.Logf("%v, %d tokens, unfused %v: relative error %.2g", s, T, unfused, e)
				if !(e <= 1e-4) {
					t.Errorf("%v, %d tokens, unfused %v: relative error %.3g > 1e-4", s, T, unfused, e)
				}
			}
		}
	}
}

// IQ embedding rows (qembed_<format>) are the reference's dequantized rows:
// s·code is one f32 product on both sides. A row of 2304 values takes a
// lane two 32-value units apart by 1024.
func TestIQEmbeddingMatchesReference(t *testing.T) {
	b := gpu(t)
	const V, W, T = 300, 2304, 17
	r := rand.New(rand.NewPCG(25, 26))
	for _, s := range iqSpecs {
		table := randomPacked(r, s, V, W, 0.5)
		tt := uploadPacked(t, b, table)
		ids := make([]int32, T)
		for i := range ids {
			ids[i] = int32(r.IntN(V))
		}
		ids[0], ids[T-1] = 0, V-1
		want := make([]float32, T*W)
		quant.Gather(want, table, ids)
		out := upload(t, b, bridge.F32, make([]byte, 4*T*W), T, W)
		meta := &bridge.StepMeta{NumTokens: T, NumSeqs: 1, MaxQueryLen: T, MaxSeqLen: T, Positions: make([]int32, T),
			SlotMapping: make([]int32, T), QueryStartLoc: []int32{0, T}, SeqLens: []int32{T},
			BlockTable: make([]int32, (T+15)/16), MaxBlocks: (T + 15) / 16, BlockSize: 16}
		if err := b.BeginStep(meta, ids, false); err != nil {
			t.Fatal(err)
		}
		b.QEmbedding(out, tt)
		if _, err := b.EndStep(); err != nil {
			t.Fatal(err)
		}
		got := readF32(t, b, out, T*W)
		e := relErr(got, want)
		t.Logf("%v: relative error %.2g", s, e)
		if !(e <= 1e-6) {
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("%v: token %d value %d: %g, want %g", s, i/W, i%W, got[i], want[i])
					break
				}
			}
			t.Errorf("%v: relative error %.3g > 1e-6", s, e)
		}
	}
}

// Every IQ format's kernels are named for launch: the GEMVs, expert,
// router and embedding kernels and the tensor-core tiles.
func TestIQKernelNames(t *testing.T) {
	have := map[string]bool{}
	for _, n := range KernelNames() {
		have[n] = true
	}
	for _, s := range iqSpecs {
		f := quant.KernelName(s)
		for _, n := range []string{"qgemv_%s_c1_r1", "qgemv_%s_c1_r2", "qgemv_%s_c1_r4", "qgemv_%s_c4_r2", "qmoe_gate_up_%s",
			"qmoe_down_%s", "qmoe_down_sum_%s", "qrouter_route1_%s", "qembed_%s", "qmma_gemm_%s", "qmma_gemm_gu_%s",
			"qmma_moe_gate_up_%s", "qmma_moe_down_%s"} {
			if name := fmt.Sprintf(n, f); !have[name] {
				t.Errorf("%v: no kernel %s", s, name)
			}
		}
	}
}
