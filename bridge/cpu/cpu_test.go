package cpu

import (
	"fmt"
	"github.com/mtlbench/mtlbench/bridge/half"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/quanttest"
	"github.com/mtlbench/mtlbench/kernels"
)

func randF32(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

func f32T(v []float32, shape ...int) *tensor {
	t, _ := view(bridge.F32, shape, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)))
	return t
}

// weightT stores v in dt and returns the tensor plus v rounded to dt, the
// values the reference must see.
func weightT(dt bridge.DType, v []float32, shape ...int) (*tensor, []float32) {
	t, _ := alloc(dt, shape)
	rounded := make([]float32, len(v))
	switch dt {
	case bridge.F32:
		copy(t.f32, v)
		copy(rounded, v)
	case bridge.BF16:
		half.F32ToBF16(t.u16, v)
		half.BF16ToF32(rounded, t.u16)
	case bridge.F16:
		half.F32ToF16(t.u16, v)
		half.F16ToF32(rounded, t.u16)
	}
	return t, rounded
}

func TestMatMulAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for _, dt := range []bridge.DType{bridge.F32, bridge.F16, bridge.BF16} {
		for _, s := range [][3]int{{1, 1, 1}, {1, 100, 64}, {3, 17, 33}, {8, 64, 128}, {13, 50, 257}} {
			m, n, k := s[0], s[1], s[2]
			x := randF32(r, m*k)
			w, wr := weightT(dt, randF32(r, n*k), n, k)
			bias := randF32(r, n)
			got := make([]float32, m*n)
			want := make([]float32, m*n)
			New(Options{Threads: 3}).MatMul(f32T(got, m, n), f32T(x, m, k), w, f32T(bias, n))
			kernels.MatMul(want, x, wr, bias, m, n, k)
			if d := kernels.MaxAbsDiff(got, want); d > 1e-4 {
				t.Errorf("%v m=%d n=%d k=%d: max error %g", dt, m, n, k, d)
			}
		}
	}
}

func TestNormsRoPEAndActivations(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	b := New(Options{Threads: 2})
	const rows, dim = 5, 96
	x, w := randF32(r, rows*dim), randF32(r, dim)
	got, want := make([]float32, rows*dim), make([]float32, rows*dim)
	b.RMSNorm(f32T(got, rows, dim), f32T(x, rows, dim), f32T(w, dim), 1e-6)
	kernels.RMSNorm(want, x, w, dim, 1e-6)
	if d := kernels.MaxAbsDiff(got, want); d > 1e-5 {
		t.Errorf("rms_norm: %g", d)
	}

	res, res2 := randF32(r, rows*dim), make([]float32, rows*dim)
	copy(res2, res)
	b.AddRMSNorm(f32T(got, rows, dim), f32T(res, rows, dim), f32T(x, rows, dim), f32T(w, dim), 1e-6)
	kernels.AddRMSNorm(want, res2, x, w, dim, 1e-6)
	if d := kernels.MaxAbsDiff(got, want) + kernels.MaxAbsDiff(res, res2); d > 1e-5 {
		t.Errorf("add_rms_norm: %g", d)
	}

	// RoPE with QK-norm at scattered positions.
	const heads, kvh, hd = 4, 2, 32
	pos := []int32{0, 1, 7, 300, 4095}
	q, k := randF32(r, len(pos)*heads*hd), randF32(r, len(pos)*kvh*hd)
	qn, kn := randF32(r, hd), randF32(r, hd)
	qr, kr := append([]float32(nil), q...), append([]float32(nil), k...)
	b.BeginStep(&bridge.StepMeta{NumTokens: len(pos), Positions: pos}, make([]int32, len(pos)), false)
	b.RoPE(f32T(q, len(pos), heads*hd), f32T(k, len(pos), kvh*hd), f32T(qn, hd), f32T(kn, hd), heads, kvh, hd, kernels.Rotary{Theta: 1e6}, 1e-6)
	kernels.RMSNorm(qr, qr, qn, hd, 1e-6)
	kernels.RMSNorm(kr, kr, kn, hd, 1e-6)
	kernels.RoPE(qr, pos, heads, hd, kernels.Rotary{Theta: 1e6})
	kernels.RoPE(kr, pos, kvh, hd, kernels.Rotary{Theta: 1e6})
	if d := kernels.MaxAbsDiff(q, qr) + kernels.MaxAbsDiff(k, kr); d > 1e-5 {
		t.Errorf("rope+qk_norm: %g", d)
	}
}

