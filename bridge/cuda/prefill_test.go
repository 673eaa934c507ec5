//go:build linux

package cuda_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	. "github.com/mtlbench/mtlbench/bridge/cuda"
	"github.com/mtlbench/mtlbench/bridge/half"
	"github.com/mtlbench/mtlbench/bridge/quanttest"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/engine/enginetest"
	"github.com/mtlbench/mtlbench/runner/model"
)

// The tensor-core prefill kernels round their operands to bf16 and
// accumulate in f32: their error against the float reference, as
// ‖out − ref‖ / ‖ref‖, is that of bf16 operands (METHOD: 1e-3 to 1e-2).
const bf16RelTol = 1e-2

func f32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// halfBytes encodes x in a half type (enc: half.BF16 or half.F16).
func halfBytes(x []float32, enc func(float32) uint16) []byte {
	b := make([]byte, 2*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint16(b[2*i:], enc(v))
	}
	return b
}

// halfRound returns x rounded to a half type and back: weights the
// reference and the GPU see alike.
func halfRound(x []float32, enc func(float32) uint16, dec func(uint16) float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = dec(enc(v))
	}
	return out
}

func bf16Bytes(x []float32) []byte    { return halfBytes(x, half.BF16) }
func bf16Round(x []float32) []float32 { return halfRound(x, half.BF16, half.BF16ToFloat) }
func f16Bytes(x []float32) []byte     { return halfBytes(x, half.F16) }
func f16Round(x []float32) []float32  { return halfRound(x, half.F16, half.F16ToFloat) }

func randn(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	return x
}

var relErr = quanttest.RelErr

func upload(t *testing.T, be bridge.Backend, dt bridge.DType, data []byte, shape ...int) bridge.Tensor {
	t.Helper()
	x, err := be.Weight(dt, shape, data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Free(x) })
	return x
}

// Attention over the paged cache against kernels.PagedAttention, with the
// cache in each dtype the backend keeps it in (f32, f16, bf16): prefill on
// tensor cores with sequences whose new tokens cross the kernel's 64-row
// tiles and the cache's 16-slot blocks (1, 15, 16, 17, 300 and 1000
// tokens), some after cached context, GQA groups of 4 and 8, head sizes 64
// and 128; steps too small for tensor cores and decode steps, whose
// contexts cross blocks and the split-K partitions. The cache slots of the
// new tokens hold their keys and values after the step, rounded to the
// cache's dtype, and every output element is written (the output starts as
// NaN). The reference reads the same rounded cache, so a half cache costs
// no tolerance: the f32 kernels stay within 1e-5, tensor cores within
// bf16RelTol.
func TestFlashAttentionMatchesReference(t *testing.T) {
	b := gpu(t)
	for _, c := range []attnCase{
		{16, 2, 128, []int{1000, 17, 1, 300}, []int{0, 40, 500, 129}, bf16RelTol},
		{8, 2, 64, []int{15, 16, 17, 300, 1, 64}, []int{0, 0, 3, 0, 1999, 77}, bf16RelTol},
		// Fewer tokens than tensor cores take (attention.cu), prefill
		// mixed with decode rows.
		{8, 2, 64, []int{15, 1, 17, 2}, []int{0, 40, 300, 1}, 1e-5},
		// Decode steps (f32 kernels): one token, and long contexts split in
		// many partitions (decodeSplit), one of them a position past a
		// partition's and a block's end; GQA groups of 16 (attention.cu's
		// decode kernel) and head size 96.
		{16, 2, 128, []int{1}, nil, 1e-5},
		{32, 4, 128, []int{1, 1, 1}, []int{16383, 5000, 4128}, 1e-5},
		{16, 1, 64, []int{1, 1}, []int{700, 33}, 1e-5},
		{8, 2, 96, []int{1, 1}, []int{257, 31}, 1e-5},
	} {
		for _, kvdt := range KVDTypes {
			t.Run(fmt.Sprintf("%d-%d-%d-%v/%v", c.heads, c.kvHeads, c.headDim, c.queries, kvdt), func(t *testing.T) {
				checkAttention(t, b, kvdt, c)
			})
		}
	}
}

