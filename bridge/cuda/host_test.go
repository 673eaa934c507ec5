//go:build linux

// Host-side rules of the backend that need no GPU.
package cuda

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/quanttest"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// A packed decode GEMV takes the rows a warp the GPU fills with by default
// (an H100: 132 SMs), a tuned config's rows where its variant has them, and
// the default where it has not.
func TestQAGemvTakesTunedRows(t *testing.T) {
	b := &Backend{device: device{sms: 132}}
	launch := func(m int, gu bool, rows ...int) *qgemv {
		g := &qgemv{m: m, k: 2048, gu: gu}
		for _, n := range rows {
			g.segs[g.nsegs] = qseg{q: &qtensor{PackedMatrix: bridge.PackedMatrix{Dims: []int{n, 2048}}}}
			g.nsegs++
		}
		return g
	}
	qkv := launch(1, false, 4096, 512, 512)
	gu := launch(1, true, 6144, 6144)
	four := launch(4, false, 2048)
	for _, c := range []struct {
		name  string
		g     *qgemv
		c     int
		tuned string
		want  int
	}{
		{"q/k/v, untuned", qkv, 1, "", 2},
		{"q/k/v, tuned 4", qkv, 1, "4", 4},
		{"q/k/v, tuned auto", qkv, 1, "auto", 2},
		{"gate/up, untuned", gu, 1, "", 3},
		{"gate/up, tuned 4 (no such variant)", gu, 1, "4", 3},
		{"gate/up, tuned 1", gu, 1, "1", 1},
		{"four tokens, tuned 4 (no such variant)", four, qCols, "4", 1},
		{"four tokens, tuned 2", four, qCols, "2", 2},
	} {
		var asked [3]int
		if c.tuned != "" {
			b.SetLaunchConfig(string(ops.QMatMul), func(_ string, s map[string]int) (map[string]string, bool) {
				asked = [3]int{s[string(ops.M)], s[string(ops.N)], s[string(ops.K)]}
				return map[string]string{ops.KnobRows: c.tuned}, true
			})
		} else {
			b.SetLaunchConfig(string(ops.QMatMul), nil)
		}
		if got := b.qaLaunchRows(c.g, c.c); got != c.want {
			t.Errorf("%s: %d rows a warp, want %d", c.name, got, c.want)
		}
		if first := c.g.segs[0].q.Dims[0]; c.tuned != "" && asked != [3]int{c.g.m, first, 2048} {
			t.Errorf("%s: looked up %v, want the first matrix's shape %v", c.name, asked, [3]int{c.g.m, first, 2048})
		}
	}
}

// A compile error in a helper every kernel program includes is reported
// once, not once a program; distinct ones each once.
func TestCompileErrorsReportedOnce(t *testing.T) {
	helper := errors.New("kernels/cuda/common.cu(12): error: identifier \"x\" is undefined")
	other := errors.New("kernels/cuda/flash.cu(3): error: expected a \";\"")
	err := distinct([]error{nil, helper, errors.New(helper.Error()), nil, other, helper})
	if err == nil {
		t.Fatal("no error")
	}
	if got := strings.Count(err.Error(), "common.cu(12)"); got != 1 {
		t.Errorf("the helper's error %d times in %q", got, err)
	}
	if !strings.Contains(err.Error(), "flash.cu(3)") {
		t.Errorf("%q lost the second error", err)
	}
	if distinct([]error{nil, nil}) != nil {
		t.Error("no errors joined into one")
	}
}