// The CPU attention over a ragged batch (a prefill chunk, decodes, a fresh
// prompt) equals the reference, for every GQA ratio and block size, and
// with sliding windows shorter than a block, across blocks, of the
// sequences' length and longer, with the cache in every dtype it keeps: a
// half-float cache stores the new keys and values rounded to nearest even
// and reads them exactly, so the reference fed the same rounded cache holds
// to the f32 tolerance.
func TestAttentionRaggedBatch(t *testing.T) {
	for _, dt := range []bridge.DType{bridge.F32, bridge.F16, bridge.BF16} {
		for _, c := range []struct{ heads, kv, dim, bs, window int }{
			{8, 8, 32, 16, 0}, {8, 2, 64, 8, 0}, {8, 1, 128, 32, 0}, {4, 4, 96, 16, 0},
			{8, 2, 64, 8, 3}, {8, 2, 64, 8, 13}, {8, 1, 32, 16, 1}, {4, 4, 32, 16, 41}, {4, 2, 32, 32, 100},
		} {
			t.Run(fmt.Sprintf("%v_h%d_kv%d_d%d_bs%d_w%d", dt, c.heads, c.kv, c.dim, c.bs, c.window), func(t *testing.T) {
				r := rand.New(rand.NewPCG(4, uint64(c.dim)))
				// (cached, new) tokens per sequence
				seqs := [][2]int{{0, 9}, {40, 1}, {15, 1}, {33, 5}, {0, 1}}
				l := kernels.PagedLayout{BlockSize: c.bs, KVHeads: c.kv, HeadDim: c.dim}
				maxBlocks := 0
				for _, s := range seqs {
					maxBlocks = max(maxBlocks, (s[0]+s[1]+c.bs-1)/c.bs)
				}
				nb := maxBlocks * len(seqs)
				perm := r.Perm(nb)
				n := nb * c.kv * c.bs * c.dim
				kct, kc2 := weightT(dt, randF32(r, n), n)
				vct, vc2 := weightT(dt, randF32(r, n), n)
				meta := quanttest.RaggedMeta(seqs, maxBlocks, c.bs, perm)
				T := meta.NumTokens
				q, k, v := randF32(r, T*c.heads*c.dim), randF32(r, T*c.kv*c.dim), randF32(r, T*c.kv*c.dim)
				b := New(Options{Threads: 2})
				b.BeginStep(meta, make([]int32, T), false)
				got := make([]float32, len(q))
				scale := float32(1 / math.Sqrt(float64(c.dim)))
				b.Attention(f32T(got, T, c.heads*c.dim), f32T(q, T, c.heads*c.dim), f32T(k, T, c.kv*c.dim), f32T(v, T, c.kv*c.dim),
					bridge.KVCache{K: kct, V: vct, BlockSize: c.bs}, c.heads, c.kv, c.dim, scale, c.window)
				if _, err := b.EndStep(); err != nil {
					t.Fatal(err)
				}
				_, kr := weightT(dt, k, len(k))
				_, vr := weightT(dt, v, len(v))
				kernels.KVWrite(kc2, vc2, kr, vr, meta.SlotMapping, l)
				want := make([]float32, len(q))
				kernels.PagedAttention(want, q, kc2, vc2, kernels.AttnBatch{QueryStartLoc: meta.QueryStartLoc, SeqLens: meta.SeqLens, BlockTable: meta.BlockTable, MaxBlocks: maxBlocks}, c.heads, l, scale, c.window)
				if d := kernels.MaxAbsDiff(got, want); d > 1e-5 {
					t.Errorf("max error %g", d)
				}
				kc, vc := make([]float32, n), make([]float32, n)
				if err := b.Read(kct, kc); err != nil {
					t.Fatal(err)
				}
				if err := b.Read(vct, vc); err != nil {
					t.Fatal(err)
				}
				if kernels.MaxAbsDiff(kc, kc2) != 0 || kernels.MaxAbsDiff(vc, vc2) != 0 {
					t.Error("KV write differs from the reference")
				}
			})
		}
	}
}

// A half-float cache takes 2 bytes a value, and an f16 or bf16 cache is
// all the backend keeps besides f32 (bridge.KVCacheDTypes); a cache of
// another dtype, or of keys and values unlike, fails the step naming both.
func TestAttentionCacheDTypes(t *testing.T) {
	b := New(Options{Threads: 1})
	if got := b.KVDTypes(); fmt.Sprint(got) != fmt.Sprint([]bridge.DType{bridge.F32, bridge.F16, bridge.BF16}) {
		t.Errorf("KVDTypes() = %v", got)
	}
	for _, dt := range []bridge.DType{bridge.F16, bridge.BF16} {
		c, err := b.Alloc(dt, 4, 2, 16, 8)
		if err != nil {
			t.Fatal(err)
		}
		if x := c.(*tensor); len(x.u16) != 4*2*16*8 || x.f32 != nil {
			t.Errorf("%v cache: %d 2-byte values, f32 %v", dt, len(x.u16), x.f32 != nil)
		}
	}
	meta := quanttest.RaggedMeta([][2]int{{0, 1}}, 1, 16, []int{0})
	for _, c := range []struct {
		k, v bridge.DType
		want string
	}{
		{bridge.F16, bridge.BF16, "cpu: attention: a KV cache of f16 keys and bf16 values (want f32, f16 or bf16, both alike)"},
		{bridge.I32, bridge.I32, "cpu: attention: a KV cache of i32 keys and i32 values (want f32, f16 or bf16, both alike)"},
	} {
		kc, _ := alloc(c.k, []int{1, 1, 16, 8})
		vc, _ := alloc(c.v, []int{1, 1, 16, 8})
		b.BeginStep(meta, make([]int32, 1), false)
		x := make([]float32, 8)
		b.Attention(f32T(x, 1, 8), f32T(x, 1, 8), f32T(x, 1, 8), f32T(x, 1, 8), bridge.KVCache{K: kc, V: vc, BlockSize: 16}, 1, 1, 8, 1, 0)
		if _, err := b.EndStep(); err == nil || err.Error() != c.want {
			t.Errorf("%v/%v cache: %v, want %q", c.k, c.v, err, c.want)
		}
	}
}

