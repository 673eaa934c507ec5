package metal_test

import (
	"fmt"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/quanttest"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// TestAffineTileWitness runs mlx's affine formats on the prefill tiles
// against kernels/quant's reference and holds what the emulator counts: a
// tile thread reads its staged row's scales and biases once a span of
// groups, 16, 8 or 4 bytes a load as a row's scale bytes allow
// (quant.metal q_affine_held), where each unit read its group's scale and
// bias in two loads of 2 bytes (4 in f32). qmatmul_mm at 64 rows of x by
// 128 weight rows (128 k steps at k = 4096) at every group size and scale
// type, at rows whose scales take 8- and 4-byte spans (k = 768, 1216) and
// at rows of an odd number of groups of 32 (k = 1184), read a group a
// load as before; kbench's affine cases (group 64, bf16) at 64 rows by 512
// of 4096 and a MoE block of 64 tokens grouped by expert. Each unit's two
// loads took 11.47, 12.00 and 11.47 bytes a load and 672 critical loads at
// 4 bits in groups of 64, 32 (f32) and 128, 800 at 8 bits, 928 at 3 and
// 6, 672 at 2, 1184 at 5; the kbench GEMMs 12.00, 12.50, 8.89 and 10.22
// bytes a load and 640, 768, 896 and 896 critical loads (4, 8, 3, 6 bits),
// the MoE blocks 9.14 and 10.23, 227 and 251 (docs/metal-kernels.md, "The
// tiled GEMM's loads"). Each tile takes one barrier a k step where its two
// stages fit, two where one does (checkTileBarriers; qmoe_mm_down took two
// when every packed tile staged one step at a time: "The packed tiles'
// stages").
func TestAffineTileWitness(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: emulates 64-row prefill GEMMs")
	}
	be := newEmu(t, metal.Tuning{})
	for _, c := range []struct {
		spec        quant.Spec
		k           int
		minBytes    float64 // bytes a load, at least
		maxCritical int64   // the busiest simdgroup's loads, at most
		maxMB       float64 // counted bytes, at most
	}{
		{quant.Spec{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16}, 4096, 14.9, 432, 1.41},
		{quant.Spec{Type: quant.Affine, Bits: 4, Group: 32, Scale: quant.F32}, 4096, 14.9, 480, 1.51},
		{quant.Spec{Type: quant.Affine, Bits: 4, Group: 128, Scale: quant.F16}, 4096, 14.9, 424, 1.40},
		{quant.Spec{Type: quant.Affine, Bits: 8, Group: 64, Scale: quant.BF16}, 4096, 15.0, 560, 1.68},
		{quant.Spec{Type: quant.Affine, Bits: 3, Group: 32, Scale: quant.F16}, 4096, 10.5, 704, 1.38},
		{quant.Spec{Type: quant.Affine, Bits: 6, Group: 64, Scale: quant.BF16}, 4096, 12.0, 688, 1.55},
		{quant.Spec{Type: quant.Affine, Bits: 2, Group: 64, Scale: quant.BF16}, 4096, 13.5, 432, 1.28},
		{quant.Spec{Type: quant.Affine, Bits: 5, Group: 32, Scale: quant.F32}, 4096, 9.4, 992, 1.58},
		{quant.Spec{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16}, 768, 11.7, 110, 0.32},
		{quant.Spec{Type: quant.Affine, Bits: 8, Group: 32, Scale: quant.F16}, 1216, 12.2, 222, 0.56},
		{quant.Spec{Type: quant.Affine, Bits: 4, Group: 32, Scale: quant.F16}, 1184, 10.4, 217, 0.47},
		{quant.Spec{Type: quant.Affine, Bits: 5, Group: 32, Scale: quant.F32}, 1184, 7.7, 365, 0.51},
	} {
		name := fmt.Sprintf("%v, k=%d", c.spec, c.k)
		t.Run(name, func(t *testing.T) {
			got, want, err := quanttest.Run(be, c.spec, quanttest.Shape{M: 64, N: 128, K: c.k}, 5)
			if err != nil {
				t.Fatal(err)
			}
			if e := quanttest.RelErr(got, want); !(e <= 1e-5) {
				t.Errorf("relative error %.3g > 1e-5", e)
			}
			stats, ok := be.LastStepCost()
			if !ok {
				t.Fatal("no witnessed dispatches")
			}
			var kernels []string
			for _, s := range stats {
				kernels = append(kernels, s.Kernel)
			}
			w := mtl.Sum(stats)
			mb := float64(w.Bytes()) / 1e6
			bars := checkTileBarriers(t, stats, packedTiles(ops.Args{Ints: ops.Shape{ops.K: c.k}}, metal.Tuning{}))
			t.Logf("%v: %.2f B/load, %.1f lanes/load, %d critical loads, counted %.3f MB, barriers a k step %v", kernels,
				w.BytesPerLoad(), w.LanesPerLoad(), w.CriticalLoads, mb, barrierFigures(bars))
			if w.BytesPerLoad() < c.minBytes || w.CriticalLoads > c.maxCritical || mb > c.maxMB {
				t.Errorf("%.2f B/load (want >= %.2f), %d critical loads (want <= %d), counted %.3f MB (want <= %.3f)",
					w.BytesPerLoad(), c.minBytes, w.CriticalLoads, c.maxCritical, mb, c.maxMB)
			}
		})
	}
	for _, c := range []struct {
		args        ops.Args
		minBytes    float64
		maxCritical int64
		maxMB       float64
	}{
		{ops.Args{Op: ops.QMatMul, DType: ops.Q4, Ints: ops.Shape{ops.M: 64, ops.N: 512, ops.K: 4096}}, 15.9, 400, 5.51},
		{ops.Args{Op: ops.QMatMul, DType: ops.Q8, Ints: ops.Shape{ops.M: 64, ops.N: 512, ops.K: 4096}}, 15.9, 528, 6.56},
		{ops.Args{Op: ops.QMatMul, DType: ops.Q3, Ints: ops.Shape{ops.M: 64, ops.N: 512, ops.K: 4096}}, 10.9, 656, 5.25},
		{ops.Args{Op: ops.QMatMul, DType: ops.Q6, Ints: ops.Shape{ops.M: 64, ops.N: 512, ops.K: 4096}}, 12.6, 656, 6.03},
		{ops.Args{Op: ops.QMoE, DType: ops.Q4, Ints: ops.Shape{ops.Tokens: 64, ops.Experts: 8, ops.TopK: 2, ops.Hidden: 512, ops.Intermediate: 256}}, 13.3, 183, 5.11},
		{ops.Args{Op: ops.QMoE, DType: ops.Q8, Ints: ops.Shape{ops.Tokens: 64, ops.Experts: 8, ops.TopK: 2, ops.Hidden: 512, ops.Intermediate: 256}}, 13.9, 207, 6.68},
	} {
		t.Run(fmt.Sprintf("%v/%v", c.args.Op, c.args.DType), func(t *testing.T) {
			w, _, desc := checkedWitness(t, be, c.args)
			mb := float64(w.Cost.Bytes()) / 1e6
			stats, _ := be.LastStepCost()
			bars := checkTileBarriers(t, stats, packedTiles(c.args, metal.Tuning{}))
			t.Logf("%s: %.2f B/load, %.1f lanes/load, %d critical loads, counted %.3f MB, traffic %.3f, barriers a k step %v",
				desc, w.BytesPerLoad(), w.LanesPerLoad(), w.CriticalLoads, mb, w.Efficiency, barrierFigures(bars))
			if w.BytesPerLoad() < c.minBytes || w.CriticalLoads > c.maxCritical || mb > c.maxMB {
				t.Errorf("%.2f B/load (want >= %.2f), %d critical loads (want <= %d), counted %.3f MB (want <= %.3f)",
					w.BytesPerLoad(), c.minBytes, w.CriticalLoads, c.maxCritical, mb, c.maxMB)
			}
		})
	}
}
