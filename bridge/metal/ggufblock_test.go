package metal_test

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/kbench"
)

// TestGGUFBlockGEMV: the GEMVs and expert GEMVs of the 2-byte-aligned GGUF
// blocks (Q8_0's 34 bytes, Q4_0's and IQ4_NL's 18, Q6_K's 210 and Q3_K's
// 110), Q2_K's 4-byte-aligned 84 and MXFP4's byte-aligned 17, read in
// pieces placed by a block's alignment mod 8 (quant.metal q_block_words,
// q_run_words), against kernels/quant's reference: rows of an odd number of
// blocks (K = 96, 160, 1184; 256, 768, 1280 for the super-blocks), so rows
// start at each of 0, 2, 4 and 6 bytes past an 8-byte boundary (Q2_K: 0 and
// 4; MXFP4: each of 0 to 7, its rows of 3 and 5 blocks 51 and 85 bytes),
// and so do their blocks; row counts no rows-a-simdgroup
// divides (7, 13, 37); K past one staged chunk (4128, not a multiple of
// 256; 4352, 17 super-blocks); rows shared by a simdgroup's lanes (short
// rows) and not (K = 1184, 1280). The same rows in the prefill tiles
// (qmatmul_mm at 70 rows of x, quant.metal q_values) and the grouped
// expert tiles (37 tokens: qmoe_mm_gate_up, qmoe_mm_down). The IQ grid
// formats' 8-byte index runs (q_run_words<2>; IQ1_M's 8-byte-aligned
// blocks beside them) in 66- to 110-byte blocks, at the super-block rows'
// alignments; IQ2_S's 82- and IQ1_S's 50-byte blocks, whose GEMV units
// share the block's q_block_words pieces, at each alignment too. Q4_K's GEMV
// units share their super-block's header words between lanes, so its rows
// of 1, 3, 5 and 17 super-blocks run both lane layouts and chunks.
func TestGGUFBlockGEMV(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	type shape struct{ m, n, k int }
	blocks := []shape{{1, 7, 96}, {3, 13, 160}, {1, 37, 1184}, {5, 9, 4128}, {1, 1, 32}, {70, 13, 160}, {70, 7, 1184}}
	super := []shape{{1, 7, 256}, {3, 13, 768}, {1, 37, 1280}, {5, 9, 4352}, {1, 1, 256}, {70, 13, 768}, {70, 7, 1280}}
	for _, c := range []struct {
		dt                   ops.DType
		shapes               []shape
		hidden, intermediate int // the expert GEMVs' K: odd numbers of blocks
	}{
		{ops.Q8_0, blocks, 96, 160},
		{ops.Q4_0, blocks, 96, 160},
		{ops.IQ4_NL, blocks, 96, 160},
		{ops.MXFP4, blocks, 96, 160},
		{ops.Q6_K, super, 768, 1280},
		{ops.Q3_K, super, 768, 1280},
		{ops.Q2_K, super, 768, 1280},
		{ops.Q4_K, super, 768, 1280},
		{ops.IQ2_XXS, super, 768, 1280},
		{ops.IQ2_XS, super, 768, 1280},
		{ops.IQ3_XXS, super, 768, 1280},
		{ops.IQ3_S, super, 768, 1280},
		{ops.IQ2_S, super, 768, 1280},
		{ops.IQ1_S, super, 768, 1280},
		{ops.IQ1_M, super, 768, 1280},
	} {
		for _, s := range c.shapes {
			checkOp(t, be, ops.Args{Op: ops.QMatMul, DType: c.dt, Ints: ops.Shape{ops.M: s.m, ops.N: s.n, ops.K: s.k}})
		}
		for _, tokens := range []int{1, 3, 37} {
			checkOp(t, be, ops.Args{Op: ops.QMoE, DType: c.dt, Ints: ops.Shape{ops.Tokens: tokens, ops.Experts: 8,
				ops.TopK: 2, ops.Hidden: c.hidden, ops.Intermediate: c.intermediate}})
		}
	}
}