// Every dispatch strategy equals the token-by-token reference, also with
// experts no token routes to.
func TestMoEAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	const E, K, H, I = 16, 4, 64, 48
	router := randF32(r, E*H)
	var ex []kernels.Expert
	w := &bridge.MoEWeights{Router: f32T(router, E, H), TopK: K, NormTopK: true, Hidden: H, Inter: I}
	for e := 0; e < E; e++ {
		g, u, d := randF32(r, I*H), randF32(r, I*H), randF32(r, H*I)
		gt, gr := weightT(bridge.BF16, g, I, H)
		ut, ur := weightT(bridge.BF16, u, I, H)
		dt, dr := weightT(bridge.BF16, d, H, I)
		w.Gate, w.Up, w.Down = append(w.Gate, gt), append(w.Up, ut), append(w.Down, dt)
		ex = append(ex, kernels.Expert{Gate: gr, Up: ur, Down: dr})
	}
	for _, T := range []int{1, 3, 37} {
		x := randF32(r, T*H)
		want := make([]float32, T*H)
		kernels.MoE(want, x, router, ex, K, true, H, I)
		for _, p := range []bridge.MoEParams{{Strategy: bridge.MoELoop}, {Strategy: bridge.MoEGrouped}, {Strategy: bridge.MoEChunked, ChunkSize: 1}, {Strategy: bridge.MoEChunked, ChunkSize: 8}, {Strategy: bridge.MoEChunked, ChunkSize: 1000}} {
			b := New(Options{Threads: 2})
			b.BeginStep(&bridge.StepMeta{NumTokens: T}, make([]int32, T), false)
			got := make([]float32, T*H)
			b.MoE(f32T(got, T, H), f32T(x, T, H), w, p)
			st, err := b.EndStep()
			if err != nil {
				t.Fatal(err)
			}
			if d := kernels.MaxAbsDiff(got, want); d > 1e-3 {
				t.Errorf("T=%d %s/%d: max error %g", T, p.Strategy, p.ChunkSize, d)
			}
			if len(st.ExpertsTouched) != 1 || st.ExpertsTouched[0] < K || st.ExpertsTouched[0] > min(E, T*K) {
				t.Errorf("T=%d: experts touched %v", T, st.ExpertsTouched)
			}
		}
	}
}

// BenchmarkAttentionDecode: one decode token's attention at a context of n
// cached positions in 16-position blocks laid out in order, for
// TinyLlama's heads (32 query heads over 4 kv heads of 64) and GPT-2's
// (12 heads, each its own kv head).
func BenchmarkAttentionDecode(b *testing.B) {
	const dim, bs = 64, 16
	for _, m := range []struct {
		name      string
		heads, kv int
	}{{"tinyllama", 32, 4}, {"gpt2", 12, 12}} {
		heads, kv := m.heads, m.kv
		for _, n := range []int{128, 1024, 2048} {
			b.Run(fmt.Sprintf("%s/ctx=%d", m.name, n), func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, uint64(n)))
				blocks := (n + bs - 1) / bs
				meta := &bridge.StepMeta{NumTokens: 1, NumSeqs: 1, MaxBlocks: blocks, BlockSize: bs,
					QueryStartLoc: []int32{0, 1}, SeqLens: []int32{int32(n)}, Positions: []int32{int32(n - 1)},
					SlotMapping: []int32{int32(n - 1)}}
				for j := range blocks {
					meta.BlockTable = append(meta.BlockTable, int32(j))
				}
				kc, vc := randF32(r, blocks*kv*bs*dim), randF32(r, blocks*kv*bs*dim)
				q, k, v := randF32(r, heads*dim), randF32(r, kv*dim), randF32(r, kv*dim)
				out := make([]float32, heads*dim)
				be := New(Options{})
				be.BeginStep(meta, []int32{0}, false)
				cache := bridge.KVCache{K: f32T(kc, len(kc)), V: f32T(vc, len(vc)), BlockSize: bs}
				for b.Loop() {
					be.Attention(f32T(out, 1, heads*dim), f32T(q, 1, heads*dim), f32T(k, 1, kv*dim), f32T(v, 1, kv*dim),
						cache, heads, kv, dim, 0.125, 0)
				}
			})
		}
	}
}
