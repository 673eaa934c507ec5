package metal_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// TestArgmaxPartitions holds argmax to the reference where a row is split
// over many threadgroups and merged (argmax_part, argmax_merge) and where it
// is one: ties across partitions and inside a float4 go to the lower index,
// a row of NaN or of -inf gives -1 (bridge.NoToken), rows whose width is no multiple of 4 take
// the scalar tail, and a long row takes at most ops.MetalArgmaxMaxParts
// partitions. The witness sees a 151,936-value row read in a few loads a
// simdgroup, not one threadgroup's 149 (docs/metal-kernels.md, "Argmax").
func TestArgmaxPartitions(t *testing.T) {
	tunings := []metal.Tuning{{}, {ArgmaxThreads: 32, ArgmaxPart: 1024}, {ArgmaxThreads: 1024, ArgmaxPart: -1}}
	shapes := []struct{ rows, n int }{{1, 151936}, {5, 4099}, {2, 5}, {1, 64*1024 + 3}}
	for _, tu := range tunings {
		be := newEmu(t, tu)
		for _, sh := range shapes {
			name := fmt.Sprintf("threads %d part %d, %dx%d", tu.ArgmaxThreads, tu.ArgmaxPart, sh.rows, sh.n)
			x := argmaxRows(sh.rows, sh.n, rand.New(rand.NewPCG(uint64(sh.n), 7)))
			got, st, err := runArgmax(be, x, sh.rows)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for r := range sh.rows {
				if want := kernels.Argmax(x[r*sh.n : (r+1)*sh.n]); int(got[r]) != want {
					t.Errorf("%s: row %d argmax %d, want %d", name, r, got[r], want)
				}
			}
			threads, part := tu.ArgmaxThreads, tu.ArgmaxPart
			if threads == 0 {
				threads, part = ops.MetalArgmaxThreads, ops.MetalArgmaxPart
			}
			size, parts := ops.MetalArgmaxParts(sh.n, part)
			if parts > ops.MetalArgmaxMaxParts {
				t.Errorf("%s: %d partitions", name, parts)
			}
			dispatches, loads := 1, (size+4*threads-1)/(4*threads) // float4 passes
			if sh.n%4 != 0 || size%4 != 0 {
				loads += 2 // a partition's head and tail off a 16-byte boundary
			}
			if parts > 1 {
				dispatches, loads = 2, loads+2 // the merge: a lane's float4 of values and uint4 of indices
			}
			if st.Dispatches != dispatches {
				t.Errorf("%s: %d dispatches, want %d", name, st.Dispatches, dispatches)
			}
			if st.CriticalLoads > int64(loads) {
				t.Errorf("%s: %d critical loads, want at most %d (%d partitions of %d)", name, st.CriticalLoads, loads, parts, size)
			}
			t.Logf("%s: %d partitions of %d, %d dispatches, %d critical loads", name, parts, size, st.Dispatches, st.CriticalLoads)
		}
	}
}

// argmaxRows fills rows of n with values that plant the cases: row 0 has
// its maximum twice, in two partitions and side by side in a float4; row 1
// is NaN but its maximum; row 2 is all NaN; row 3 all -inf; row 4 has its
// maximum last; the others are random.
func argmaxRows(rows, n int, r *rand.Rand) []float32 {
	x := make([]float32, rows*n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for row := range rows {
		xr := x[row*n : (row+1)*n]
		switch row {
		case 0:
			if n >= 8 {
				xr[n-6], xr[n-5], xr[n/3+1], xr[n/3+2] = 9, 9, 9, 9
			}
		case 1:
			for i := 1; i < n; i++ {
				if i != n/2 {
					xr[i] = float32(math.NaN())
				}
			}
		case 2:
			for i := range xr {
				xr[i] = float32(math.NaN())
			}
		case 3:
			for i := range xr {
				xr[i] = float32(math.Inf(-1))
			}
		case 4:
			xr[n-1] = 9
		}
	}
	return x
}

// runArgmax runs one step of Argmax over rows of x and returns its picks
// and the step's stats.
func runArgmax(be *metal.Backend, x []float32, rows int) ([]int32, bridge.StepStats, error) {
	data := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	logits, err := be.Weight(bridge.F32, []int{rows, len(x) / rows}, data)
	if err != nil {
		return nil, bridge.StepStats{}, err
	}
	defer be.Free(logits)
	out, err := be.Alloc(bridge.I32, rows)
	if err != nil {
		return nil, bridge.StepStats{}, err
	}
	defer be.Free(out)
	meta := &bridge.StepMeta{NumTokens: rows, NumSeqs: 1, MaxQueryLen: rows, MaxSeqLen: rows, Positions: make([]int32, rows),
		SlotMapping: make([]int32, rows), QueryStartLoc: []int32{0, int32(rows)}, SeqLens: []int32{int32(rows)},
		BlockTable: make([]int32, (rows+15)/16), MaxBlocks: (rows + 15) / 16, BlockSize: 16}
	if err := be.BeginStep(meta, make([]int32, rows), false); err != nil {
		return nil, bridge.StepStats{}, err
	}
	be.Argmax(out, logits)
	st, err := be.EndStep()
	if err != nil {
		return nil, st, err
	}
	got := make([]int32, rows)
	return got, st, be.ReadI32(out, got)
}
