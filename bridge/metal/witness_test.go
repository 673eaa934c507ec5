package metal_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/kbench"
)

// checkedWitness prepares a on be, checks it against the reference (an
// error past the case's tolerance fails) and counts its cost witness. It
// returns the witness, the largest error and the case's description; any
// failure ends t.
func checkedWitness(t *testing.T, be *metal.Backend, a ops.Args) (*kbench.Witness, float64, string) {
	t.Helper()
	b, err := kbench.Prepare(be, a)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	e, err := b.Check()
	if err != nil {
		t.Fatalf("%s: %v", b.Describe(), err)
	}
	w, ok, err := b.Witness()
	if err != nil || !ok {
		t.Fatalf("%s: witness %v (counted %v)", b.Describe(), err, ok)
	}
	return w, e, b.Describe()
}

// witnessCase is a kernel case whose cost witness docs/metal-kernels.md
// records.
type witnessCase struct {
	name string
	args ops.Args
}

// prefillWitnessCases are the prefill shapes of Qwen3-30B-A3B (hidden 2048,
// 32 query heads over 4 KV heads of 128, 128 experts top-8, intermediate
// 768) and TinyLlama (hidden 2048, 32/4 heads of 64, intermediate 5632) at
// t prompt tokens.
func prefillWitnessCases(t int) []witnessCase {
	mm := func(m, n, k int) ops.Args {
		return ops.Args{Op: ops.MatMul, Ints: map[ops.Param]int{ops.M: m, ops.N: n, ops.K: k}, DType: ops.BF16}
	}
	attn := func(d int) ops.Args {
		return ops.Args{Op: ops.PagedAttentionPrefill, Ints: map[ops.Param]int{ops.Seqs: 1, ops.Tokens: t, ops.NumHeads: 32,
			ops.NumKVHeads: 4, ops.HeadSize: d, ops.BlockSize: 16}, DType: ops.BF16}
	}
	moe := ops.Args{Op: ops.MoE, Ints: map[ops.Param]int{ops.Tokens: t, ops.Experts: 128, ops.TopK: 8, ops.Hidden: 2048,
		ops.Intermediate: 768}, DType: ops.BF16}
	return []witnessCase{
		{fmt.Sprintf("qwen3 q_proj GEMM, %d tokens", t), mm(t, 4096, 2048)},
		{fmt.Sprintf("qwen3 MoE, %d tokens", t), moe},
		{fmt.Sprintf("qwen3 prefill attention, %d tokens", t), attn(128)},
		{fmt.Sprintf("TinyLlama gate GEMM, %d tokens", t), mm(t, 5632, 2048)},
		{fmt.Sprintf("TinyLlama prefill attention, %d tokens", t), attn(64)},
	}
}

var (
	witnessTokens = flag.String("witness", "", "TestWitnessFigures: prompt token counts, comma-separated (e.g. 64,256)")
	witnessCases  = flag.String("witness.cases", "", "TestWitnessFigures: only cases whose names contain one of these, comma-separated")
	witnessTuning = flag.String("witness.tuning", "", "TestWitnessFigures, TestQuantWitness: a tuning's fields as JSON (e.g. {\"AttnPrefillQueries\":32})")
)

// TestWitnessFigures prints, as the rows of docs/metal-kernels.md's
// tables, what the emulator's cost witness counts for the prefill shapes
// at the token counts of -witness, each case checked against the reference
// first. The shapes take minutes on the emulator, so it runs only on
// request:
//
//	go test ./bridge/metal -run TestWitnessFigures -v -timeout 2h -args -witness=64,256
func TestWitnessFigures(t *testing.T) {
	spec, filter := *witnessTokens, *witnessCases
	if spec == "" {
		t.Skip("-witness=N,... (prompt token counts) prints the witness figures")
	}
	be := newEmu(t, flagTuning(t))
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("-witness=%q: token counts, comma-separated", spec)
		}
		for _, c := range prefillWitnessCases(n) {
			if filter != "" && !containsAny(c.name, strings.Split(filter, ",")) {
				continue
			}
			start := time.Now()
			w, e, _ := checkedWitness(t, be, c.args)
			t.Logf("| %s | %.2f MB | %.2f MB | %.3f | %.1f | %.1f | %.1f | (max err %.2g, %v)", c.name, float64(w.Bytes())/1e6,
				float64(w.Ideal)/1e6, w.Efficiency, w.BytesPerLoad(), w.SimdgroupsPerCore, w.BarriersPerThreadgroup(), e,
				time.Since(start).Round(time.Second))
			for _, k := range w.Kernels {
				t.Logf("    %s: %.2f MB, %.1f B/load, %.1f barriers/TG, %.0f B threadgroup memory", k.Kernel, float64(k.Bytes())/1e6,
					k.BytesPerLoad(), k.BarriersPerThreadgroup(), k.ThreadgroupMemoryPerThreadgroup())
			}
		}
	}
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if x != "" && strings.Contains(s, x) {
			return true
		}
	}
	return false
}

