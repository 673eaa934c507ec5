package metal

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/quanttest"
	"github.com/mtlbench/mtlbench/kernels"
)

// windowCase is one attention step: sequences of (cached, new) tokens over
// an f32 cache of blocks of bs, under tuning.
type windowCase struct {
	name               string
	tuning             Tuning
	seqs               [][2]int
	heads, kv, dim, bs int
	window             int
	skips              bool // the window starts past a whole block or partition of some query
}

// Sliding-window attention on the emulator equals the reference
// (kernels.PagedAttention) for decode steps, in one partition and in
// several (counted from each token's window start), one-phase and
// two-phase, and for prefill steps through the tiled kernel (key steps and
// groups before the window skipped, the groups that cross it masked; one
// stage and two) and
// the per-token one; a window as long as a sequence or longer changes
// nothing. The cost witness counts the windowed steps, which read fewer
// cache bytes than unwindowed ones where whole blocks fall before the
// window (docs/metal-kernels.md, "Sliding windows").
func TestAttentionWindowMatchesReference(t *testing.T) {
	tiled := Tuning{AttnPrefillMinQuery: 8, AttnPrefillHeads: 2, AttnPrefillKeys: 8, AttnPrefillQueries: 8}
	for _, c := range []windowCase{
		{name: "decode", seqs: [][2]int{{40, 1}, {6, 1}}, heads: 8, kv: 2, dim: 32, bs: 8, window: 9, skips: true},
		{name: "decode window of one", seqs: [][2]int{{17, 1}}, heads: 4, kv: 4, dim: 32, bs: 8, window: 1, skips: true},
		{name: "decode window longer", seqs: [][2]int{{20, 1}}, heads: 4, kv: 2, dim: 32, bs: 8, window: 100},
		{name: "decode window equal", seqs: [][2]int{{20, 1}}, heads: 4, kv: 2, dim: 32, bs: 8, window: 21},
		{name: "decode partitions", tuning: Tuning{AttnPartitionSize: 32}, seqs: [][2]int{{150, 1}, {70, 1}, {10, 1}},
			heads: 8, kv: 2, dim: 64, bs: 16, window: 40, skips: true},
		{name: "decode partitions, window a partition", tuning: Tuning{AttnPartitionSize: 32}, seqs: [][2]int{{95, 1}},
			heads: 8, kv: 1, dim: 32, bs: 8, window: 32, skips: true},
		{name: "decode two-phase", tuning: Tuning{AttnTwoPhase: true}, seqs: [][2]int{{33, 1}, {2, 1}}, heads: 8, kv: 2, dim: 32, bs: 8,
			window: 17, skips: true},
		{name: "prefill tiled", tuning: tiled, seqs: [][2]int{{0, 40}, {13, 20}}, heads: 4, kv: 2, dim: 32, bs: 8, window: 11, skips: true},
		{name: "prefill tiled, window in a key group", tuning: tiled, seqs: [][2]int{{3, 30}}, heads: 4, kv: 2, dim: 32, bs: 8, window: 3,
			skips: true},
		{name: "prefill tiled, 16 keys, 32 queries", tuning: Tuning{AttnPrefillMinQuery: 8, AttnPrefillKeys: 16, AttnPrefillQueries: 32},
			seqs: [][2]int{{5, 45}, {0, 9}}, heads: 8, kv: 2, dim: 32, bs: 16, window: 21, skips: true},
		{name: "prefill tiled, one stage", tuning: Tuning{AttnPrefillMinQuery: 8, AttnPrefillKeys: 16, AttnPrefillQueries: 16},
			seqs: [][2]int{{9, 50}}, heads: 4, kv: 2, dim: 128, bs: 16, window: 13, skips: true},
		{name: "prefill tiled, window longer", tuning: tiled, seqs: [][2]int{{0, 24}}, heads: 4, kv: 2, dim: 32, bs: 8, window: 50},
		{name: "prefill per token", tuning: Tuning{AttnPrefillMinQuery: -1}, seqs: [][2]int{{0, 20}, {30, 5}}, heads: 8, kv: 2, dim: 32,
			bs: 8, window: 7, skips: true},
		{name: "prefill per token, partitions", tuning: Tuning{AttnPrefillMinQuery: -1, AttnPartitionSize: 32},
			seqs: [][2]int{{60, 10}, {0, 3}}, heads: 4, kv: 1, dim: 32, bs: 8, window: 20, skips: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			be, err := New(emuDevice(t), Options{Tuning: c.tuning})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			got, want, read, _ := runWindowAttention(t, be, c, c.window)
			if d := kernels.MaxAbsDiff(got, want); d > 1e-4 || math.IsNaN(d) {
				t.Errorf("max error %g against the reference", d)
			}
			_, _, full, _ := runWindowAttention(t, be, c, 0)
			if c.skips && read >= full || !c.skips && read != full {
				t.Errorf("the window's step read %d cache bytes, %d without it (skips whole blocks: %v)", read, full, c.skips)
			}
		})
	}
}

