package metal_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// TestDecodeAttentionRounds holds decode attention to the reference where
// its simdgroups' partial results meet in several rounds (more simdgroups
// than threadgroup memory has slots for, ops.MetalAttnMemory) and in one,
// and checks the launch the cost witness saw: simdgroups by the
// partition's keys (ops.MetalAttnSimdgroups), one barrier staging the
// queries and the sequence data and two a round but the last
// (docs/metal-kernels.md, "Decode attention at short contexts"; the
// queries sat where the first round's slots go, which took a barrier
// more), and the split-K reduce's one barrier a chunk of
// ops.MetalAttnReduceChunk partitions (of 32 before, and three when it
// read their maxima first), its threadgroups serving
// ops.MetalAttnReduceHeads heads each.
func TestDecodeAttentionRounds(t *testing.T) {
	cases := []struct {
		name                       string
		head, heads, kv, ctx, most int
		part                       int // the most keys a partition; 0: the default
		dtype                      ops.DType
	}{
		{"group 8 of 128, six slots", 128, 8, 1, 300, 32, 0, ops.BF16},
		{"group 8 of 64, fourteen slots", 64, 8, 1, 300, 32, 0, ops.F32},
		{"group 4 of 256", 256, 8, 2, 200, 32, 0, ops.BF16},
		{"group 8 of 256, two slots", 256, 8, 1, 90, 32, 0, ops.F16},
		{"four simdgroups, one round", 128, 8, 1, 300, 4, 0, ops.BF16},
		{"at most six simdgroups", 128, 8, 1, 300, 6, 0, ops.F32},
		{"TinyLlama's heads at 128", 64, 32, 4, 127, 32, 0, ops.BF16},
		{"a context of 6", 128, 32, 4, 5, 32, 0, ops.BF16},
		{"partitions of 128", 128, 8, 1, 700, 32, 128, ops.BF16},
		{"40 partitions of 32", 64, 8, 2, 1270, 8, 32, ops.F32},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be := newEmu(t, metal.Tuning{AttnSimdgroups: c.most, AttnPartitionSize: c.part})
			a := ops.Args{Op: ops.PagedAttentionDecode, Ints: map[ops.Param]int{ops.Seqs: 1, ops.NumHeads: c.heads,
				ops.NumKVHeads: c.kv, ops.HeadSize: c.head, ops.BlockSize: 16, ops.Context: c.ctx}, DType: c.dtype}
			w, e, _ := checkedWitness(t, be, a)
			var attn, reduce *struct{ tgs, sgs, barriers int64 }
			for _, k := range w.Kernels {
				st := &struct{ tgs, sgs, barriers int64 }{k.Threadgroups, k.Simdgroups, k.Barriers}
				switch {
				case strings.HasPrefix(k.Kernel, "paged_attention_d"):
					attn = st
				case k.Kernel == "paged_attention_reduce":
					reduce = st
				}
			}
			if attn == nil || attn.tgs == 0 {
				t.Fatalf("no decode attention dispatch among %v", w.Kernels)
			}
			keys := c.ctx + 1
			if c.part > 0 && keys > c.part {
				parts := (keys + c.part - 1) / c.part
				keys = (keys + parts - 1) / parts // spread evenly
			}
			qh := min(8, c.heads/c.kv)
			nsg := ops.MetalAttnSimdgroups(c.most, keys)
			_, slots := ops.MetalAttnMemory(nsg, qh, c.head, 32<<10)
			rounds := (nsg + slots - 1) / slots
			if got := attn.sgs / attn.tgs; got != int64(nsg) {
				t.Errorf("%d simdgroups a threadgroup, want %d for %d keys (at most %d)", got, nsg, keys, c.most)
			}
			if got, want := attn.barriers, attn.tgs*int64(2*rounds); got != want {
				t.Errorf("%d barriers over %d threadgroups, want %d: %d rounds of %d slots", got, attn.tgs, want, rounds, slots)
			}
			if c.part > 0 && c.ctx+1 > c.part {
				parts := (c.ctx + 1 + c.part - 1) / c.part
				chunks := int64((parts + ops.MetalAttnReduceChunk - 1) / ops.MetalAttnReduceChunk)
				hr := ops.MetalAttnReduceHeads(parts, c.head, c.heads, 1024)
				if reduce == nil {
					t.Fatalf("no split-K reduce among %v", w.Kernels)
				} else if got, want := reduce.tgs, int64((c.heads+hr-1)/hr); got != want {
					t.Errorf("reduce: %d threadgroups, want %d: %d heads a threadgroup", got, want, hr)
				} else if got, want := reduce.barriers, reduce.tgs*chunks; got != want {
					t.Errorf("reduce: %d barriers over %d threadgroups, want %d", got, reduce.tgs, want)
				}
			}
			t.Logf("%d simdgroups, %d slots, %d rounds: max error %.2g", nsg, slots, rounds, e)
		})
	}
}