var witnessMoE = flag.Bool("witness.moe", false, "TestMoEOccupancy: print the expert kernels' traffic by rows per expert")

// TestMoEOccupancy prints what the cost witness counts for the two expert
// kernel paths, the matvecs (tiles of at most 8 rows) and the
// simdgroup_matrix tiles (of the rows' default height), at 2 to 16 rows
// per routed expert: experts of Qwen3-30B-A3B's shape (hidden 2048,
// intermediate 768), 16 of them with top-2 routing so a call stays small
// on the emulator. The rows per expert at which the tiles move fewer bytes
// set ops.MetalMoEMatVecMaxRows (docs/metal-kernels.md).
//
//	go test ./bridge/metal -run TestMoEOccupancy -v -timeout 2h -args -witness.moe
func TestMoEOccupancy(t *testing.T) {
	if !*witnessMoE {
		t.Skip("-witness.moe prints the expert kernels' traffic by rows per expert")
	}
	for _, tokens := range []int{16, 32, 64, 128} {
		a := ops.Args{Op: ops.MoE, Ints: map[ops.Param]int{ops.Tokens: tokens, ops.Experts: 16, ops.TopK: 2, ops.Hidden: 2048,
			ops.Intermediate: 768}, DType: ops.BF16}
		rows := ops.MoERowsPerExpert(tokens, 16, 2)
		for _, path := range []struct {
			name string
			tu   metal.Tuning
		}{{"matvec", metal.Tuning{MoEMatVecMaxRows: 1 << 20}}, {"tiles", metal.Tuning{MoEMatVecMaxRows: -1}}} {
			be := newEmu(t, path.tu)
			w, _, _ := checkedWitness(t, be, a)
			t.Logf("| %d | %.1f | %s | %.2f MB | %.2f MB | %.3f | %.1f | %.1f |", tokens, rows, path.name, float64(w.Bytes())/1e6,
				float64(w.Ideal)/1e6, w.Efficiency, w.BytesPerLoad(), w.BarriersPerThreadgroup())
		}
	}
}

// flagTuning is -witness.tuning's tuning (the defaults where unset).
func flagTuning(t *testing.T) metal.Tuning {
	t.Helper()
	var tu metal.Tuning
	if *witnessTuning != "" {
		if err := json.Unmarshal([]byte(*witnessTuning), &tu); err != nil {
			t.Fatalf("-witness.tuning=%s: %v", *witnessTuning, err)
		}
	}
	return tu
}

// The witness of a call is the same at every run (docs/metal-kernels.md:
// the figures are exact and repeatable), also where several tokens route
// to one expert and their threadgroups race to count it first.
func TestWitnessRepeatable(t *testing.T) {
	moe := func(op ops.ID, tokens, inter int, dt ops.DType) ops.Args {
		return ops.Args{Op: op, Ints: map[ops.Param]int{ops.Tokens: tokens, ops.Experts: 4, ops.TopK: 2, ops.Hidden: 128,
			ops.Intermediate: inter}, DType: dt}
	}
	be := newEmu(t, metal.Tuning{})
	for _, a := range []ops.Args{moe(ops.MoE, 12, 96, ops.BF16), moe(ops.MoE, 6, 96, ops.BF16), moe(ops.QMoE, 6, 128, ops.Q4)} {
		b, err := kbench.Prepare(be, a)
		if err != nil {
			t.Fatal(err)
		}
		var first []string
		for i := range 12 {
			w, ok, err := b.Rewitness()
			if err != nil || !ok {
				t.Fatalf("%s: witness %v, %v", b.Describe(), ok, err)
			}
			var got []string
			for _, k := range w.Kernels {
				got = append(got, fmt.Sprintf("%s %+v", k.Kernel, k.StepStats))
			}
			if i == 0 {
				first = got
			} else if !slices.Equal(got, first) {
				t.Errorf("%s: call %d counted\n%s\nthe first\n%s", b.Describe(), i, strings.Join(got, "\n"), strings.Join(first, "\n"))
				break
			}
		}
		b.Close()
	}
}

// packedTileSteps is what checkTileBarriers knows of a packed tile
// dispatch: its tile, the weight matrices it stages and its depth.
type packedTileSteps struct {
	tile metal.Tile
	mats int
	k    int
}

