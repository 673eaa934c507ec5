//go:build linux

package cuda

import (
	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// Packed weights in steps of many tokens run on tensor cores unless
// Options.NoPackedMMA says otherwise (kernels/cuda/quant_mma.cu, docs/quantization.md):
// the activations are rounded to bf16, as the half-precision models'
// prefill is, and each weight tile is dequantized to bf16 in shared memory
// as it is staged.

// qmmaSmem is QM_SMEM: four stages of MG_BM activation rows and two
// buffers of MG_BN weight rows, each MG_LD halves.
const qmmaSmem = (4*128 + 2*128) * 40 * 2

// qmmaKernelNames are quant_mma.cu's kernels: four for every packed format.
func qmmaKernelNames() []string {
	var n []string
	for _, f := range packedFormats() {
		n = append(n, "qmma_gemm_"+f, "qmma_gemm_gu_"+f, "qmma_moe_gate_up_"+f, "qmma_moe_down_"+f)
	}
	return n
}

func init() {
	for _, name := range qmmaKernelNames() {
		smemKernels[name] = qmmaSmem
	}
}

// qmmaTakes reports whether a packed product of m rows over k runs on
// tensor cores: unless the options say otherwise, as many rows as a half-precision
// model's would (tensorCores), k in whole tiles, and not the exact path a
// router asks for.
func (b *Backend) qmmaTakes(m, k int, exact bool) bool {
	return !b.opts.NoPackedMMA && !exact && !b.opts.ExactPrefill && m >= tcMinRows && k%moeTileK == 0
}

// launchQMMA records a qgemv launch's matrices as tensor-core GEMMs
// sharing one bf16 copy of x: q, k and v each its own launch; gate and up
// (gu) one launch with SwiGLU into the gate's output.
func (b *Backend) launchQMMA(g *qgemv) {
	n := int64(g.m) * int64(g.k)
	xh := b.scratchBuf("qmma.xh", n*2)
	if b.stepErr != nil {
		return
	}
	b.launch("to_half", [3]int{elementwiseGrid(int(n)), 1, 1}, 256, g.x, xh, 0, i64(n), i32(int(bridge.BF16)))
	f := quant.KernelName(g.segs[0].q.Spec)
	if g.gu {
		gate, up := g.segs[0], g.segs[1]
		gs, gb := gate.q.sb()
		us, ub := up.q.sb()
		rows := gate.q.Dims[0]
		a := []uint64{xh, i32(g.m), i32(g.k), gate.q.data.ptr, gs, gb, up.q.data.ptr, us, ub, i32(rows)}
		a = append(append(a, qmmaSpecArgs(gate.q.Spec, g.k)...), gate.bias, up.bias, gate.out)
		b.launch("qmma_gemm_gu_"+f, [3]int{cdiv(g.m, moeTileRows), cdiv(rows, moeTileRows/2), 1}, 128, a...)
		return
	}
	for _, s := range g.segs[:g.nsegs] {
		sp, bp := s.q.sb()
		rows := s.q.Dims[0]
		a := []uint64{xh, i32(g.m), i32(g.k), s.q.data.ptr, sp, bp, i32(rows)}
		a = append(append(a, qmmaSpecArgs(s.q.Spec, g.k)...), s.bias, s.out)
		b.launch("qmma_gemm_"+f, [3]int{cdiv(g.m, moeTileRows), cdiv(rows, moeTileRows), 1}, 128, a...)
	}
}

// qmoeGrouped records a packed MoE block of a many-token step as grouped
// GEMMs on tensor cores (moe_mma.cu's routing and sort, quant_mma.cu's
// expert kernels) and reports true, or records nothing and reports false
// where it does not apply: fewer than tcMinRows tokens, a strategy other
// than grouped, sizes off the tiles, or a norm folded into the router.
func (b *Backend) qmoeGrouped(o, xs *tensor, w *bridge.MoEWeights, p bridge.MoEParams, tab *qmoeTable, fold qmoeFold, T int) bool {
	H, I, K, E := w.Hidden, w.Inter, w.TopK, len(w.Gate)
	if !b.qmmaTakes(T, H, false) || !groupedFits(w, p) || fold.normW != 0 {
		return false
	}
	gp := b.groupPairs(xs, w, T, func(logits uint64) {
		if rq, ok := w.Router.(*qtensor); ok {
			b.routerLogits(logits, xs.ptr, rq, T)
		} else if router := b.tensorOf(w.Router, "qmoe router"); router != nil {
			b.matmul(logits, xs.ptr, router, 0, T, E, H, true)
		}
	})
	if b.stepErr != nil {
		return true
	}
	gs, ds := tab.spec[0], tab.spec[2]
	b.subMark("gate_up")
	a := []uint64{gp.xh, tab.ptr, gp.start, gp.count, gp.tileStart, gp.pairs, gp.h, i32(E), i32(K), i32(H), i32(I)}
	a = append(a, qmmaSpecArgs(gs, H)...)
	b.launch("qmma_moe_gate_up_"+quant.KernelName(gs), [3]int{gp.tiles, I / (moeTileRows / 2), 1}, 128, a...)
	b.subMark("down")
	// Folded, the experts' sums go into the residual (qmoeFold); else into
	// out, cleared first.
	dst := o.ptr
	if fold.residual != 0 {
		dst = fold.residual
	} else {
		b.launch("zero_f32", [3]int{elementwiseGrid(T * H / 4), 1, 1}, 256, o.ptr, i64(int64(T)*int64(H)))
	}
	a = []uint64{gp.h, tab.ptr, gp.start, gp.count, gp.tileStart, gp.pairs, gp.wts, dst, i32(E), i32(K), i32(H), i32(I)}
	a = append(a, qmmaSpecArgs(ds, I)...)
	b.launch("qmma_moe_down_"+quant.KernelName(ds), [3]int{gp.tiles, H / moeTileRows, 1}, 128, a...)
	return true
}

// qmmaSpecArgs are a packed matrix's last kernel arguments, for rows of k
// values: bytes a row, scale groups a row, the scales' dtype, and the
// values a group: an affine group, else (one group a row) k, where NVFP4's
// and MXFP8's scales follow the values (quant.FPRowValues).
func qmmaSpecArgs(s quant.Spec, k int) []uint64 {
	g := max(s.Groups(k), 1)
	return []uint64{i32(s.RowBytes(k)), i32(g), i32(int(s.Scale)), i32(k / g)}
}