// TestGGUFBlockWitness holds the Q8_0 and Q4_0 GEMVs of one token by
// 4096x4096 weights (tools/ggmlwitness's shape) to what the emulator counts
// with their blocks read in 8-byte words, uints and a ushort and 2 rows a
// simdgroup in 32: 5.88 and 4.85 bytes a load (3.95 and 3.90 in uints and
// a ushort, 2.1 and 2.2 as ushorts), 49 and 33 loads in the busiest
// simdgroup (73 and 41; at 4 rows in 16 as ushorts 274 and 146), 25.6
// simdgroups a core (12.8 at 4 rows in 16), every lane busy, and all the
// bytes read once (docs/metal-kernels.md, "Against llama.cpp's kernels").
// Q6_K and Q3_K, whose units read 16-byte runs in an 8-byte word, a uint
// and two ushorts (q_run_words), hold 3.36 and 2.89 bytes a load and 69
// and 61 critical loads (1.98 and 1.89, 117 and 93 as ushorts). Q2_K,
// whose 4-byte-aligned runs take an 8-byte word and two uints
// (q_run_words<4, 4>), holds 3.39 bytes a load and 33 critical loads (3.03
// and 37 as uints). MXFP4, whose 16 bytes of codes start at any byte
// after their exponent (q_run_words<4, 1, true>: an 8-byte word, a uint,
// two ushorts and a uchar), holds 3.71 bytes a load and 41 critical loads
// (3.10 and 49 with the exponent a uchar apart, 1.11 and 137 as uchars).
// Q4_K, whose four units of a super-block each load one word of its
// 16-byte header and share them by simd_shuffle_xor, holds 12.31 bytes a
// load, 13 critical loads and every lane busy (7.83, 25 and 29.4 lanes a
// load when each unit read its own scale ushorts, 2 or 3 of them). The IQ
// grid formats whose units read 8 bytes of grid indices in q_run_words<2>'s
// uint and two ushorts hold 2.91, 2.54, 2.61 and 2.22 bytes a load and 33,
// 41, 49 and 65 critical loads (IQ2_XXS, IQ2_XS, IQ3_XXS, IQ3_S; as ushorts
// 2.34, 2.12, 2.25, 1.97 and 41, 49, 57, 73). IQ2_S, IQ1_S and IQ1_M, with
// no such run, whose units each load a piece of their super-block
// (q_block_words<20>'s twelve pieces, two a lane; q_block_words<12>'s eight;
// seven 8-byte words and one again) and share them by simd_shuffle_xor,
// hold 6.24, 7.33 and 8.89 bytes a load and 17, 9 and 9 critical loads
// (1.96, 2.42 and 2.12, 57, 33 and 49 reading their own bytes)
// (docs/metal-kernels.md, "IQ formats").
func TestGGUFBlockWitness(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: emulates a 4096x4096 GEMV")
	}
	be := newEmu(t, metal.Tuning{})
	for _, c := range []struct {
		dt            ops.DType
		minBytes      float64 // bytes a load, at least
		maxCritical   int64   // the busiest simdgroup's loads, at most
		minSimdgroups float64 // simdgroups a core of an M3 Ultra, at least
	}{
		{ops.Q8_0, 5.8, 49, 25.6},
		{ops.Q4_0, 4.8, 33, 25.6},
		{ops.Q6_K, 3.3, 69, 25.6},
		{ops.Q3_K, 2.8, 61, 25.6},
		{ops.Q2_K, 3.3, 33, 25.6},
		{ops.MXFP4, 3.6, 41, 25.6},
		{ops.Q4_K, 12.3, 13, 25.6},
		{ops.IQ2_XXS, 2.9, 33, 25.6},
		{ops.IQ2_XS, 2.5, 41, 25.6},
		{ops.IQ3_XXS, 2.6, 49, 25.6},
		{ops.IQ3_S, 2.2, 65, 25.6},
		{ops.IQ2_S, 6.2, 17, 25.6},
		{ops.IQ1_S, 7.3, 9, 25.6},
		{ops.IQ1_M, 8.8, 9, 25.6},
	} {
		b, err := kbench.Prepare(be, ops.Args{Op: ops.QMatMul, DType: c.dt, Ints: ops.Shape{ops.M: 1, ops.N: 4096, ops.K: 4096}})
		if err != nil {
			t.Fatal(err)
		}
		w, ok, err := b.Witness()
		b.Close()
		if err != nil || !ok {
			t.Fatalf("%s: witness %v (counted %v)", c.dt, err, ok)
		}
		t.Logf("%s: %.2f B/load, %.1f lanes/load, %d critical loads, %.1f simdgroups/core, counted %.2f MB, traffic %.3f, footprint %.3f",
			c.dt, w.BytesPerLoad(), w.LanesPerLoad(), w.CriticalLoads, w.SimdgroupsPerCore, float64(w.Cost.Bytes())/1e6,
			w.Efficiency, w.FootprintEfficiency(w.Ideal))
		if w.BytesPerLoad() < c.minBytes || w.CriticalLoads > c.maxCritical || w.SimdgroupsPerCore < c.minSimdgroups ||
			w.LanesPerLoad() < 32 || w.FootprintEfficiency(w.Ideal) < 1 {
			t.Errorf("%s: %.2f B/load (want >= %.1f), %d critical loads (want <= %d), %.1f simdgroups/core (want >= %.1f), %.1f lanes/load (want 32), footprint efficiency %.3f (want 1)",
				c.dt, w.BytesPerLoad(), c.minBytes, w.CriticalLoads, c.maxCritical, w.SimdgroupsPerCore, c.minSimdgroups,
				w.LanesPerLoad(), w.FootprintEfficiency(w.Ideal))
		}
	}
}

