//go:build linux

package cuda_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	. "github.com/mtlbench/mtlbench/bridge/cuda"
	"github.com/mtlbench/mtlbench/bridge/quanttest"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/runner/model"
)

// The packed formats the tensor-core kernels take (kernels/cuda/quant_mma.cu),
// with affine group sizes and scale dtypes that move a unit's group.
var qmmaSpecs = []quant.Spec{
	{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16},
	{Type: quant.Affine, Bits: 4, Group: 32, Scale: quant.F32},
	{Type: quant.Affine, Bits: 8, Group: 128, Scale: quant.F16},
	// What GGUF's Q4_1 and Q5_K run as (quant.Transcoders).
	{Type: quant.Affine, Bits: 4, Group: 32, Scale: quant.F16},
	{Type: quant.Affine, Bits: 8, Group: 32, Scale: quant.F32},
	{Type: quant.Q8_0},
	{Type: quant.Q4_0},
	{Type: quant.Q4_K},
	{Type: quant.Q6_K},
	{Type: quant.Q2_K},
	// The IQ grid formats (iqSpecs).
	{Type: quant.IQ2_XXS}, {Type: quant.IQ2_XS}, {Type: quant.IQ2_S}, {Type: quant.IQ3_XXS}, {Type: quant.IQ3_S},
	{Type: quant.IQ1_S}, {Type: quant.IQ1_M},
}

// randomPacked draws a packed [rows][k] matrix whose K-quant scales vary
// from sub-block to sub-block (quant.Random gives them all one scale).
func randomPacked(r *rand.Rand, s quant.Spec, rows, k int, amp float32) *quant.Matrix {
	g := rows * s.Groups(k) * s.Scale.Size()
	var sc, bi []byte
	if s.Type == quant.Affine {
		sc, bi = make([]byte, g), make([]byte, g)
	}
	m := quant.Random(s, rows, k, amp, r, make([]byte, rows*s.RowBytes(k)), sc, bi)
	for blk := 0; blk < len(m.Data)/max(s.BlockBytes(), 1); blk++ {
		p := m.Data[blk*s.BlockBytes():]
		switch s.Type {
		case quant.Q4_K:
			for i := 4; i < 16; i++ {
				p[i] = byte(r.Uint32())
			}
		case quant.Q6_K:
			for i := 192; i < 208; i++ {
				p[i] = byte(int8(r.IntN(64) - 32))
			}
		}
	}
	return m
}

func uploadPacked(t *testing.T, b *Backend, m *quant.Matrix) bridge.Tensor {
	t.Helper()
	w, err := b.QuantWeight(m.Spec, []int{m.Rows, m.K}, m.Data, m.Scales, m.Biases)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free(w) })
	return w
}