// Prefill attention reads the KV cache once per tile of queries, shared by
// every query head of a KV head's group (docs/metal-kernels.md, "Prefill
// attention"): 64 tokens of Qwen3-30B-A3B's heads (32 over 4 KV heads of
// 128) in causal tiles of 16 read the cache's K and V 2.5 times over
// (tiles 1 to 4 read 1 to 4 of the 16-key blocks), where one head a
// threadgroup reads them once per query head of the group, 8 times as
// often (one simdgroup per 8 queries and head reading K/V from device
// memory, as the kernel once did, read them 8 times per 8 tokens).
func TestPrefillAttentionSharesKV(t *testing.T) {
	for _, c := range []struct {
		heads int     // AttnPrefillHeads; 0: the default, the whole group
		want  float64 // K and V reads over their distinct bytes
	}{{0, 2.5}, {1, 20}} {
		be := newEmu(t, metal.Tuning{AttnPrefillHeads: c.heads})
		w, _, _ := checkedWitness(t, be, ops.Args{Op: ops.PagedAttentionPrefill, Ints: map[ops.Param]int{ops.Seqs: 1, ops.Tokens: 64,
			ops.NumHeads: 32, ops.NumKVHeads: 4, ops.HeadSize: 128, ops.BlockSize: 16}, DType: ops.BF16})
		seen := 0
		for _, o := range w.Operands {
			if !strings.HasPrefix(o.Kernel, "paged_attention_prefill") || o.Name != "kc" && o.Name != "vc" {
				continue
			}
			seen++
			t.Logf("heads a threadgroup %d: %s's %s read %.2f times", c.heads, o.Kernel, o.Name, o.Rereads())
			// The default at most its figure; one head a threadgroup at
			// least its own, so the witness is seen to tell them apart.
			if got := o.Rereads(); c.heads == 0 && got > c.want+1e-9 || c.heads != 0 && got < c.want-1e-9 {
				t.Errorf("heads a threadgroup %d: %s reads %s %.2f times over, want %g", c.heads, o.Kernel, o.Name, got, c.want)
			}
		}
		if seen != 2 {
			t.Errorf("heads a threadgroup %d: %d of the cache operands kc, vc witnessed", c.heads, seen)
		}
	}
}

// The split-K reduce reads a token's partitions' maxima and sums a lane a
// (partition, head) pair, the pairs of as many heads a threadgroup as fill
// a simdgroup's load (ops.MetalAttnReduceHeads), and the token's position
// once: every load but the pairs' last keeps 32 lanes busy, and its busiest
// simdgroup issues a load for the position, one for the pairs and one a
// partition for its head elements (docs/metal-kernels.md, "Decode
// attention at short contexts"). It read the pairs a lane a partition of
// one head, 2 lanes of a load at 2 partitions, and the sequence data in
// four loads of every simdgroup (29.7 lanes a load and 8 critical loads at
// 2 partitions, 70 at 64).
func TestDecodeAttentionReduceLoads(t *testing.T) {
	for _, c := range []struct {
		head, kv, ctx int
		tu            metal.Tuning
		parts         int
	}{
		{64, 4, 512, metal.Tuning{}, 2},
		{128, 8, 512, metal.Tuning{}, 2},
		{64, 4, 4096, metal.Tuning{}, 9},
		{128, 8, 4096, metal.Tuning{}, 9},
		{64, 4, 4095, metal.Tuning{AttnPartitions: 64}, 64},
		{256, 8, 4095, metal.Tuning{AttnPartitions: 64}, 64},
	} {
		name := fmt.Sprintf("32/%d heads of %d, %d partitions", c.kv, c.head, c.parts)
		be := newEmu(t, c.tu)
		w, _, _ := checkedWitness(t, be, ops.Args{Op: ops.PagedAttentionDecode, Ints: map[ops.Param]int{ops.Seqs: 1, ops.NumHeads: 32,
			ops.NumKVHeads: c.kv, ops.HeadSize: c.head, ops.BlockSize: 16, ops.Context: c.ctx}, DType: ops.F16})
		n := 0
		for _, k := range w.Kernels {
			if k.Kernel != "paged_attention_reduce" {
				continue
			}
			n++
			t.Logf("%s: %.2f lanes a load, %d critical loads, %d barriers over %d threadgroups, %d loads, %d bytes", name,
				k.LanesPerLoad(), k.CriticalLoads, k.Barriers, k.Threadgroups, k.Loads, k.BytesRead)
			if k.LanesPerLoad() < 31.5 {
				t.Errorf("%s: the reduce keeps %.2f lanes a load busy, want at least 31.5", name, k.LanesPerLoad())
			}
			if want := int64(c.parts + 2); k.CriticalLoads > want {
				t.Errorf("%s: the reduce's busiest simdgroup issues %d loads, want at most %d", name, k.CriticalLoads, want)
			}
		}
		if n != 1 {
			t.Errorf("%s: %d split-K reduces ran, want 1", name, n)
		}
	}
}
