package metal

import (
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/kernels"
)

// The decode attention's lanes read a key row 4 elements at a time (8 at
// heads of 256), so a simdgroup load covers 4 keys at heads of 32, 2 at
// 64 and 1 from 96 on, and each simdgroup reads its keys' block numbers 32
// at a time and shuffles them (docs/metal-kernels.md, "Decode attention's
// lane layout"). Every head size equals the reference (kernels.PagedAttention)
// over a scattered block table: heads the kernels hold padded (16, 40, 48,
// 70 element by element, 80, 200), contexts that end mid-load and mid-block,
// runs of more than 32 blocks, split-K partitions, the two-phase KV write,
// a sliding window and the per-token prefill; the new keys land in the cache.
func TestDecodeAttentionLaneLayout(t *testing.T) {
	for _, c := range []windowCase{
		{name: "head 16 in 32", seqs: [][2]int{{37, 1}, {2, 1}}, heads: 4, kv: 2, dim: 16, bs: 8},
		{name: "head 32, 4 keys a load", seqs: [][2]int{{41, 1}, {0, 1}, {6, 1}}, heads: 8, kv: 2, dim: 32, bs: 8},
		{name: "head 40 in 64", seqs: [][2]int{{29, 1}}, heads: 4, kv: 1, dim: 40, bs: 16},
		{name: "head 48 in 64", seqs: [][2]int{{30, 1}, {1, 1}}, heads: 4, kv: 2, dim: 48, bs: 16},
		{name: "head 64, 2 keys a load", seqs: [][2]int{{50, 1}, {3, 1}, {128, 1}}, heads: 8, kv: 1, dim: 64, bs: 16},
		{name: "head 64, one simdgroup over 76 blocks", tuning: Tuning{AttnSimdgroups: 1}, seqs: [][2]int{{150, 1}, {67, 1}},
			heads: 4, kv: 2, dim: 64, bs: 2},
		{name: "head 32, one simdgroup over 40 blocks", tuning: Tuning{AttnSimdgroups: 1}, seqs: [][2]int{{78, 1}}, heads: 2,
			kv: 1, dim: 32, bs: 2},
		{name: "head 70 in 96, element by element", seqs: [][2]int{{21, 1}}, heads: 4, kv: 2, dim: 70, bs: 8},
		{name: "head 80 in 96", seqs: [][2]int{{33, 1}, {4, 1}}, heads: 4, kv: 2, dim: 80, bs: 16},
		{name: "head 96, 24 lanes a key", seqs: [][2]int{{45, 1}}, heads: 8, kv: 2, dim: 96, bs: 16},
		{name: "head 128", seqs: [][2]int{{27, 1}}, heads: 8, kv: 2, dim: 128, bs: 16},
		{name: "head 200 in 256", seqs: [][2]int{{19, 1}}, heads: 2, kv: 1, dim: 200, bs: 8},
		{name: "head 256", seqs: [][2]int{{23, 1}}, heads: 4, kv: 2, dim: 256, bs: 16},
		{name: "head 64, partitions", tuning: Tuning{AttnPartitionSize: 32}, seqs: [][2]int{{100, 1}, {33, 1}}, heads: 8, kv: 2,
			dim: 64, bs: 16},
		{name: "head 32, two-phase partitions", tuning: Tuning{AttnPartitionSize: 32, AttnTwoPhase: true},
			seqs: [][2]int{{77, 1}, {5, 1}}, heads: 8, kv: 2, dim: 32, bs: 8},
		{name: "head 64, window", seqs: [][2]int{{61, 1}}, heads: 4, kv: 1, dim: 64, bs: 8, window: 9},
		{name: "head 64, per-token prefill", tuning: Tuning{AttnPrefillMinQuery: -1}, seqs: [][2]int{{13, 5}, {0, 7}}, heads: 4,
			kv: 2, dim: 64, bs: 8},
		{name: "head 32, per-token prefill, partitions", tuning: Tuning{AttnPrefillMinQuery: -1, AttnPartitionSize: 16},
			seqs: [][2]int{{40, 3}}, heads: 4, kv: 1, dim: 32, bs: 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			be, err := New(emuDevice(t), Options{Tuning: c.tuning})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			got, want, _, _ := runWindowAttention(t, be, c, c.window)
			if d := kernels.MaxAbsDiff(got, want); d > 1e-4 || math.IsNaN(d) {
				t.Errorf("max error %g against the reference", d)
			}
		})
	}
}
