package metal

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/half"
)

// A NaN left in a cache slot no sequence uses (past a sequence's end in
// its last block, or a block no sequence holds) never reaches the output
// of the tiled prefill attention: its keys past the end are staged as
// zeros, where multiplying their zero probabilities by the slots' values
// gave NaN rows. The tiled kernel's output is finite and matches the
// per-token kernel's, which reads only a sequence's own keys, for every
// cache dtype: one sequence of 13 new tokens, one of 10 after 3 cached.
func TestPrefillIgnoresUnusedCacheSlots(t *testing.T) {
	const (
		heads, kvHeads, D, bs = 4, 2, 32, 8
		blocks                = 5 // the fifth is nobody's
	)
	for _, dt := range []bridge.DType{bridge.F32, bridge.F16, bridge.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			var outs [2][]float32
			for i, minQuery := range []int{8, -1} { // tiled, then per token
				be, err := New(emuDevice(t), Options{Tuning: Tuning{AttnPrefillMinQuery: minQuery, AttnPrefillHeads: 2, AttnPrefillKeys: 8}})
				if err != nil {
					t.Fatal(err)
				}
				outs[i] = runNaNPrefill(t, be, dt, heads, kvHeads, D, bs, blocks)
				be.Close()
			}
			for j, v := range outs[0] {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("tiled output %d is %v: an unused cache slot reached it", j, v)
				}
				if d := math.Abs(float64(v - outs[1][j])); d > 1e-5 {
					t.Fatalf("output %d: tiled %v, per token %v", j, v, outs[1][j])
				}
			}
		})
	}
}

// runNaNPrefill fills both caches with NaN but for the second sequence's
// three cached positions, runs one prefill step's attention and returns
// its output.
func runNaNPrefill(t *testing.T, be *Backend, dt bridge.DType, heads, kvHeads, D, bs, blocks int) []float32 {
	t.Helper()
	alloc := func(dt bridge.DType, shape ...int) *tensor {
		x, err := be.Alloc(dt, shape...)
		if err != nil {
			t.Fatal(err)
		}
		return tt(x)
	}
	kc, vc := alloc(dt, blocks, kvHeads, bs, D), alloc(dt, blocks, kvHeads, bs, D)
	put := func(b []byte, i int, v float32) {
		switch dt {
		case bridge.F32:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		case bridge.F16:
			binary.LittleEndian.PutUint16(b[2*i:], half.F16(v))
		case bridge.BF16:
			binary.LittleEndian.PutUint16(b[2*i:], half.BF16(v))
		}
	}
	nan := float32(math.NaN())
	for _, c := range []*tensor{kc, vc} {
		b := c.contents()
		for i := range c.n {
			put(b, i, nan)
		}
	}
	// Sequence 1 has 3 cached positions in its first block (block 2).
	for h := range kvHeads {
		for p := range 3 {
			for d := range D {
				i := ((2*kvHeads+h)*bs+p)*D + d
				put(kc.contents(), i, float32((p+d)%5)*0.25-0.5)
				put(vc.contents(), i, float32((p*3+d)%7)*0.125)
			}
		}
	}
	const T = 23 // 13 + 10 new tokens
	q, k, v, out := alloc(bridge.F32, T, heads*D), alloc(bridge.F32, T, kvHeads*D), alloc(bridge.F32, T, kvHeads*D), alloc(bridge.F32, T, heads*D)
	for i, x := range []*tensor{q, k, v} {
		b := x.contents()
		for j := range x.n {
			binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(float32((j*7+i*3)%11)*0.1-0.5))
		}
	}
	meta := &bridge.StepMeta{NumTokens: T, NumSeqs: 2, MaxQueryLen: 13, MaxSeqLen: 13, MaxBlocks: 2, BlockSize: bs,
		QueryStartLoc: []int32{0, 13, T}, SeqLens: []int32{13, 13}, BlockTable: []int32{0, 1, 2, 3}}
	for p := range 13 {
		meta.Positions = append(meta.Positions, int32(p))
		meta.SlotMapping = append(meta.SlotMapping, int32(p))
	}
	for p := 3; p < 13; p++ {
		meta.Positions = append(meta.Positions, int32(p))
		meta.SlotMapping = append(meta.SlotMapping, int32(2*bs+p))
	}
	tokens := make([]int32, T)
	if err := be.BeginStep(meta, tokens, false); err != nil {
		t.Fatal(err)
	}
	be.Attention(out, q, k, v, bridge.KVCache{K: kc, V: vc, BlockSize: bs}, heads, kvHeads, D, float32(1/math.Sqrt(float64(D))), 0)
	if _, err := be.EndStep(); err != nil {
		t.Fatal(err)
	}
	res := make([]float32, out.n)
	for i := range res {
		res[i] = math.Float32frombits(binary.LittleEndian.Uint32(out.contents()[4*i:]))
	}
	return res
}
