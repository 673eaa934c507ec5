package metal

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/quanttest"
	"github.com/mtlbench/mtlbench/kernels"
)

// raggedContexts is n decode sequences whose cached contexts spread evenly
// from 1 to most.
func raggedContexts(n, most int) [][2]int {
	seqs := make([][2]int, n)
	for i := range seqs {
		seqs[i] = [2]int{1 + i*(most-1)/max(n-1, 1), 1}
	}
	return seqs
}

// A split-K partition that holds none of its token's keys (a shorter
// sequence's, where the grid is sized for the longest) stages no query
// heads: its simdgroups that would learn the token's position first, and
// the threadgroup leaves at its one barrier. The decode kernel so reads a
// token's query heads once for each partition holding its keys, not once
// for each launched (docs/metal-kernels.md, "Decode attention's lane
// layout"), and equals the reference.
func TestDecodeAttentionEmptyPartitions(t *testing.T) {
	for _, c := range []windowCase{
		{name: "16 sequences, contexts 1 to 4096", seqs: raggedContexts(16, 4096), heads: 32, kv: 4, dim: 64, bs: 16},
		{name: "heads of 128, partitions of 32", tuning: Tuning{AttnPartitionSize: 32}, seqs: [][2]int{{200, 1}, {3, 1}, {40, 1}},
			heads: 8, kv: 2, dim: 128, bs: 16},
		{name: "padded heads of 48, one simdgroup", tuning: Tuning{AttnPartitionSize: 16, AttnSimdgroups: 1},
			seqs: [][2]int{{70, 1}, {0, 1}}, heads: 4, kv: 2, dim: 48, bs: 8},
		{name: "two-phase", tuning: Tuning{AttnPartitionSize: 32, AttnTwoPhase: true}, seqs: [][2]int{{150, 1}, {10, 1}},
			heads: 8, kv: 2, dim: 64, bs: 16},
		{name: "window", tuning: Tuning{AttnPartitionSize: 16}, seqs: [][2]int{{300, 1}, {20, 1}, {5, 1}}, heads: 4, kv: 1,
			dim: 32, bs: 8, window: 50},
	} {
		t.Run(c.name, func(t *testing.T) {
			be, err := New(emuDevice(t), Options{Tuning: c.tuning})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			got, want, _, ds := runWindowAttention(t, be, c, c.window)
			if d := kernels.MaxAbsDiff(got, want); d > 1e-4 || math.IsNaN(d) {
				t.Errorf("max error %g against the reference", d)
			}
			// The partitions as the host sizes them, over the most keys a
			// token reads, and those holding each token's keys.
			size := c.tuning.AttnPartitionSize
			if size == 0 {
				size = DefaultTuning.AttnPartitionSize
			}
			most := 0
			for _, s := range c.seqs {
				most = max(most, kernels.QueryKeys(s[0]+s[1], c.window))
			}
			parts := (most + size - 1) / size
			psize := (most + parts - 1) / parts
			holding := 0
			for _, s := range c.seqs {
				holding += (kernels.QueryKeys(s[0]+s[1], c.window) + psize - 1) / psize
			}
			var q int64
			for _, d := range ds {
				if !strings.HasPrefix(d.Kernel, "paged_attention_d") {
					continue
				}
				for _, o := range d.Operands {
					if o.Name == "q" {
						q += o.Read
					}
				}
			}
			for _, k := range mtl.SumByKernel(ds) {
				t.Logf("%s: %d loads, %d bytes counted, %d critical loads, %.2f lanes/load, %d barriers over %d threadgroups",
					k.Kernel, k.Loads, k.Bytes(), k.CriticalLoads, k.LanesPerLoad(), k.Barriers, k.Threadgroups)
			}
			if wantQ := int64(4 * holding * c.heads * c.dim); q != wantQ {
				t.Errorf("the decode kernel read %d bytes of query heads, want %d: %d partitions of %d tokens hold keys, %d launched",
					q, wantQ, holding, len(c.seqs), parts*len(c.seqs))
			}
		})
	}
}

// With the RoPE folded into decode attention, the token's own key is
// rotated only where it is used: by the last simdgroup of the partition
// that writes it to the cache and the simdgroup whose run holds it, so the
// attention reads k as often over several partitions as over one (the last
// simdgroup of every partition rotated it, each partition's reading k
// again; docs/metal-kernels.md, "Decode attention at short contexts").
func TestDecodeAttentionRoPEKeyOnce(t *testing.T) {
	seqs := [][2]int{{300, 1}, {41, 1}, {7, 1}}
	const heads, kv, dim, bs = 8, 2, 64, 16
	kread := func(tu Tuning) (int64, string) {
		be, err := New(emuDevice(t), Options{Tuning: tu})
		if err != nil {
			t.Fatal(err)
		}
		defer be.Close()
		maxBlocks := 0
		for _, s := range seqs {
			maxBlocks = max(maxBlocks, (s[0]+s[1]+bs-1)/bs)
		}
		perm := make([]int, maxBlocks*len(seqs))
		for i := range perm {
			perm[i] = (i*7 + 3) % len(perm)
		}
		meta := quanttest.RaggedMeta(seqs, maxBlocks, bs, perm)
		T := meta.NumTokens
		alloc := func(shape ...int) *tensor {
			x, err := be.Alloc(bridge.F32, shape...)
			if err != nil {
				t.Fatal(err)
			}
			b := tt(x).contents()
			for i := 0; i+4 <= len(b); i += 4 {
				binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(i%97)/97-0.5))
			}
			return tt(x)
		}
		kc, vc := alloc(len(perm), kv, bs, dim), alloc(len(perm), kv, bs, dim)
		q, k, v, out := alloc(T, heads*dim), alloc(T, kv*dim), alloc(T, kv*dim), alloc(T, heads*dim)
		defer func() {
			for _, x := range []*tensor{kc, vc, q, k, v, out} {
				be.Free(x)
			}
		}()
		if err := be.BeginStep(meta, make([]int32, T), false); err != nil {
			t.Fatal(err)
		}
		freqs := be.ropeFreqs(dim, kernels.Rotary{Theta: 10000})
		be.attention(out, q, k, v, bridge.KVCache{K: kc, V: vc, BlockSize: bs}, heads, kv, dim, 0.125, 0,
			&attnRoPE{freqs: freqs, eps: 1e-6})
		if _, err := be.EndStep(); err != nil {
			t.Fatal(err)
		}
		ds, ok := be.LastStepCost()
		if !ok {
			t.Fatal("the step was not witnessed")
		}
		var n int64
		var names []string
		for _, d := range ds {
			names = append(names, d.Kernel)
			if !strings.HasPrefix(d.Kernel, "paged_attention_d") {
				continue
			}
			for _, o := range d.Operands {
				if o.Name == "k" {
					n += o.Read
				}
			}
		}
		return n, strings.Join(names, " ")
	}
	one, k1 := kread(Tuning{})
	for _, size := range []int{128, 32} {
		got, ks := kread(Tuning{AttnPartitionSize: size})
		t.Logf("k read %d bytes in partitions of %d (%s), %d in one (%s)", got, size, ks, one, k1)
		if got != one {
			t.Errorf("partitions of %d: the attention read %d bytes of k, %d in one partition", size, got, one)
		}
	}
}