// inStep runs fn inside a step of T tokens.
func inStep(t *testing.T, b *Backend, T int, fn func()) bridge.StepStats {
	t.Helper()
	meta := &bridge.StepMeta{NumTokens: T, NumSeqs: 1, MaxQueryLen: T, MaxSeqLen: T, Positions: make([]int32, T),
		SlotMapping: make([]int32, T), QueryStartLoc: []int32{0, int32(T)}, SeqLens: []int32{int32(T)},
		BlockTable: make([]int32, (T+15)/16), MaxBlocks: (T + 15) / 16, BlockSize: 16}
	if err := b.BeginStep(meta, make([]int32, T), false); err != nil {
		t.Fatal(err)
	}
	fn()
	st, err := b.EndStep()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func readF32(t *testing.T, b *Backend, x bridge.Tensor, n int) []float32 {
	t.Helper()
	got := make([]float32, n)
	if err := b.Read(x, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// Packed matmuls of many rows (prefill) on tensor cores equal the
// reference on the same packed bytes within the bf16 operand tolerance, at
// row counts and matrix heights off the 128-row tiles, with a bias.
func TestQuantMMAMatchesReference(t *testing.T) {
	b := gpu(t)
	t.Cleanup(b.SetPackedMMA(true))
	r := rand.New(rand.NewPCG(5, 9))
	for _, s := range qmmaSpecs {
		for _, c := range []struct{ m, n, k int }{{128, 256, 512}, {300, 200, 768}, {1000, 72, 256}} {
			w := randomPacked(r, s, c.n, c.k, 0.1)
			wt := uploadPacked(t, b, w)
			x := randn(r, c.m*c.k, 1)
			bias := randn(r, c.n, 0.5)
			want := make([]float32, c.m*c.n)
			quant.MatMul(want, bf16Round(x), bias, w, c.m)
			xt := upload(t, b, bridge.F32, f32Bytes(x), c.m, c.k)
			bt := upload(t, b, bridge.F32, f32Bytes(bias), c.n)
			out := upload(t, b, bridge.F32, make([]byte, 4*c.m*c.n), c.m, c.n)
			inStep(t, b, c.m, func() { b.QMatMul(out, xt, wt, bt) })
			e := relErr(readF32(t, b, out, c.m*c.n), want)
			t.Logf("%v, m=%d n=%d k=%d: relative error %.2g", s, c.m, c.n, c.k, e)
			if e > bf16RelTol {
				t.Errorf("%v, m=%d n=%d k=%d: relative error %.3g > %g", s, c.m, c.n, c.k, e, bf16RelTol)
			}
		}
	}
}

// A packed MoE block of many tokens (grouped GEMMs on tensor cores) equals
// the reference on the same packed experts within the bf16 operand
// tolerance; the router keeps f32 activations, so both pick the same
// experts.
func TestQuantMoEGroupedMatchesReference(t *testing.T) {
	b := gpu(t)
	t.Cleanup(b.SetPackedMMA(true))
	const E, K, H, I = 16, 4, 256, 512
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range qmmaSpecs {
		gate, up, down := randomPacked(r, s, E*I, H, 0.1), randomPacked(r, s, E*I, H, 0.1), randomPacked(r, s, E*H, I, 0.1)
		router := randn(r, E*H, 0.5)
		w := &bridge.MoEWeights{Router: upload(t, b, bridge.F32, f32Bytes(router), E, H), TopK: K, NormTopK: true, Hidden: H, Inter: I}
		uploadExperts(t, b, w, gate, up, down, E)
		for _, T := range []int{128, 333} {
			x := randn(r, T*H, 1)
			want := make([]float32, T*H)
			quant.MoE(want, x, nil, router, quant.Experts{Gate: gate, Up: up, Down: down, Count: E}, K, true, H, I)
			xt := upload(t, b, bridge.F32, f32Bytes(x), T, H)
			out := upload(t, b, bridge.F32, make([]byte, 4*T*H), T, H)
			st := inStep(t, b, T, func() { b.QMoE(out, xt, w, bridge.MoEParams{Strategy: bridge.MoEGrouped}) })
			e := relErr(readF32(t, b, out, T*H), want)
			t.Logf("%v, %d tokens, %d experts top-%d: relative error %.2g, experts touched %v", s, T, E, K, e, st.ExpertsTouched)
			if e > bf16RelTol {
				t.Errorf("%v, %d tokens: relative error %.3g > %g", s, T, e, bf16RelTol)
			}
		}
	}
}

// A packed MoE block of a few tokens on the integer affine kernels (the
// router GEMV at 8 bits, qamoe_gate_up, qamoe_down_sum) equals the
// reference on the same packed experts. The shapes cross qamoe_down_sum's
// staging: a token's k rows of h (k·I values) fit in one stage, or take
// two or four chunks whose bounds fall inside an expert's row (Mixtral's
// down projection is 2·14336). One router of 128 experts has its rows in
// equal pairs, so a single token's routing (in qamoe_gate_up)
// breaks every tie, to the lower index.
func TestPackedMoEDecodeMatchesReference(t *testing.T) {
	b := gpu(t)
	r := rand.New(rand.NewPCG(11, 12))
	router8 := quant.Spec{Type: quant.Affine, Bits: 8, Group: 64, Scale: quant.BF16}
	ran := map[int]bool{}
	for _, c := range []struct {
		s          quant.Spec
		E, K, H, I int
		tied       bool // router rows in equal pairs: every logit tied with its neighbour's
	}{
		{quant.Spec{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16}, 8, 2, 256, 512, false},
		{quant.Spec{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16}, 128, 8, 256, 256, true},
		{quant.Spec{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16}, 8, 2, 256, 4608, false},
		{quant.Spec{Type: quant.Affine, Bits: 8, Group: 32, Scale: quant.F32}, 16, 4, 192, 2112, false},
		{quant.Spec{Type: quant.Affine, Bits: 4, Group: 128, Scale: quant.F16}, 4, 2, 128, 14336, false},
	} {
		gate, up, down := randomPacked(r, c.s, c.E*c.I, c.H, 0.1), randomPacked(r, c.s, c.E*c.I, c.H, 0.1), randomPacked(r, c.s, c.E*c.H, c.I, 0.05)
		router := randomPacked(r, router8, c.E, c.H, 0.5)
		if c.tied {
			// Ties go to the lower index, as torch.topk's do.
			rb, sb := router8.RowBytes(c.H), router8.Groups(c.H)*router8.Scale.Size()
			for e := 1; e < c.E; e += 2 {
				copy(router.Data[e*rb:(e+1)*rb], router.Data[(e-1)*rb:e*rb])
				copy(router.Scales[e*sb:(e+1)*sb], router.Scales[(e-1)*sb:e*sb])
				copy(router.Biases[e*sb:(e+1)*sb], router.Biases[(e-1)*sb:e*sb])
			}
		}
		w := &bridge.MoEWeights{Router: uploadPacked(t, b, router), TopK: c.K, NormTopK: true, Hidden: c.H, Inter: c.I}
		for e := 0; e < c.E; e++ {
			for _, set := range []struct {
				m   *quant.Matrix
				dst *[]bridge.Tensor
			}{{gate, &w.Gate}, {up, &w.Up}, {down, &w.Down}} {
				*set.dst = append(*set.dst, uploadPacked(t, b, set.m.Expert(e, c.E)))
			}
		}
		// The GPU's own SMs (0), and one: the row rule then takes more gate
		// and up rows a warp, so both qamoe_gate_up variants run.
		for _, sms := range []int{0, 1} {
			for _, T := range []int{1, 3} {
				x := randn(r, T*c.H, 1)
				want := make([]float32, T*c.H)
				quant.MoE(want, x, router, nil, quant.Experts{Gate: gate, Up: up, Down: down, Count: c.E}, c.K, true, c.H, c.I)
				xt := upload(t, b, bridge.F32, f32Bytes(x), T, c.H)
				out := upload(t, b, bridge.F32, make([]byte, 4*T*c.H), T, c.H)
				restore := func() {}
				if sms > 0 {
					restore = b.SetSMs(sms)
				}
				rows := b.QAMoERows(T, c.K, c.I)
				ran[rows] = true
				inStep(t, b, T, func() { b.QMoE(out, xt, w, bridge.MoEParams{}) })
				restore()
				e := relErr(readF32(t, b, out, T*c.H), want)
				t.Logf("%v, %d experts top-%d, %d -> %d, %d tokens, %d SMs (%d gate/up rows a warp): relative error %.2g",
					c.s, c.E, c.K, c.H, c.I, T, sms, rows, e)
				if e > 1e-4 {
					t.Errorf("%v, %d -> %d (k·I = %d), %d tokens, %d rows a warp: relative error %.3g > 1e-4",
						c.s, c.H, c.I, c.K*c.I, T, rows, e)
				}
			}
		}
	}
	if !ran[2] || !ran[3] {
		t.Errorf("qamoe_gate_up ran with %v gate/up rows a warp, want 2 and 3", ran)
	}
}

// Every rows-a-warp variant of the fused packed gate/up GEMV (qagemv_gu
// with SwiGLU) gives the unfused GEMVs' logits: the SMs qaPassRows counts
// steer it through 1, 2 and 3 rows for TinyLlama's 5632 (132 SMs: 3).
func TestGateUpRowsMatchUnfused(t *testing.T) {
	gpu(t)
	plain := openWith(t, func(o *Options) { o.NoFuse = true })
	for _, c := range []struct{ sms, rows int }{{132, 3}, {200, 2}, {400, 1}} {
		t.Run(fmt.Sprintf("%d rows", c.rows), func(t *testing.T) {
			b := openWith(t, func(*Options) {})
			b.SetSMs(c.sms)
			if got := b.QAGateUpRows(5632, 2048); got != c.rows {
				t.Fatalf("%d SMs: %d gate/up rows a warp, want %d", c.sms, got, c.rows)
			}
			fewerLaunches(t, "fused", b, "unfused", plain, []launchCase{{"tinyllama-1.1b@q4", 2, 3, 32000, 1}})
		})
	}
}

// A packed model's prompt logits from one prefill step (tensor-core
// kernels: q/k/v, gate and up with SwiGLU, the output projections) equal
// those of token-by-token decode (the f32-activation GEMVs) within the
// bf16 operand tolerance.
func TestQuantPrefillMatchesTokenByToken(t *testing.T) {
	b := gpu(t)
	t.Cleanup(b.SetPackedMMA(true))
	for _, q := range []string{"q4", "q4_k_m"} {
		cfg, src, err := model.Open(model.Spec{Model: "tinyllama-1.1b", Layers: 2, Seed: 3, Quant: q})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		prefillVsDecode(t, b, "tinyllama-1.1b "+q, cfg, src, bridge.BF16)
	}
}

// TestPackedGEMVMatchesReference: bridge/quanttest's packed GEMVs, the
// integer affine kernels for every group size and scale type
// (quant_int.cu's QA_SDT and group shift) and quant.cu's GGUF ones, at a
// decode row and five rows staged in chunks.
func TestPackedGEMVMatchesReference(t *testing.T) {
	quanttest.GEMV(t, gpu(t), 1e-5)
}

// TestHeldTwice: weights handed out twice for the same host bytes, as two
// builds over one cached checkpoint get them, outlive the first hand-out's
// Free (bridge/quanttest).
func TestHeldTwice(t *testing.T) {
	quanttest.HeldTwice(t, gpu(t), 1e-5)
}

// TestBiasedFusions: bridge/quanttest's biased fusion cases (a norm folded
// into biased GEMVs, biased GEMVs of one input with bias on all, some or
// one, biased gate/up before SwiGLU, a biased GEMV taking the residual add
// or the GELU), float and packed weights, fused and unfused, against the
// reference, within 1e-4: at most 8 rows every matmul runs on the GEMV
// kernels, over f32 activations (gemvMaxM). A bias must cost no launch
// (gate/up with their biases take SwiGLU in; a biased affine GEMV adds into
// the residual); fewer launches fused than unfused are not held, since
// CUDA folds norms into single-token GEMVs only.
func TestBiasedFusions(t *testing.T) {
	quanttest.BiasedFusions(t, gpu(t), 1e-4, false)
}

func TestShortBias(t *testing.T) {
	quanttest.ShortBias(t, gpu(t))
}

// uploadExperts puts each of E stacked experts' gate, up and down
// projections on the GPU as w's expert tensors.
func uploadExperts(t *testing.T, b *Backend, w *bridge.MoEWeights, gate, up, down *quant.Matrix, E int) {
	t.Helper()
	for e := 0; e < E; e++ {
		w.Gate = append(w.Gate, uploadPacked(t, b, gate.Expert(e, E)))
		w.Up = append(w.Up, uploadPacked(t, b, up.Expert(e, E)))
		w.Down = append(w.Down, uploadPacked(t, b, down.Expert(e, E)))
	}
}

// TestPackedGEMVArgmax: the LM head's packed GEMV and the argmax after it, through the
// fusion table on the GPU: quant_int.cu folds the argmax into the GEMV (bridge/quanttest).
func TestPackedGEMVArgmax(t *testing.T) {
	quanttest.GEMVArgmax(t, gpu(t))
}

// Free of a packed matrix gives its parts' device memory back: a kernel
// case's packed weights, freed as the case closed, were held until the
// backend closed. The parts are checked, not the driver's free memory: a
// part below arenaMax is a piece of an arena chunk, whose memory goes back
// only with the chunk's last piece.
func TestPackedMatrixFreed(t *testing.T) {
	b := gpu(t)
	r := rand.New(rand.NewPCG(5, 6))
	s := quant.Spec{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16}
	m := randomPacked(r, s, 8192, 8192, 0.1) // 32 MiB of values (a block of its own), 2 MiB each of scales and biases (arena pieces)
	w, err := b.QuantWeight(m.Spec, []int{m.Rows, m.K}, m.Data, m.Scales, m.Biases)
	if err != nil {
		t.Fatal(err)
	}
	parts := b.PackedParts(w)
	pieces := map[any]int{} // a chunk's pieces among the parts
	liveBefore := map[any]int{}
	for _, p := range parts {
		if p.Chunk != nil {
			pieces[p.Chunk]++
			liveBefore[p.Chunk] = p.Live
		}
	}
	if len(parts) != 3 || parts[0].Chunk != nil || len(pieces) == 0 {
		t.Fatalf("want the values in a block of their own (at least %d bytes) and the scales and biases in an arena chunk: %+v", ArenaMax, parts)
	}
	b.Free(w)
	y, err := b.Alloc(bridge.F32, 1) // frees what was released, as TestPoolGivesWayToOtherSizes does
	if err != nil {
		t.Fatal(err)
	}
	b.Free(y)
	for _, p := range b.PackedParts(w) {
		switch {
		case !p.Released:
			t.Errorf("%s: not released by Free", p.Name)
		case p.Held:
			t.Errorf("%s: a block of its own, still held once freed", p.Name)
		case p.Chunk != nil && p.Live != liveBefore[p.Chunk]-pieces[p.Chunk]:
			t.Errorf("%s: its arena chunk has %d live pieces once the matrix was freed, want %d", p.Name, p.Live, liveBefore[p.Chunk]-pieces[p.Chunk])
		}
	}
	if b.WeightCached(bridge.Packed, m.Data) {
		t.Error("the freed values are still in the weight cache")
	}
}

// TestLongContextRoPE: RoPE at the positions Qwen3's yarn runs to, past its
// original context and its max_position_embeddings, against the reference
// with the yarn frequencies (bridge/quanttest).
func TestLongContextRoPE(t *testing.T) {
	quanttest.LongContextRoPE(t, gpu(t), 1e-5)
}

// TestLongContextRoPEAttention: RoPE and the decode attention after it,
// fused where the backend folds RoPE into the attention, at the positions
// Qwen3's yarn runs to, against the reference (bridge/quanttest).
func TestLongContextRoPEAttention(t *testing.T) {
	quanttest.LongContextRoPEAttention(t, gpu(t), 1e-5)
}