// Decode steps over a half cache on tensor cores (paged_decode_mma) and on
// CUDA cores (paged_decode), each against the reference: GQA groups of 1,
// 4, 7 and 8, head sizes 64 and 128, contexts that end inside and at the
// end of a warp's 16 positions and of a partition, whole contexts of up to
// 256 positions in one block of 16 warps, and long ones split in many
// partitions; the step's token lands in each kind of partition. The
// tensor cores take q and the probabilities in several half parts, so they
// are held to the f32 kernels' 1e-5.
func TestDecodeMMAMatchesReference(t *testing.T) {
	b := gpu(t)
	for _, c := range []attnCase{
		{32, 4, 128, []int{1, 1, 1, 1}, []int{16383, 5000, 4128, 0}, 1e-5},
		{8, 2, 64, []int{1, 1, 1, 1, 1}, []int{15, 16, 17, 127, 2000}, 1e-5},
		{14, 2, 64, []int{1, 1, 1}, []int{31, 32, 33}, 1e-5},
		{4, 4, 128, []int{1, 1}, []int{255, 4097}, 1e-5},
		{8, 2, 64, []int{1, 1, 1, 1}, []int{15, 128, 200, 255}, 1e-5},
		{32, 4, 128, []int{1, 1}, []int{150, 191}, 1e-5},
		{14, 2, 64, []int{1, 1}, []int{95, 140}, 1e-5},
	} {
		for _, kvdt := range []bridge.DType{bridge.BF16, bridge.F16} {
			for _, mma := range []bool{true, false} {
				kernel := "paged_decode"
				if mma {
					kernel = "paged_decode_mma"
				}
				t.Run(fmt.Sprintf("%s/%d-%d-%d-%v/%v", kernel, c.heads, c.kvHeads, c.headDim, c.cached, kvdt), func(t *testing.T) {
					defer b.SetNoDecodeMMA(!mma)()
					maxLen := 0
					for _, n := range c.cached {
						maxLen = max(maxLen, n+1)
					}
					if got := b.DecodeKernel(kvdt, len(c.queries), maxLen, c.heads, c.kvHeads, c.headDim); got != kernel {
						t.Fatalf("decode runs %s, want %s", got, kernel)
					}
					checkAttention(t, b, kvdt, c)
				})
			}
		}
	}
}

// Sliding-window attention against kernels.PagedAttention with the same
// window, on every kernel: prefill on tensor cores (flash.cu: key tiles
// before a block's window skipped, rows whose window starts inside a tile
// masked), small prefill and GQA groups of 16 (attention.cu), decode on
// CUDA cores and tensor cores (decode.cu), the split-K partitions of
// these counted from each token's window start (launched over the window,
// not the context; tokens whose context is shorter take fewer) and merged
// in one level and in two, with windows shorter than a block, of several
// partitions, equal to a sequence and longer.
func TestAttentionWindowMatchesReference(t *testing.T) {
	b := gpu(t)
	for _, c := range []struct {
		attnCase
		window int
		mma    bool // decode on tensor cores where they apply
		merge  int  // decodeMergeGroup; 0: the default
	}{
		{attnCase{16, 2, 128, []int{1000, 17, 1, 300}, []int{0, 40, 500, 129}, bf16RelTol}, 100, true, 0},
		{attnCase{8, 2, 64, []int{15, 16, 17, 300, 1, 64}, []int{0, 0, 3, 0, 1999, 77}, bf16RelTol}, 7, true, 0},
		{attnCase{8, 2, 64, []int{300, 70}, []int{0, 10}, bf16RelTol}, 64, true, 0},
		{attnCase{8, 2, 64, []int{15, 1, 17, 2}, []int{0, 40, 300, 1}, 1e-5}, 9, true, 0},
		{attnCase{8, 2, 64, []int{15, 1, 17, 2}, []int{0, 40, 1300, 1}, 1e-5}, 600, true, 0},
		{attnCase{16, 1, 64, []int{1, 1}, []int{700, 33}, 1e-5}, 40, true, 0},
		{attnCase{32, 4, 128, []int{1, 1, 1}, []int{16383, 5000, 4128}, 1e-5}, 4096, true, 0},
		{attnCase{32, 4, 128, []int{1, 1, 1}, []int{16383, 5000, 4128}, 1e-5}, 4096, false, 0},
		{attnCase{32, 4, 128, []int{1, 1, 1}, []int{16383, 5000, 4128}, 1e-5}, 4096, true, 2},
		{attnCase{32, 4, 128, []int{1, 1, 1}, []int{16383, 1000, 40}, 1e-5}, 4096, true, 2},
		{attnCase{32, 4, 128, []int{1, 1, 1}, []int{16383, 1000, 40}, 1e-5}, 4096, false, 0},
		{attnCase{8, 2, 64, []int{1, 1, 1, 1, 1}, []int{15, 16, 17, 127, 2000}, 1e-5}, 16, true, 0},
		{attnCase{8, 2, 64, []int{1, 1, 1, 1, 1}, []int{15, 16, 17, 127, 2000}, 1e-5}, 16, false, 2},
		{attnCase{14, 2, 64, []int{1, 1, 1}, []int{31, 32, 33}, 1e-5}, 33, true, 0},
		{attnCase{8, 2, 96, []int{1, 1}, []int{257, 31}, 1e-5}, 1, true, 0},
		{attnCase{8, 2, 64, []int{20, 1}, []int{0, 30}, 1e-5}, 5000, true, 0},
	} {
		for _, kvdt := range KVDTypes {
			t.Run(fmt.Sprintf("%d-%d-%d-%v-%v-w%d-mma%v-m%d/%v", c.heads, c.kvHeads, c.headDim, c.queries, c.cached, c.window, c.mma, c.merge, kvdt), func(t *testing.T) {
				defer b.SetNoDecodeMMA(!c.mma)()
				if c.merge > 0 {
					defer SetDecodeMergeGroup(c.merge)()
				}
				checkWindowAttention(t, b, kvdt, c.attnCase, c.window)
			})
		}
	}
}

