package metal

import (
	"testing"

	"github.com/mtlbench/mtlbench/kernels/ops"
)

// The Metal spaces' constraints (kernels/ops) prune exactly the tiles
// Tile.check refuses, and every candidate overlays into a tuning the
// backend accepts: the space and the backend agree on what can run.
func TestSpacesAgreeWithTheBackend(t *testing.T) {
	lim := ops.Limits{MaxThreads: 1024, ThreadgroupMemory: 32 << 10, SIMDWidth: 32}
	shapes := map[ops.ID]ops.Shape{
		ops.MatMul:                {ops.M: 64, ops.N: 4096, ops.K: 4096},
		ops.MoE:                   {ops.Tokens: 64, ops.Experts: 8, ops.TopK: 2, ops.Hidden: 2048, ops.Intermediate: 768},
		ops.PagedAttentionDecode:  {ops.Seqs: 4, ops.Context: 4000, ops.NumHeads: 32, ops.NumKVHeads: 4, ops.HeadSize: 128, ops.BlockSize: 16},
		ops.PagedAttentionPrefill: {ops.Seqs: 2, ops.Tokens: 300, ops.NumHeads: 16, ops.NumKVHeads: 8, ops.HeadSize: 128, ops.BlockSize: 16},
		ops.QMatMul:               {ops.M: 64, ops.N: 4096, ops.K: 4096},
		ops.QMoE:                  {ops.Tokens: 64, ops.Experts: 8, ops.TopK: 2, ops.Hidden: 2048, ops.Intermediate: 768},
		ops.RMSNorm:               {ops.Tokens: 4, ops.Width: 4096},
		ops.AddRMSNorm:            {ops.Tokens: 4, ops.Width: 4096},
		ops.LayerNorm:             {ops.Tokens: 4, ops.Width: 768},
		ops.AddLayerNorm:          {ops.Tokens: 4, ops.Width: 768},
	}
	for _, k := range ops.Spaces(ops.Metal) {
		s, err := k.Normalize(shapes[k.Op], lim)
		if err != nil {
			t.Fatal(err)
		}
		tiles, agreed := 0, 0
		k.Grid(s, lim, func(raw ops.Config) {
			c := k.Canonicalize(raw, s, lim)
			if _, ok := c[ops.KnobBM]; !ok {
				return
			}
			tiles++
			mats := 2
			if k.Op == ops.MoE {
				mats = 3
			}
			tile := Tile{BM: c.Int(ops.KnobBM), BN: c.Int(ops.KnobBN), BK: c.Int(ops.KnobBK), SGM: c.Int(ops.KnobSGM), SGN: c.Int(ops.KnobSGN)}
			check := func() error { return tile.check("tile", mats == 3) }
			switch k.Op {
			case ops.QMatMul:
				check = func() error { return tile.checkPacked("tile", 1) }
			case ops.QMoE:
				check = func() error { return tile.checkPacked("tile", 2) }
			}
			backend := check() == nil
			space := true
			for _, ct := range k.Constraints {
				if ct.Name == "tile" || ct.Name == "threadgroup memory" {
					space = space && ct.Check(c, s, lim) == nil
				}
			}
			if backend != space {
				t.Errorf("%s %v: the backend's check says %v, the space %v", k.Op, tile, check(), space)
			} else {
				agreed++
			}
		})
		cands, _ := k.Candidates(s, lim)
		for _, c := range cands {
			if _, err := overlay(DefaultTuning, k.Op, c); err != nil {
				t.Errorf("%s %s: the backend refuses a candidate: %v", k.Op, k.String(c), err)
			}
		}
		t.Logf("%s: %d candidates overlay; %d of %d tiles judged alike", k.Op, len(cands), agreed, tiles)
	}
}

// The packed spaces' untuned configs (kernels/ops metalQMatVec,
// metalQMoEMatVec and their tiles) are the backend's untuned launches
// (DefaultTuning): what `mtlbench tune` times as the default is what runs
// when nothing is tuned, at the decode shapes of the GEMVs and at the
// prefill shapes of the tiles.
func TestPackedSpaceDefaultsAreTheBackends(t *testing.T) {
	lim := ops.Limits{MaxThreads: 1024, ThreadgroupMemory: 32 << 10, SIMDWidth: 32}
	for _, c := range []struct {
		op    ops.ID
		shape ops.Shape
	}{
		{ops.QMatMul, ops.Shape{ops.M: 1, ops.N: 4096, ops.K: 4096}},
		{ops.QMatMul, ops.Shape{ops.M: 128, ops.N: 4096, ops.K: 4096}},
		{ops.QMoE, ops.Shape{ops.Tokens: 1, ops.Experts: 128, ops.TopK: 8, ops.Hidden: 2048, ops.Intermediate: 768}},
		{ops.QMoE, ops.Shape{ops.Tokens: 512, ops.Experts: 8, ops.TopK: 2, ops.Hidden: 2048, ops.Intermediate: 768}},
	} {
		o, ok := ops.Lookup(c.op)
		if !ok || o.Tuning[ops.Metal] == nil {
			t.Fatalf("no Metal space for %s", c.op)
		}
		k := o.Tuning[ops.Metal]
		s, err := k.Normalize(c.shape, lim)
		if err != nil {
			t.Fatal(err)
		}
		def := k.DefaultConfig(s, lim)
		got, err := overlay(DefaultTuning, c.op, def)
		if err != nil {
			t.Fatalf("%s %v: the default {%s}: %v", c.op, c.shape, k.String(def), err)
		}
		// mv_max canonicalizes to a bound of the shape's rows per routed
		// expert that takes the same path (ops metalQMoE's Canonical).
		got.MoEMatVecMaxRows = DefaultTuning.MoEMatVecMaxRows
		if got != DefaultTuning {
			t.Errorf("%s %v: the space's default {%s} runs\n%s\nnot the untuned\n%s", c.op, c.shape, k.String(def), got, DefaultTuning)
		}
	}
}