// TestPackedGEMVKeepsItsStaging: a packed GEMV whose pipeline takes fewer
// threads than its simdgroups (2 rows in 32 untuned) runs fewer simdgroups
// of more rows each, so a threadgroup still covers as many rows and stages
// its activations as often: the emulator counts the same traffic as with
// every simdgroup (before, halving the simdgroups alone halved the rows a
// threadgroup and staged the activations twice as often).
func TestPackedGEMVKeepsItsStaging(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	witness := func(dev mtl.Device, dt ops.DType) *kbench.Witness {
		be, err := metal.New(dev, metal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer be.Close()
		b, err := kbench.Prepare(be, ops.Args{Op: ops.QMatMul, DType: dt, Ints: ops.Shape{ops.M: 1, ops.N: 512, ops.K: 4096}})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		w, ok, err := b.Witness()
		if err != nil || !ok {
			t.Fatalf("%s: witness %v (counted %v)", dt, err, ok)
		}
		return w
	}
	for _, dt := range []ops.DType{ops.Q4_0, ops.Q4} {
		all := witness(emu.New(emu.Options{}), dt)
		for _, most := range []int{512} {
			capped := witness(emu.New(emu.Options{PipelineThreads: func(string) int { return most }}), dt)
			t.Logf("%s, pipelines of %d threads: traffic %.3f (%.3f with every simdgroup)", dt, most, capped.Efficiency, all.Efficiency)
			if capped.Efficiency < all.Efficiency-1e-9 {
				t.Errorf("%s, pipelines of %d threads: traffic efficiency %.3f, %.3f with every simdgroup", dt, most, capped.Efficiency, all.Efficiency)
			}
		}
	}
}

// TestGGUFBlockTileWitness holds the prefill tiles' dequantization
// (quant.metal q_values, through which qmatmul_mm and the qmoe_mm tiles
// stage each weight row's 32 values) to the loads of the GEMVs' units:
// q_block_words and q_run_words (32-byte runs) for the 2-byte-aligned
// blocks, q_run_words<8, 4> for Q2_K's, q_run_words<4, 1, true> for
// MXFP4's exponent and codes, 16- and 8-byte loads for the aligned ones,
// and a unit's two adjacent scale bytes as one ushort. A GEMM of 64 rows of
// x by 512 packed rows of 4096 values (one row tile, whose busiest
// simdgroup loads a unit and two 16-byte words of x a k step) and a MoE
// block of 64 tokens grouped by expert: read a byte or a ushort at a time,
// the GEMM took 1.6 to 3.5 bytes a load and 2816 to 12672 critical loads,
// the MoE block 1.3 to 2.2 and 635 to 2483 (docs/metal-kernels.md, "The
// tiled GEMM's loads"). The IQ grid formats' units (q_iq, shared with the
// GEMVs) read 8-byte index runs in q_run_words<2>: as ushorts IQ2_XXS,
// IQ2_XS, IQ3_XXS and IQ3_S took 8.22, 7.50, 7.09 and 6.15 bytes a load and
// 896, 1024, 1152 and 1408 critical loads in the GEMM ("IQ formats").
// Each tile takes one barrier a k step where its two stages fit, two where
// one does (checkTileBarriers, "The packed tiles' stages").
func TestGGUFBlockTileWitness(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: emulates 64-row prefill GEMMs")
	}
	be := newEmu(t, metal.Tuning{})
	type held struct {
		minBytes    float64 // bytes a load, at least
		maxCritical int64   // the busiest simdgroups' loads, at most
	}
	for _, c := range []struct {
		dt      ops.DType
		mm, moe held
	}{
		{ops.Q8_0, held{9.7, 1024}, held{7.4, 299}},
		{ops.Q4_0, held{10.2, 768}, held{7.3, 251}},
		{ops.IQ4_NL, held{10.2, 768}, held{7.3, 251}},
		{ops.MXFP4, held{8.9, 896}, held{6.2, 275}},
		{ops.Q6_K, held{7.3, 2048}, held{5.9, 491}},
		{ops.Q3_K, held{7.0, 2176}, held{5.6, 515}},
		{ops.Q2_K, held{9.2, 1152}, held{7.1, 323}},
		{ops.Q4_K, held{15.9, 640}, held{14.4, 227}},
		{ops.Q5_K, held{15.9, 896}, held{14.8, 275}},
		{ops.IQ4_XS, held{12.5, 640}, held{9.8, 227}},
		{ops.NVFP4, held{13.6, 512}, held{10.7, 203}},
		{ops.MXFP8, held{13.8, 640}, held{11.5, 227}},
		{ops.IQ2_XXS, held{9.2, 768}, held{6.1, 251}},
		{ops.IQ2_XS, held{8.3, 896}, held{5.4, 275}},
		{ops.IQ3_XXS, held{7.8, 1024}, held{5.1, 299}},
		{ops.IQ3_S, held{6.6, 1280}, held{4.3, 347}},
		{ops.IQ2_S, held{6.9, 1152}, held{4.3, 323}},
		{ops.IQ1_S, held{9.0, 768}, held{5.7, 251}},
		{ops.IQ1_M, held{7.5, 1024}, held{4.7, 299}},
	} {
		for _, k := range []struct {
			name string
			args ops.Args
			want held
		}{
			{"qmatmul", ops.Args{Op: ops.QMatMul, DType: c.dt, Ints: ops.Shape{ops.M: 64, ops.N: 512, ops.K: 4096}}, c.mm},
			{"qmoe", ops.Args{Op: ops.QMoE, DType: c.dt, Ints: ops.Shape{ops.Tokens: 64, ops.Experts: 8, ops.TopK: 2,
				ops.Hidden: 512, ops.Intermediate: 256}}, c.moe},
		} {
			t.Run(k.name+"/"+string(c.dt), func(t *testing.T) {
				w, _, desc := checkedWitness(t, be, k.args)
				stats, _ := be.LastStepCost()
				bars := checkTileBarriers(t, stats, packedTiles(k.args, metal.Tuning{}))
				t.Logf("%s: %.2f B/load, %.1f lanes/load, %d critical loads, counted %.2f MB, ideal %.2f MB, traffic %.3f, footprint %.3f, barriers a k step %v",
					desc, w.BytesPerLoad(), w.LanesPerLoad(), w.CriticalLoads, float64(w.Cost.Bytes())/1e6,
					float64(w.Ideal)/1e6, w.Efficiency, w.FootprintEfficiency(w.Ideal), barrierFigures(bars))
				if w.BytesPerLoad() < k.want.minBytes || w.CriticalLoads > k.want.maxCritical {
					t.Errorf("%s: %.2f B/load (want >= %.1f), %d critical loads (want <= %d)",
						desc, w.BytesPerLoad(), k.want.minBytes, w.CriticalLoads, k.want.maxCritical)
				}
			})
		}
	}
}
