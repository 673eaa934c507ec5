package metal

import (
	"fmt"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
)

// The matmul peak: prefill is compute-bound, so its roofline is the
// device's matmul throughput, measured in the same run as the cases (as the
// bandwidth is for decode) with the kernel prefill's projections run: the
// tiled simdgroup_matrix GEMM (kernels/metal/gemm.h) on bf16 weights.

// peakShape is the probe's square GEMM side: large enough that every core
// holds many tiles and a pass lasts milliseconds on an Apple GPU; on an
// emulated device small, as its figure is the CPU's and says nothing of a
// GPU.
func (b *Backend) peakShape() (side, reps, passes int) {
	if b.dev.Emulated() {
		return 128, 1, 2
	}
	return 4096, 4, 6
}

// MeasureMatMulPeak returns the device's bf16 matmul throughput in FLOP/s:
// the best of several steps of reps square GEMMs (m = n = k), each step
// timed from its first encoding to its completion, after a warm-up step
// that builds the pipeline and touches the buffers.
func (b *Backend) MeasureMatMulPeak() (float64, error) {
	side, reps, passes := b.peakShape()
	return b.matmulPeak(side, reps, passes)
}

func (b *Backend) matmulPeak(side, reps, passes int) (float64, error) {
	if b.step.active {
		return 0, fmt.Errorf("metal: matmul peak probe inside a step")
	}
	var ts []bridge.Tensor
	defer func() {
		for _, t := range ts {
			b.Free(t)
		}
	}()
	alloc := func(dt bridge.DType, shape ...int) (bridge.Tensor, error) {
		t, err := b.Alloc(dt, shape...)
		if err == nil {
			ts = append(ts, t)
		}
		return t, err
	}
	x, err := alloc(bridge.F32, side, side)
	if err != nil {
		return 0, fmt.Errorf("metal: matmul peak probe: %w", err)
	}
	w, err := alloc(bridge.BF16, side, side)
	if err != nil {
		return 0, fmt.Errorf("metal: matmul peak probe: %w", err)
	}
	out, err := alloc(bridge.F32, side, side)
	if err != nil {
		return 0, fmt.Errorf("metal: matmul peak probe: %w", err)
	}
	// Finite values: activations 1 and 0.25, bf16 weights 2^-7 and 2^-5.
	xt, wt := tt(x), tt(w)
	xb, wb := xt.contents(), wt.contents()
	for i := 0; i+4 <= len(xb); i += 4 {
		xb[i+2], xb[i+3] = 0x80, 0x3f-byte(i>>2&1)
	}
	for i := 0; i+2 <= len(wb); i += 2 {
		wb[i], wb[i+1] = 0x00, 0x3c+byte(i>>1&1)
	}
	meta := &bridge.StepMeta{NumTokens: 1, NumSeqs: 1, MaxQueryLen: 1, MaxSeqLen: 1, BlockSize: 16, NumDecodeTokens: 1,
		Positions: []int32{0}, SlotMapping: []int32{-1}, QueryStartLoc: []int32{0, 1}, SeqLens: []int32{1}}
	best := 0.0
	for pass := 0; pass <= passes; pass++ {
		start := time.Now()
		if err := b.BeginStep(meta, []int32{0}, false); err != nil {
			return 0, err
		}
		for range reps {
			b.MatMul(out, x, w, nil)
		}
		if _, err := b.EndStep(); err != nil {
			return 0, fmt.Errorf("metal: matmul peak probe: %w", err)
		}
		d := time.Since(start)
		if pass > 0 && d > 0 { // the first is the warm-up
			best = max(best, 2*float64(side)*float64(side)*float64(side)*float64(reps)/d.Seconds())
		}
	}
	return best, nil
}
