package metal

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/half"
)

// The matmul peak: prefill is compute-bound, so its roofline is the
// device's matmul throughput, measured in the same run as the cases (as the
// bandwidth is for decode) with the kernel prefill's projections run: the
// tiled simdgroup_matrix GEMM (kernels/metal/gemm.h) on the model's weight
// dtype.

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

// MeasureMatmulPeak implements bridge.MatmulPeakProber: the device's
// matmul throughput in FLOP/s with weights in dt (f32, f16 or bf16; other
// dtypes are measured as bf16): the best of several steps of reps square
// GEMMs (m = n = k) through the backend's own matmul, each step timed from
// its first encoding to its completion, after a warm-up step that builds
// the pipeline and touches the buffers.
func (b *Backend) MeasureMatmulPeak(dt bridge.DType) (float64, error) {
	if dt != bridge.F32 && dt != bridge.F16 {
		dt = bridge.BF16
	}
	side, reps, passes := b.peakShape()
	return b.matmulPeak(dt, side, reps, passes)
}

var _ bridge.MatmulPeakProber = (*Backend)(nil)

func (b *Backend) matmulPeak(dt bridge.DType, side, reps, passes int) (float64, error) {
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
	w, err := alloc(dt, side, side)
	if err != nil {
		return 0, fmt.Errorf("metal: matmul peak probe: %w", err)
	}
	out, err := alloc(bridge.F32, side, side)
	if err != nil {
		return 0, fmt.Errorf("metal: matmul peak probe: %w", err)
	}
	// Finite values: activations 1 and 0.25, weights 2^-7 and 2^-5.
	xb, wb := tt(x).contents(), tt(w).contents()
	for i := 0; i < side*side; i++ {
		binary.LittleEndian.PutUint32(xb[4*i:], math.Float32bits(1/float32(1+3*(i&1))))
		v := 1 / float32(int(128)>>(2*(i&1)))
		switch dt {
		case bridge.F32:
			binary.LittleEndian.PutUint32(wb[4*i:], math.Float32bits(v))
		case bridge.F16:
			binary.LittleEndian.PutUint16(wb[2*i:], half.F16(v))
		default:
			binary.LittleEndian.PutUint16(wb[2*i:], half.BF16(v))
		}
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
