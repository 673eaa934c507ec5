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
// several, partitions wholly before the window included, one-phase and
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
			got, want, read := runWindowAttention(t, be, c, c.window)
			if d := kernels.MaxAbsDiff(got, want); d > 1e-4 || math.IsNaN(d) {
				t.Errorf("max error %g against the reference", d)
			}
			_, _, full := runWindowAttention(t, be, c, 0)
			if c.skips && read >= full || !c.skips && read != full {
				t.Errorf("the window's step read %d cache bytes, %d without it (skips whole blocks: %v)", read, full, c.skips)
			}
		})
	}
}

// runWindowAttention runs one attention step of c with window on be and
// returns its output, the reference's and the cache bytes (kc and vc) the
// attention kernels read as the cost witness counts them.
func runWindowAttention(t *testing.T, be *Backend, c windowCase, window int) (got, want []float32, read int64) {
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
	return got, want, read
}

// kernelNames are the kernels of a step's dispatches.
func kernelNames(ds []mtl.DispatchStats) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Kernel)
	}
	return out
}