// Decode steps whose partitions merge in two levels with groups of 2 (16
// by default): most groups of two, last groups of one, a second level of
// up to 64 groups, for every cache dtype.
func TestDecodeMergeGroups(t *testing.T) {
	b := gpu(t)
	defer SetDecodeMergeGroup(2)()
	for _, c := range []attnCase{
		{32, 4, 128, []int{1, 1, 1}, []int{16383, 5000, 4128}, 1e-5},
		{16, 1, 64, []int{1, 1}, []int{700, 33}, 1e-5},
		{8, 2, 96, []int{1, 1}, []int{257, 31}, 1e-5},
	} {
		for _, kvdt := range KVDTypes {
			t.Run(fmt.Sprintf("%d-%d-%d-%v/%v", c.heads, c.kvHeads, c.headDim, c.cached, kvdt), func(t *testing.T) {
				checkAttention(t, b, kvdt, c)
			})
		}
	}
}

// kvRound returns x as a cache of dtype dt stores it, and its bytes.
func kvRound(dt bridge.DType, x []float32) ([]float32, []byte) {
	out := make([]float32, len(x))
	switch dt {
	case bridge.BF16:
		for i, v := range x {
			out[i] = half.BF16ToFloat(half.BF16(v))
		}
		return out, bf16Bytes(x)
	case bridge.F16:
		b := make([]byte, 2*len(x))
		for i, v := range x {
			h := half.F16(v)
			out[i] = half.F16ToFloat(h)
			binary.LittleEndian.PutUint16(b[2*i:], h)
		}
		return out, b
	}
	copy(out, x)
	return out, f32Bytes(x)
}

type attnCase struct {
	heads, kvHeads, headDim int
	queries, cached         []int
	tol                     float64
}

// checkAttention runs one step of c's attention with a cache of kvdt.
func checkAttention(t *testing.T, b *Backend, kvdt bridge.DType, c attnCase) {
	checkWindowAttention(t, b, kvdt, c, 0)
}