// A persistent chain (persist_linux.go) takes single-token affine GEMVs
// whose rows the bulk copies can move whole and a slot holds, and writes
// each as quant_persist.cu's QCIns, field for field.
func TestChainTakes(t *testing.T) {
	mat := func(bits, group int, scale quant.Float, n, k int) *qtensor {
		return &qtensor{PackedMatrix: bridge.PackedMatrix{Spec: quant.Spec{Type: quant.Affine, Bits: bits, Group: group, Scale: scale}, Dims: []int{n, k}},
			data: &tensor{ptr: 0x1000}, scales: &tensor{ptr: 0x2000}, biases: &tensor{ptr: 0x3000}}
	}
	gemv := func(m, k int, gu bool, q *qtensor) *qgemv {
		g := &qgemv{x: 0x4000, m: m, k: k, gu: gu, segs: [3]qseg{{q: q, out: 0x5000}}, nsegs: 1}
		if gu {
			g.segs[1], g.nsegs = qseg{q: q, out: 0x6000}, 2
		}
		return g
	}
	on := &Backend{device: device{sms: 132}, qcSlots: 11}
	for _, c := range []struct {
		name string
		b    *Backend
		g    *qgemv
		want bool
	}{
		{"TinyLlama q/k/v, 4-bit", on, gemv(1, 2048, false, mat(4, 64, quant.BF16, 2560, 2048)), true},
		{"down, k 5632", on, gemv(1, 5632, false, mat(4, 64, quant.BF16, 2048, 5632)), true},
		{"gate/up, 8-bit, f32 scales", on, gemv(1, 2048, true, mat(8, 64, quant.F32, 5632, 2048)), true},
		{"two tokens", on, gemv(2, 2048, false, mat(4, 64, quant.BF16, 2048, 2048)), false},
		{"k 896: 28 bytes of scales a row", on, gemv(1, 896, false, mat(4, 64, quant.BF16, 1152, 896)), false},
		{"k over what is staged at once", on, gemv(1, 14336, false, mat(4, 64, quant.BF16, 4096, 14336)), false},
		{"gate/up rows over a slot", on, gemv(1, 8192, true, mat(8, 32, quant.F32, 1024, 8192)), false},
		{"no chains on this GPU", &Backend{}, gemv(1, 2048, false, mat(4, 64, quant.BF16, 2048, 2048)), false},
	} {
		if got := c.b.qcTakes(c.g); got != c.want {
			t.Errorf("%s: taken %v, want %v", c.name, got, c.want)
		}
	}
	g := gemv(1, 2048, false, mat(4, 64, quant.BF16, 2560, 2048))
	g.norm.w, g.norm.out, g.norm.eps = 0x7000, 0x8000, 1e-5
	a := qcIns(g, 4)
	if len(a) != qcInsSlots {
		t.Fatalf("QCIns of %d slots, want %d", len(a), qcInsSlots)
	}
	// x, K, rowBytes, groups, sdt, bits, gu, nmat, w[3], s[3], b[3],
	// bias[3], out[3], n[3], nw, nh, eps
	want := map[int]uint64{0: 0x4000, 1: 2048, 2: 1024, 3: 32, 5: 4, 6: 0, 7: 1, 8: 0x1000, 11: 0x2000, 14: 0x3000,
		20: 0x5000, 23: 2560, 26: 0x7000, 27: 0x8000, 28: f64(float64(float32(1e-5)))}
	for i, v := range want {
		if a[i] != v {
			t.Errorf("QCIns slot %d = %#x, want %#x", i, a[i], v)
		}
	}
}

// Every argument of a list is in its graph's key: a decode step's
// step_begin and step_end read pinned buffers that alternate from step to
// step, so consecutive steps replay graphs of their own and no launch
// changes the arguments of a graph the step before may still be running.
func TestGraphKeyHoldsEveryArgument(t *testing.T) {
	b := &Backend{}
	ents := []entry{{kind: entLaunch, fn: 1, grid: [3]uint32{1, 1, 1}, block: 256, a0: 0, a1: 2},
		{kind: entLaunch, fn: 2, grid: [3]uint32{64, 1, 1}, block: 256, a0: 2, a1: 3}}
	key := func(args ...uint64) []uint64 { return slices.Clone(b.listKey(ents, args)) }
	even, odd := key(0x1000, 7, 0x2000), key(0x1800, 7, 0x2000)
	if slices.Equal(even, odd) || hashKey(even) == hashKey(odd) {
		t.Error("lists differing only in a pinned buffer's address share a graph")
	}
	if !slices.Equal(even, key(0x1000, 7, 0x2000)) {
		t.Error("the same list gives two keys")
	}
}

// SetFusions keeps exactly the patterns named, as on Metal.
func TestSetFusionsKeepsOnlyThoseNamed(t *testing.T) {
	quanttest.SetFusionsKeepsOnlyThoseNamed(t, &Backend{})
}