// runWindowAttention runs one attention step of c with window on be and
// returns its output, the reference's, the cache bytes (kc and vc) the
// attention kernels read as the cost witness counts them and the step's
// dispatches; the cache must then hold what the reference's does.
func runWindowAttention(t *testing.T, be *Backend, c windowCase, window int) (got, want []float32, read int64, ds []mtl.DispatchStats) {
	t.Helper()
	r := rand.New(rand.NewPCG(11, uint64(len(c.name))))
	maxBlocks := 0
	for _, s := range c.seqs {
		maxBlocks = max(maxBlocks, (s[0]+s[1]+c.bs-1)/c.bs)
	}
	blocks := maxBlocks*len(c.seqs) + 1
	perm := r.Perm(blocks)
	l := kernels.PagedLayout{BlockSize: c.bs, KVHeads: c.kv, HeadDim: c.dim}
	kref := make([]float32, blocks*c.kv*c.bs*c.dim)
	vref := make([]float32, len(kref))
	for i := range kref {
		kref[i], vref[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	meta := quanttest.RaggedMeta(c.seqs, maxBlocks, c.bs, perm)
	T := meta.NumTokens
	rnd := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	q, k, v := rnd(T*c.heads*c.dim), rnd(T*c.kv*c.dim), rnd(T*c.kv*c.dim)
	put := func(x []float32, shape ...int) *tensor {
		tn, err := be.Alloc(bridge.F32, shape...)
		if err != nil {
			t.Fatal(err)
		}
		b := tt(tn).contents()
		for i, f := range x {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
		}
		return tt(tn)
	}
	kc, vc := put(kref, blocks, c.kv, c.bs, c.dim), put(vref, blocks, c.kv, c.bs, c.dim)
	qt, kt, vt := put(q, T, c.heads*c.dim), put(k, T, c.kv*c.dim), put(v, T, c.kv*c.dim)
	out := put(make([]float32, T*c.heads*c.dim), T, c.heads*c.dim)
	defer func() {
		for _, x := range []*tensor{kc, vc, qt, kt, vt, out} {
			be.Free(x)
		}
	}()
	if err := be.BeginStep(meta, make([]int32, T), false); err != nil {
		t.Fatal(err)
	}
	be.Attention(out, qt, kt, vt, bridge.KVCache{K: kc, V: vc, BlockSize: c.bs}, c.heads, c.kv, c.dim,
		float32(1/math.Sqrt(float64(c.dim))), window)
	if _, err := be.EndStep(); err != nil {
		t.Fatal(err)
	}
	got = make([]float32, T*c.heads*c.dim)
	if err := be.Read(out, got); err != nil {
		t.Fatal(err)
	}
	kernels.KVWrite(kref, vref, k, v, meta.SlotMapping, l)
	// The step's keys and values land in the cache, whichever partition
	// holds them (the reference's cache is f32 like this one).
	for _, c := range []struct {
		name string
		got  *tensor
		want []float32
	}{{"kc", kc, kref}, {"vc", vc, vref}} {
		cache := make([]float32, len(c.want))
		if err := be.Read(c.got, cache); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cache, c.want) {
			t.Errorf("%s after the step differs from the reference's cache", c.name)
		}
	}
	want = make([]float32, len(got))
	kernels.PagedAttention(want, q, kref, vref, kernels.AttnBatch{QueryStartLoc: meta.QueryStartLoc, SeqLens: meta.SeqLens,
		BlockTable: meta.BlockTable, MaxBlocks: maxBlocks}, c.heads, l, float32(1/math.Sqrt(float64(c.dim))), window)
	ds, ok := be.LastStepCost()
	if !ok || !slices.ContainsFunc(ds, func(d mtl.DispatchStats) bool { return strings.HasPrefix(d.Kernel, "paged_attention") }) {
		t.Fatalf("the cost witness counted no attention kernel: %v", kernelNames(ds))
	}
	for _, d := range ds {
		for _, o := range d.Operands {
			if o.Name == "kc" || o.Name == "vc" {
				read += o.Read
			}
		}
	}
	t.Logf("%s, window %d: %s", c.name, window, fmt.Sprint(kernelNames(ds)))
	return got, want, read, ds
}

// A windowed step's split-K partitions count from each token's first key:
// at a long context the decode kernel launches the partitions its window
// spans, not the context's, and it and the reduce read what a step without
// a window over as many keys reads (like: the same batch with each context
// cut to the window). A step without a window launches the context's
// partitions (docs/metal-kernels.md, "Sliding windows").
func TestAttentionWindowPartitions(t *testing.T) {
	part := Tuning{AttnPartitionSize: 32}
	for _, c := range []struct {
		windowCase
		like  [][2]int // the batch without a window that reads as much; nil: none compared
		parts int      // partitions the attention launches
	}{
		{windowCase{name: "decode, window across partitions", tuning: part, seqs: [][2]int{{2000, 1}}, heads: 8, kv: 2, dim: 32,
			bs: 16, window: 70}, [][2]int{{69, 1}}, 3},
		{windowCase{name: "decode, window in a partition", tuning: part, seqs: [][2]int{{1500, 1}}, heads: 4, kv: 1, dim: 64,
			bs: 8, window: 20}, [][2]int{{19, 1}}, 1},
		{windowCase{name: "decode, window of partitions", tuning: part, seqs: [][2]int{{1000, 1}}, heads: 4, kv: 2, dim: 32,
			bs: 8, window: 64}, [][2]int{{63, 1}}, 2},
		{windowCase{name: "decode ragged", tuning: part, seqs: [][2]int{{1200, 1}, {500, 1}, {40, 1}, {5, 1}}, heads: 8, kv: 2,
			dim: 32, bs: 16, window: 50}, [][2]int{{49, 1}, {49, 1}, {40, 1}, {5, 1}}, 2},
		{windowCase{name: "decode two-phase", tuning: Tuning{AttnPartitionSize: 32, AttnTwoPhase: true},
			seqs: [][2]int{{900, 1}, {77, 1}}, heads: 8, kv: 2, dim: 32, bs: 8, window: 45}, [][2]int{{44, 1}, {44, 1}}, 2},
		{windowCase{name: "decode by partition count", tuning: Tuning{AttnPartitions: 4}, seqs: [][2]int{{3000, 1}}, heads: 4,
			kv: 1, dim: 32, bs: 16, window: 100}, [][2]int{{99, 1}}, 4},
		{windowCase{name: "prefill per token", tuning: Tuning{AttnPrefillMinQuery: -1, AttnPartitionSize: 8},
			seqs: [][2]int{{300, 6}, {2, 4}}, heads: 4, kv: 2, dim: 32, bs: 8, window: 20}, nil, 3},
		{windowCase{name: "no window", tuning: part, seqs: [][2]int{{2000, 1}}, heads: 8, kv: 2, dim: 32, bs: 16}, nil, 63},
		{windowCase{name: "no window, ragged", tuning: part, seqs: [][2]int{{300, 1}, {20, 1}}, heads: 8, kv: 2, dim: 32, bs: 8},
			nil, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			be, err := New(emuDevice(t), Options{Tuning: c.tuning})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			got, want, read, ds := runWindowAttention(t, be, c.windowCase, c.window)
			if d := kernels.MaxAbsDiff(got, want); d > 1e-4 || math.IsNaN(d) {
				t.Errorf("max error %g against the reference", d)
			}
			launch := attnLaunch(ds)
			if launch.parts != c.parts {
				t.Errorf("%d partitions launched, want %d", launch.parts, c.parts)
			}
			if c.like == nil {
				return
			}
			l := c.windowCase
			l.seqs, l.window = c.like, 0
			_, _, lread, lds := runWindowAttention(t, be, l, 0)
			if read != lread {
				t.Errorf("the window's step read %d cache bytes, one of its keys without a window %d", read, lread)
			}
			if ll := attnLaunch(lds); launch != ll {
				t.Errorf("the window's step launched %+v, one of its keys without a window %+v", launch, ll)
			}
		})
	}
}

// attnStep is what a step's paged_attention dispatch launched and what it
// and the split-K reduce read of the partials.
type attnStep struct {
	groups              [3]int
	parts               int
	partials, reduceTGs int64
}

// attnLaunch reads a step's attention launch from its dispatches.
func attnLaunch(ds []mtl.DispatchStats) attnStep {
	var a attnStep
	for _, d := range ds {
		switch {
		case strings.HasPrefix(d.Kernel, "paged_attention_d"):
			a.groups, a.parts = d.Groups, d.Groups[2]
		case d.Kernel == "paged_attention_reduce":
			a.reduceTGs = int64(d.Groups[0] * d.Groups[1] * d.Groups[2])
			for _, o := range d.Operands {
				if strings.HasPrefix(o.Name, "part_") { // part_o, part_ml and what shares their buffers
					a.partials += o.Read
				}
			}
		}
	}
	return a
}

// kernelNames are the kernels of a step's dispatches.
func kernelNames(ds []mtl.DispatchStats) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Kernel)
	}
	return out
}