// checkWindowAttention is checkAttention with a sliding window (0: none).
func checkWindowAttention(t *testing.T, b *Backend, kvdt bridge.DType, c attnCase, window int) {
	r := rand.New(rand.NewPCG(uint64(c.headDim), uint64(len(c.queries))))
	const bs = 16
	S := len(c.queries)
	cached := c.cached
	if cached == nil {
		cached = make([]int, S)
	}
	qsl := []int32{0}
	var seqLens, positions, slots []int32
	maxQ, maxLen, maxBlocks := 0, 0, 0
	for s := range c.queries {
		qsl = append(qsl, qsl[s]+int32(c.queries[s]))
		n := cached[s] + c.queries[s]
		seqLens = append(seqLens, int32(n))
		maxQ, maxLen = max(maxQ, c.queries[s]), max(maxLen, n)
		maxBlocks = max(maxBlocks, (n+bs-1)/bs)
	}
	// Each sequence's blocks, shuffled across the cache.
	total := 0
	for _, n := range seqLens {
		total += (int(n) + bs - 1) / bs
	}
	perm := r.Perm(total + 3)
	table := make([]int32, S*maxBlocks)
	next := 0
	for s, n := range seqLens {
		for j := 0; j < (int(n)+bs-1)/bs; j++ {
			table[s*maxBlocks+j] = int32(perm[next])
			next++
		}
	}
	for s := range c.queries {
		for i := 0; i < c.queries[s]; i++ {
			p := cached[s] + i
			positions = append(positions, int32(p))
			slots = append(slots, table[s*maxBlocks+p/bs]*bs+int32(p%bs))
		}
	}
	T := len(positions)
	blocks := total + 3
	kvw := c.kvHeads * c.headDim
	q := randn(r, T*c.heads*c.headDim, 1)
	k := randn(r, T*kvw, 1)
	v := randn(r, T*kvw, 1)
	// The cached context (and garbage elsewhere), as the cache holds it;
	// the new keys and values are stored rounded alike.
	kc, kcBytes := kvRound(kvdt, randn(r, blocks*kvw*bs, 1))
	vc, vcBytes := kvRound(kvdt, randn(r, blocks*kvw*bs, 1))
	layout := kernels.PagedLayout{BlockSize: bs, KVHeads: c.kvHeads, HeadDim: c.headDim}
	wantK, wantV := append([]float32(nil), kc...), append([]float32(nil), vc...)
	kr, _ := kvRound(kvdt, k)
	vr, _ := kvRound(kvdt, v)
	kernels.KVWrite(wantK, wantV, kr, vr, slots, layout)
	scale := float32(1 / math.Sqrt(float64(c.headDim)))
	want := make([]float32, T*c.heads*c.headDim)
	kernels.PagedAttention(want, q, wantK, wantV, kernels.AttnBatch{QueryStartLoc: qsl, SeqLens: seqLens, BlockTable: table,
		MaxBlocks: maxBlocks}, c.heads, layout, scale, window)

	nan := make([]float32, len(want))
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	out := upload(t, b, bridge.F32, f32Bytes(nan), T, c.heads*c.headDim)
	qt := upload(t, b, bridge.F32, f32Bytes(q), T, c.heads*c.headDim)
	kt := upload(t, b, bridge.F32, f32Bytes(k), T, kvw)
	vt := upload(t, b, bridge.F32, f32Bytes(v), T, kvw)
	kct := upload(t, b, kvdt, kcBytes, blocks, c.kvHeads, bs, c.headDim)
	vct := upload(t, b, kvdt, vcBytes, blocks, c.kvHeads, bs, c.headDim)
	meta := &bridge.StepMeta{NumTokens: T, NumSeqs: S, MaxQueryLen: maxQ, MaxSeqLen: maxLen, Positions: positions,
		SlotMapping: slots, QueryStartLoc: qsl, SeqLens: seqLens, BlockTable: table, MaxBlocks: maxBlocks, BlockSize: bs}
	for _, ql := range c.queries {
		if ql == 1 {
			meta.NumDecodeTokens++
		}
	}
	if err := b.BeginStep(meta, make([]int32, T), false); err != nil {
		t.Fatal(err)
	}
	op := &bridge.AttentionOp{Out: out, Q: qt, K: kt, V: vt, Cache: bridge.KVCache{K: kct, V: vct, BlockSize: bs},
		Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.headDim, Scale: scale, Window: window, Operand: bridge.BF16}
	var run bridge.Runner
	run.Run(b, []bridge.Op{op}, true, false)
	if _, err := b.EndStep(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(want))
	gotK, gotV := make([]float32, len(kc)), make([]float32, len(vc))
	for _, rd := range []struct {
		x   bridge.Tensor
		dst []float32
	}{{out, got}, {kct, gotK}, {vct, gotV}} {
		if err := b.Read(rd.x, rd.dst); err != nil {
			t.Fatal(err)
		}
	}
	e := relErr(got, want)
	t.Logf("%v cache, heads %d/%d, head size %d, queries %v after %v: relative error %.2g", kvdt, c.heads, c.kvHeads,
		c.headDim, c.queries, cached, e)
	if e > c.tol {
		t.Errorf("relative error %.3g > %g", e, c.tol)
	}
	if d := kernels.MaxAbsDiff(gotK, wantK) + kernels.MaxAbsDiff(gotV, wantV); d != 0 {
		t.Errorf("cache after the step differs from the reference's by %g", d)
	}
}