// A windowed step's split-K partitions count from each token's first key
// (attention.cu, decode.cu: docs/cuda.md, "Limits"): at a long
// context with a short window the attention launches the partitions the
// window spans, enough for every token's keys, with the scratch and
// kernel of a step without a window over as many keys, and looks its
// tuned split up at those keys; a step without a window, or one whose
// window holds the context, takes the context's.
func TestAttentionWindowPartitions(t *testing.T) {
	b := &Backend{device: device{sms: 132, maxSharedBlock: 232448}} // an H100
	type seqs struct{ queries, cached []int }
	for _, c := range []struct {
		name                    string
		s                       seqs
		cache                   bridge.DType
		heads, kvHeads, headDim int
		window                  int
		rope                    bool
		tunedPart               int // a tuned config's positions a partition; 0: none
		kernel                  string
		nparts                  int
		asked                   int  // the context the tuned lookup saw
		like                    seqs // the step without a window that launches alike; none when empty
	}{
		{name: "decode on tensor cores, 32k context, window 4k", s: seqs{[]int{1}, []int{32767}}, cache: bridge.BF16,
			heads: 32, kvHeads: 8, headDim: 128, window: 4096, kernel: "paged_decode_mma_d128_p128_bf16", nparts: 64,
			like: seqs{[]int{1}, []int{4095}}},
		{name: "the same without a window", s: seqs{[]int{1}, []int{32767}}, cache: bridge.BF16,
			heads: 32, kvHeads: 8, headDim: 128, kernel: "paged_decode_mma_d128_p128_bf16", nparts: 256},
		{name: "window longer than the context", s: seqs{[]int{1}, []int{999}}, cache: bridge.BF16,
			heads: 32, kvHeads: 8, headDim: 128, window: 5000, kernel: "paged_decode_mma_d128_p32_bf16", nparts: 32,
			like: seqs{[]int{1}, []int{999}}},
		{name: "decode ragged, f32 cache, RoPE", s: seqs{[]int{1, 1, 1}, []int{1999, 499, 39}}, cache: bridge.F32,
			heads: 8, kvHeads: 2, headDim: 64, window: 100, rope: true, kernel: "paged_decode_rope_f32", nparts: 4,
			like: seqs{[]int{1, 1, 1}, []int{99, 99, 39}}},
		{name: "decode, tuned", s: seqs{[]int{1}, []int{32767}}, cache: bridge.BF16, heads: 32, kvHeads: 8, headDim: 128,
			window: 4096, tunedPart: 256, kernel: "paged_decode_bf16", nparts: 16, asked: 4096,
			like: seqs{[]int{1}, []int{4095}}},
		{name: "decode, tuned, no window", s: seqs{[]int{1}, []int{32767}}, cache: bridge.BF16, heads: 32, kvHeads: 8,
			headDim: 128, tunedPart: 256, kernel: "paged_decode_bf16", nparts: 128, asked: 32768},
		{name: "decode, GQA group of 16 (attention.cu)", s: seqs{[]int{1, 1}, []int{2999, 33}}, cache: bridge.F16,
			heads: 16, kvHeads: 1, headDim: 64, window: 40, rope: true, kernel: "paged_attention_rope_w8_f16", nparts: 2,
			like: seqs{[]int{1, 1}, []int{39, 33}}},
		{name: "decode, GQA group of 16, no window", s: seqs{[]int{1, 1}, []int{2999, 33}}, cache: bridge.F16,
			heads: 16, kvHeads: 1, headDim: 64, kernel: "paged_attention_w8_f16", nparts: 128},
		{name: "prefill (attention.cu)", s: seqs{[]int{15, 1, 17, 2}, []int{0, 40, 1300, 1}}, cache: bridge.BF16,
			heads: 8, kvHeads: 2, headDim: 64, window: 600, kernel: "paged_attention_w8_bf16", nparts: 3,
			like: seqs{[]int{15, 1, 17, 2}, []int{0, 40, 583, 1}}},
		{name: "prefill, no window", s: seqs{[]int{15, 1, 17, 2}, []int{0, 40, 1300, 1}}, cache: bridge.BF16,
			heads: 8, kvHeads: 2, headDim: 64, kernel: "paged_attention_w8_bf16", nparts: 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			asked := 0
			if c.tunedPart > 0 {
				b.SetLaunchConfig(string(ops.PagedAttentionDecode), func(_ string, s map[string]int) (map[string]string, bool) {
					asked = s[string(ops.Context)]
					return map[string]string{ops.KnobPart: strconv.Itoa(c.tunedPart)}, true
				})
				defer b.SetLaunchConfig(string(ops.PagedAttentionDecode), nil)
			}
			m, ctxs := stepOf(c.s.queries, c.s.cached)
			l := b.attnLaunch(m, c.cache, c.heads, c.kvHeads, c.headDim, 16, c.window, c.rope)
			if l.kernel != c.kernel || l.nparts != c.nparts || l.grid[2] != l.nparts {
				t.Errorf("%s over %d partitions (grid %v), want %s over %d", l.kernel, l.nparts, l.grid, c.kernel, c.nparts)
			}
			if asked != c.asked {
				t.Errorf("tuned split looked up at context %d, want %d", asked, c.asked)
			}
			// Each token's keys, from its first, fit the partitions: the
			// kernels merge ceil(keys / part) of them.
			for _, ctx := range ctxs {
				if n := cdiv(kernels.QueryKeys(ctx, c.window), l.part); n > l.nparts {
					t.Errorf("a token at context %d reads %d partitions of %d keys, the launch has %d", ctx, n, l.part, l.nparts)
				}
			}
			if (l.nparts > 1) != (l.acc > 0 && l.ml > 0 && l.counters > 0) {
				t.Errorf("%d partitions with scratch %d, %d, %d bytes", l.nparts, l.acc, l.ml, l.counters)
			}
			if c.like.queries == nil {
				return
			}
			lm, _ := stepOf(c.like.queries, c.like.cached)
			if ll := b.attnLaunch(lm, c.cache, c.heads, c.kvHeads, c.headDim, 16, 0, c.rope); l != ll {
				t.Errorf("launch %+v, a step without a window over as many keys %+v", l, ll)
			}
		})
	}
}

// stepOf is the metadata attnLaunch reads of a step whose sequences take
// queries new tokens after cached ones, and each token's context.
func stepOf(queries, cached []int) (*bridge.StepMeta, []int) {
	m := &bridge.StepMeta{NumSeqs: len(queries)}
	var ctxs []int
	for s, q := range queries {
		m.NumTokens += q
		m.MaxQueryLen = max(m.MaxQueryLen, q)
		m.MaxSeqLen = max(m.MaxSeqLen, cached[s]+q)
		for i := range q {
			ctxs = append(ctxs, cached[s]+i+1)
		}
	}
	return m, ctxs
}