// packedTiles gives the packed tile pipelines of args run under tu (zero
// tiles: DefaultTuning's), by kernel name prefix.
func packedTiles(args ops.Args, tu metal.Tuning) map[string]packedTileSteps {
	mm, moe := tu.QMatMulTile, tu.QMoETile
	if mm == (metal.Tile{}) {
		mm = metal.DefaultTuning.QMatMulTile
	}
	if moe == (metal.Tile{}) {
		moe = metal.DefaultTuning.QMoETile
	}
	return map[string]packedTileSteps{
		"qmatmul_mm_":      {mm, 1, args.Ints[ops.K]},
		"qmoe_mm_gate_up_": {moe, 2, args.Ints[ops.Hidden]},
		"qmoe_mm_down_":    {moe, 1, args.Ints[ops.Intermediate]},
	}
}

// checkTileBarriers holds every packed tile dispatch of stats to its
// barriers a k step: one where two stages fit the tile memory
// (ops.MetalQTileMemory; quant.metal's qmm_accumulate stages step s+1
// while it multiplies step s), two where one stage does: a threadgroup's
// barriers less the one after its row map, over its k steps of 32, are 1
// double buffered (the first stage's, then one after each step but the
// last) and 2 single. Tile slots a MoE block leaves empty exit
// before any barrier, so the MoE kernels' figures are at most that. It
// returns the barriers a k step of each tile kernel, by name.
func checkTileBarriers(t *testing.T, stats []mtl.DispatchStats, tiles map[string]packedTileSteps) map[string]tileBarriers {
	t.Helper()
	got := map[string]tileBarriers{}
	for _, d := range stats {
		for prefix, p := range tiles {
			if !strings.HasPrefix(d.Kernel, prefix) || d.Threadgroups == 0 {
				continue
			}
			_, stages := ops.MetalQTileMemory(p.tile.BM, p.tile.BN, p.mats, 32<<10-1024)
			steps := float64(p.k / 32)
			per := (float64(d.Barriers)/float64(d.Threadgroups) - 1) / steps
			got[d.Kernel] = tileBarriers{per, d.Barriers, d.Threadgroups}
			if want := float64(3 - stages); per > want {
				t.Errorf("%s, tile %v: %.3f barriers a k step, want at most %g (%d stages)", d.Kernel, p.tile, per, want, stages)
			}
		}
	}
	if len(got) == 0 {
		t.Errorf("no packed tile among the dispatches")
	}
	return got
}

// tileBarriers is a packed tile kernel's barriers a k step, and the
// barriers and threadgroups they come from.
type tileBarriers struct {
	perStep                float64
	barriers, threadgroups int64
}

// barrierFigures formats checkTileBarriers' figures in kernel order.
func barrierFigures(bars map[string]tileBarriers) string {
	var b []string
	for _, k := range slices.Sorted(maps.Keys(bars)) {
		f := bars[k]
		b = append(b, fmt.Sprintf("%s %.3f (%d in %d threadgroups)", k, f.perStep, f.barriers, f.threadgroups))
	}
	return "[" + strings.Join(b, ", ") + "]"
}

// TestPackedTileBarriers runs the packed tiles (qmatmul_mm, qmoe_mm_gate_up,
// qmoe_mm_down) at their untuned tiles and at tiles whose two stages fit
// the tile memory, against the reference, and holds each to its barriers a
// k step (checkTileBarriers): a barrier before and after every step's
// multiplies where one stage fits, one a step where two do.
func TestPackedTileBarriers(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: emulates 64-row prefill GEMMs")
	}
	mm := func(dt ops.DType) ops.Args {
		return ops.Args{Op: ops.QMatMul, DType: dt, Ints: ops.Shape{ops.M: 64, ops.N: 128, ops.K: 1024}}
	}
	moe := func(dt ops.DType) ops.Args {
		return ops.Args{Op: ops.QMoE, DType: dt, Ints: ops.Shape{ops.Tokens: 64, ops.Experts: 8, ops.TopK: 2,
			ops.Hidden: 512, ops.Intermediate: 256}}
	}
	for _, c := range []struct {
		name string
		tu   metal.Tuning
		args []ops.Args
	}{
		{"untuned", metal.Tuning{}, []ops.Args{mm(ops.Q4), mm(ops.Q4_K), moe(ops.Q4), moe(ops.Q4_K)}},
		{"two stages", metal.Tuning{QMatMulTile: metal.Tile{BM: 32, BN: 64, BK: 32, SGM: 2, SGN: 2},
			QMoETile: metal.Tile{BM: 32, BN: 32, BK: 32, SGM: 2, SGN: 2}},
			[]ops.Args{mm(ops.Q4), mm(ops.Q4_K), moe(ops.Q4), moe(ops.Q4_K)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := newEmu(t, c.tu)
			for _, a := range c.args {
				_, e, desc := checkedWitness(t, be, a)
				stats, _ := be.LastStepCost()
				t.Logf("%s: error %.3g, barriers a k step %v", desc, e,
					barrierFigures(checkTileBarriers(t, stats, packedTiles(a, c.tu))))
			}
		})
	}
}