// The MoE block of a many-token step as a grouped GEMM on tensor cores
// against kernels.MoE (bf16-representable weights), at token counts that
// leave experts with ragged row tiles, and with fewer tokens than the
// tensor-core path takes (the f32 kernels then run, to 1e-4).
func TestMoEGroupedGEMMMatchesReference(t *testing.T) {
	b := gpu(t)
	const E, K, H, I = 16, 4, 256, 128
	r := rand.New(rand.NewPCG(7, 11))
	router := bf16Round(randn(r, E*H, 0.5))
	experts := make([]kernels.Expert, E)
	w := &bridge.MoEWeights{Router: upload(t, b, bridge.BF16, bf16Bytes(router), E, H), TopK: K, NormTopK: true, Hidden: H, Inter: I}
	for e := range experts {
		x := kernels.Expert{Gate: bf16Round(randn(r, I*H, 0.06)), Up: bf16Round(randn(r, I*H, 0.06)), Down: bf16Round(randn(r, H*I, 0.09))}
		experts[e] = x
		w.Gate = append(w.Gate, upload(t, b, bridge.BF16, bf16Bytes(x.Gate), I, H))
		w.Up = append(w.Up, upload(t, b, bridge.BF16, bf16Bytes(x.Up), I, H))
		w.Down = append(w.Down, upload(t, b, bridge.BF16, bf16Bytes(x.Down), H, I))
	}
	for _, c := range []struct {
		tokens int
		tol    float64
	}{{1000, bf16RelTol}, {129, bf16RelTol}, {300, bf16RelTol}, {40, 1e-4}} {
		T := c.tokens
		x := randn(r, T*H, 1)
		want := make([]float32, T*H)
		kernels.MoE(want, x, router, experts, K, true, H, I)
		nan := make([]float32, T*H)
		for i := range nan {
			nan[i] = float32(math.NaN())
		}
		xt := upload(t, b, bridge.F32, f32Bytes(x), T, H)
		out := upload(t, b, bridge.F32, f32Bytes(nan), T, H)
		meta := &bridge.StepMeta{NumTokens: T, NumSeqs: 1, MaxQueryLen: T, MaxSeqLen: T, Positions: make([]int32, T),
			SlotMapping: make([]int32, T), QueryStartLoc: []int32{0, int32(T)}, SeqLens: []int32{int32(T)},
			BlockTable: make([]int32, (T+15)/16), MaxBlocks: (T + 15) / 16, BlockSize: 16}
		if err := b.BeginStep(meta, make([]int32, T), false); err != nil {
			t.Fatal(err)
		}
		b.MoE(out, xt, w, bridge.MoEParams{Strategy: bridge.MoEGrouped})
		st, err := b.EndStep()
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, T*H)
		if err := b.Read(out, got); err != nil {
			t.Fatal(err)
		}
		e := relErr(got, want)
		t.Logf("%d tokens, %d experts top-%d: relative error %.2g, experts touched %v", T, E, K, e, st.ExpertsTouched)
		if e > c.tol {
			t.Errorf("%d tokens: relative error %.3g > %g", T, e, c.tol)
		}
		if len(st.ExpertsTouched) != 1 || st.ExpertsTouched[0] < 1 || st.ExpertsTouched[0] > E {
			t.Errorf("experts touched %v", st.ExpertsTouched)
		}
	}
}

// A prompt's logits from one prefill step equal those of the same prompt
// fed a token a step (decode steps, f32 kernels), within the bf16 operand
// tolerance, for prompts that cross the tiles (64 rows) and cache blocks
// (16 slots), on a bf16 dense model with the KV cache in each dtype. (A MoE model's logits are not
// comparable this way: an expert choice near a tie flips under any
// rounding difference, bf16 or not, and moves the logits by far more than
// the rounding; its kernels are checked op by op above.)
func TestPrefillMatchesTokenByToken(t *testing.T) {
	b := gpu(t)
	for _, preset := range []string{"tinyllama-1.1b"} {
		cfg, src, err := model.Open(model.Spec{Model: preset, Layers: 2, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		for _, kv := range KVDTypes {
			prefillVsDecode(t, b, preset, cfg, src, kv)
		}
	}
}

// prefillVsDecode compares one-step prefill logits with token-by-token
// decode on engines that keep the KV cache in kv.
func prefillVsDecode(t *testing.T, b *Backend, preset string, cfg *model.Config, src model.Source, kv bridge.DType) {
	run := enginetest.PrefillAndStep(t, b, cfg, src, engine.Options{TokenBudget: 2048, KVTokens: 2048, KVDType: kv.String()})
	for _, n := range enginetest.PromptLengths {
		whole, single := run(t, n)
		e := relErr(whole, single)
		t.Logf("%s, %v cache, %d-token prompt: one step against one token a step: relative error %.2g", preset, kv, n, e)
		if e > bf16RelTol {
			t.Errorf("%s, %v cache, %d tokens: relative error %.3g > %g", preset, kv, n, e, bf16RelTol)
		}
	}
}

// The decode split follows the context: no more partitions than chunks,
// at most four chunks a block and 256 partitions, about four blocks an SM
// where the context allows, and every position covered. Where the tensor
// cores take the step (mma), a context of up to 256 positions is one
// partition at any batch.
func TestDecodeSplitFollowsContext(t *testing.T) {
	for _, c := range []struct {
		ctx, groups, whole int
		chunks, nparts     int
	}{
		{128, 4, 0, 1, 4},     // batch 1, 4 KV heads: one chunk a block
		{128, 64, 0, 1, 4},    // batch 16
		{4096, 4, 0, 1, 128},  // about 4 blocks an SM on 132 SMs
		{4096, 64, 0, 4, 32},  // batch 16: four chunks a block, no fewer partitions
		{8192, 4, 0, 2, 128},  // 128 partitions of 2 chunks, not 64 of 4
		{16384, 4, 0, 4, 128}, // long context: four chunks a block
		{65536, 4, 0, 8, 256}, // longer: 256 partitions at most
		{32, 1, 0, 1, 1},
		{32, 4, 256, 1, 1},
		{128, 4, 256, 4, 1},
		{256, 4, 256, 8, 1},
		{256, 64, 256, 8, 1},
		{512, 4, 256, 1, 16}, // past a whole block: split as paged_decode's
		{4096, 64, 256, 4, 32},
	} {
		chunks, nparts := DecodeSplit(c.ctx, c.groups, 132, c.whole)
		if chunks != c.chunks || nparts != c.nparts || chunks*32*nparts < c.ctx {
			t.Errorf("context %d, %d groups, whole %d: %d chunks × %d partitions, want %d × %d", c.ctx, c.groups, c.whole, chunks, nparts, c.chunks, c.nparts)
		}
	}
}

// A whole short context takes the 256-position block only where a block
// may ask for its 139 KB (an H100's 227 KB); on a GPU of 99 KB a block
// (sm_86, sm_89) contexts of up to 128 positions are whole in the
// 128-position block and longer ones split, so every kernel it launches
// fits. A cache the tensor cores do not take keeps paged_decode's split.
func TestDecodeWholeFitsTheDevice(t *testing.T) {
	const h100, ada = 232448, 101376
	for _, c := range []struct {
		maxShared      int
		cache          bridge.DType
		maxSeqLen      int
		kernel         string
		threads        int
		chunks, nparts int
	}{
		{h100, bridge.BF16, 192, "paged_decode_mma_p256", 512, 8, 1},
		{h100, bridge.BF16, 100, "paged_decode_mma_p128", 256, 4, 1},
		{h100, bridge.BF16, 20, "paged_decode_mma_p32", 256, 1, 1},
		{h100, bridge.BF16, 300, "paged_decode_mma_p32", 256, 1, 16},
		{ada, bridge.BF16, 192, "paged_decode_mma_p32", 256, 1, 8},
		{ada, bridge.BF16, 100, "paged_decode_mma_p128", 256, 4, 1},
		{h100, bridge.F32, 192, "paged_decode", 256, 1, 8},
	} {
		kernel, threads, chunks, nparts := DecodeLaunchOn(132, c.maxShared, c.cache, 1, c.maxSeqLen, 32, 4, 64)
		if kernel != c.kernel || threads != c.threads || chunks != c.chunks || nparts != c.nparts {
			t.Errorf("%d bytes a block, %v cache, context %d: %s of %d threads, %d chunks × %d; want %s of %d, %d × %d",
				c.maxShared, c.cache, c.maxSeqLen, kernel, threads, chunks, nparts, c.kernel, c.threads, c.chunks, c.nparts)
		}
	}
}

// decodeMMAWhole's bound on paged_decode_mma's static shared memory holds
// for every variant, so no kernel it picks needs more than the device
// gives a block.
func TestDecodeMMAStaticShared(t *testing.T) {
	b := gpu(t)
	for _, name := range DecodeMMAKernels() {
		n, err := b.KernelStaticShared(name)
		if err != nil {
			t.Fatal(err)
		}
		if n > DecodeMMAStatic {
			t.Errorf("%s: %d bytes of static shared memory, more than the %d decodeMMAWhole allows for", name, n, DecodeMMAStatic)
		}
	}
}
