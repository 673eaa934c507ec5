package metal_test

import (
	"context"
	"flag"
	"github.com/mtlbench/mtlbench/kernels"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/kbench"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/tune"
	"github.com/mtlbench/mtlbench/runner/tune/tuner"
	"github.com/mtlbench/mtlbench/suites"
)

// metalShapes are ragged shapes for every Metal tuning space: outputs and
// k off the tiles, odd token counts, contexts crossing partitions, blocks
// too small for the prefill tiles.
var metalShapes = map[ops.ID][]tune.Shape{
	// m across 64-row tiles, k across 32-deep steps and off 8 (the tiles'
	// element-wise staging).
	ops.MatMul: {{ops.M: 1, ops.N: 200, ops.K: 72}, {ops.M: 5, ops.N: 100, ops.K: 40}, {ops.M: 13, ops.N: 72, ops.K: 40},
		{ops.M: 70, ops.N: 72, ops.K: 100}},
	// Packed GEMVs (1 and 5 rows: n off every rows-per-simdgroup choice)
	// and packed matmuls above the GEMV's rows, n and m off every tile (k
	// whole units of every format: 256 for the K-quants).
	ops.QMatMul: {{ops.M: 1, ops.N: 203, ops.K: 256}, {ops.M: 5, ops.N: 70, ops.K: 512},
		{ops.M: 37, ops.N: 200, ops.K: 256}, {ops.M: 70, ops.N: 72, ops.K: 512}},
	// Packed experts of 1 and about 25 rows each (the GEMVs and the tiles
	// by default), hidden and intermediate whole groups of 64.
	ops.QMoE: {{ops.Tokens: 3, ops.Experts: 6, ops.TopK: 2, ops.Hidden: 128, ops.Intermediate: 64},
		{ops.Tokens: 37, ops.Experts: 3, ops.TopK: 2, ops.Hidden: 128, ops.Intermediate: 192}},
	ops.PagedAttentionDecode: {
		{ops.Seqs: 3, ops.Context: 300, ops.NumHeads: 8, ops.NumKVHeads: 2, ops.HeadSize: 32, ops.BlockSize: 16},
		{ops.Seqs: 1, ops.Context: 77, ops.NumHeads: 4, ops.NumKVHeads: 4, ops.HeadSize: 64, ops.BlockSize: 8}},
	ops.PagedAttentionPrefill: {
		{ops.Seqs: 2, ops.Tokens: 13, ops.NumHeads: 4, ops.NumKVHeads: 2, ops.HeadSize: 32, ops.BlockSize: 8},
		{ops.Seqs: 1, ops.Tokens: 5, ops.NumHeads: 2, ops.NumKVHeads: 1, ops.HeadSize: 64, ops.BlockSize: 16},
		{ops.Seqs: 3, ops.Tokens: 37, ops.NumHeads: 4, ops.NumKVHeads: 1, ops.HeadSize: 128, ops.BlockSize: 32}},
	ops.RMSNorm:      {{ops.Tokens: 3, ops.Width: 200}, {ops.Tokens: 1, ops.Width: 1100}},
	ops.AddRMSNorm:   {{ops.Tokens: 3, ops.Width: 200}},
	ops.LayerNorm:    {{ops.Tokens: 3, ops.Width: 200}, {ops.Tokens: 1, ops.Width: 1100}},
	ops.AddLayerNorm: {{ops.Tokens: 3, ops.Width: 200}},
	// Rows off 16-byte boundaries, split into 2 to 5 partitions and one;
	// a row of 70,001 past 64 partitions of the smallest.
	ops.Argmax: {{ops.Tokens: 3, ops.Width: 5003}, {ops.Tokens: 1, ops.Width: 70001}},
	ops.MoE: {{ops.Tokens: 1, ops.Experts: 6, ops.TopK: 2, ops.Hidden: 72, ops.Intermediate: 40},
		{ops.Tokens: 5, ops.Experts: 6, ops.TopK: 2, ops.Hidden: 40, ops.Intermediate: 24},
		{ops.Tokens: 11, ops.Experts: 5, ops.TopK: 3, ops.Hidden: 48, ops.Intermediate: 40}},
}

// metalTileShapes are MoE shapes of 20-25 rows per expert (the tiles by
// default), across every tile height, with hidden and intermediate on and
// off 8 (the tiles' vector and element-wise staging). The dispatch
// strategies are checked at metalShapes; here only the grouped one, whose
// tiles are the tallest.
var metalTileShapes = []tune.Shape{
	{ops.Tokens: 37, ops.Experts: 3, ops.TopK: 2, ops.Hidden: 64, ops.Intermediate: 48},
	{ops.Tokens: 40, ops.Experts: 4, ops.TopK: 2, ops.Hidden: 36, ops.Intermediate: 20},
}

var sweepOp = flag.String("sweep", "", "TestLaunchConfigsMatchReference: only this op's space (e.g. moe)")

// moeOverride runs every MoE call with p's dispatch, as the tuner does.
type moeOverride struct {
	*metal.Backend
	p *bridge.MoEParams
}

func (m *moeOverride) MoE(out, x bridge.Tensor, w *bridge.MoEWeights, p bridge.MoEParams) {
	if m.p != nil {
		p = *m.p
	}
	m.Backend.MoE(out, x, w, p)
}

// Every config in the declared space of every Metal tunable kernel
// computes what the reference does at ragged shapes, on the emulator: a
// candidate the tuner might pick must never be wrong. -short checks the
// first shape of each.
func TestLaunchConfigsMatchReference(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	start := time.Now()
	total := 0
	pipes := map[ops.ID]int{}
	only := *sweepOp
	for _, k := range tune.Kernels("metal-emu") {
		if only != "" && string(k.Op) != only {
			continue
		}
		before := be.Pipelines()
		shapes := metalShapes[k.Op]
		if len(shapes) == 0 {
			t.Errorf("%s: no test shapes", k.Op)
		}
		if testing.Short() {
			shapes = shapes[:1]
		}
		groupedOnly := len(shapes)
		if k.Op == ops.MoE && !testing.Short() {
			shapes = append(shapes[:len(shapes):len(shapes)], metalTileShapes...)
		}
		lim := tune.LimitsFor(be, string(k.Op), k.DType)
		for si, s := range shapes {
			s, err := k.Normalize(s, lim)
			if err != nil {
				t.Fatal(err)
			}
			a := ops.Args{Op: k.Op, Ints: k.OpParams(s), DType: ops.DType(k.DType)}
			if k.Op == ops.MatMul || k.Op == ops.MoE {
				a.DType = ops.BF16
			}
			run := &moeOverride{Backend: be}
			bench, err := kbench.Prepare(run, a)
			if err != nil {
				t.Fatal(err)
			}
			cands, pruned := k.Candidates(s, lim)
			if si >= groupedOnly {
				cands = slices.DeleteFunc(cands, func(c tune.Config) bool { return c[ops.KnobStrategy] != string(ops.MoEGrouped) })
			}
			for _, cfg := range cands {
				be.SetLaunchConfig(string(k.Op), func(string, map[string]int) (map[string]string, bool) { return cfg, true })
				if k.Op == ops.MoE {
					p := tune.MoEParams(cfg)
					run.p = &p
				}
				if _, err := bench.Check(); err != nil {
					t.Errorf("%s %s config %s: %v", k.Op, s.Key(), k.String(cfg), err)
				}
			}
			be.SetLaunchConfig(string(k.Op), nil)
			bench.Close()
			total += len(cands)
			t.Logf("%s %s: %d configs checked, %d pruned", k.Op, s.Key(), len(cands), len(pruned))
		}
		pipes[k.Op] = be.Pipelines() - before
	}
	// The configs reach the kernels: each variant is a pipeline of its own
	// (function constants), built on first use. -short runs each kernel's
	// first shape only, whose space may hold fewer variants (a one-row
	// qmatmul has 5).
	for op, least := range map[ops.ID]int{ops.MatMul: 10, ops.MoE: 10, ops.PagedAttentionDecode: 4, ops.QMatMul: 10, ops.QMoE: 10} {
		if testing.Short() {
			least = min(least, 4)
		}
		if _, ran := pipes[op]; ran && pipes[op] < least {
			t.Errorf("%s: %d new pipelines over its configs; the tuned variants did not run", op, pipes[op])
		}
	}
	t.Logf("%d configs checked in %v", total, time.Since(start).Round(time.Millisecond))
}

// A config the kernels cannot run is refused at its dispatch, and the
// tuner disqualifies it and says why; on the emulator nothing is written
// as a tuned config.
func TestTunerDisqualifiesOnEmulator(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	base, err := tune.Find("metal", string(ops.MatMul))
	if err != nil {
		t.Fatal(err)
	}
	// A test-only space: the matvec with 5 rows per simdgroup (the kernel
	// takes 1 to 4) or 64 simdgroups (2048 threads, past Apple's 1024).
	bad := *base
	bad.Params = []tune.Param{
		{Name: ops.KnobRows, Values: tune.Enum("4", "5")},
		{Name: ops.KnobSimdgroups, Values: tune.Enum("4", "64")},
	}
	bad.Constraints, bad.Canonical = nil, nil
	bad.Default = func(tune.Shape, tune.Limits) tune.Config {
		return tune.Config{ops.KnobRows: "4", ops.KnobSimdgroups: "4"}
	}
	bad.Format = nil
	defer tune.Register(&bad)()

	r := tuneBucket(t, be, string(ops.MatMul), "bf16", tune.Shape{ops.M: 3, ops.N: 100, ops.K: 40}, 2)
	if !r.Emulated || r.Entry != nil || !strings.HasPrefix(r.Verdict, "emulated") {
		t.Errorf("emulated %v, entry %v, verdict %q: want an emulated result without a tuned config", r.Emulated, r.Entry, r.Verdict)
	}
	status := map[string]string{}
	for _, c := range r.Candidates {
		status[c.Config.Key()] = c.Status + ": " + c.Reason
		t.Logf("%s: %s %s", c.Config.Key(), c.Status, c.Reason)
	}
	for key, why := range map[string]string{
		"rows=5,simdgroups=4":  "MatVecRows=5",
		"rows=4,simdgroups=64": "MatVecSimdgroups=2048",
		"rows=5,simdgroups=64": "refused",
	} {
		if !strings.HasPrefix(status[key], tuner.StatusDisqualified) || !strings.Contains(status[key], why) {
			t.Errorf("%s: %q, want disqualified (%s)", key, status[key], why)
		}
	}
	if s := status["rows=4,simdgroups=4"]; !strings.HasPrefix(s, tuner.StatusTimed) {
		t.Errorf("the default: %q, want timed", s)
	}
}

// The tuner runs the packed kernels' candidates (its candidate backend
// passes the packed ops through): the tiles of a packed matmul and of
// packed experts are checked and timed, none disqualified.
func TestTunerRunsPackedKernels(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	for _, c := range []struct {
		kernel, dtype string
		shape         tune.Shape
	}{
		{"qmatmul", "q4_k", tune.Shape{ops.M: 40, ops.N: 96, ops.K: 256}},
		{"qmoe", "q8_0", tune.Shape{ops.Tokens: 24, ops.Experts: 3, ops.TopK: 2, ops.Hidden: 64, ops.Intermediate: 96}},
	} {
		r := tuneBucket(t, be, c.kernel, c.dtype, c.shape, 1)
		timed := 0
		for _, cand := range r.Candidates {
			switch cand.Status {
			case tuner.StatusTimed:
				timed++
			case tuner.StatusDisqualified:
				t.Errorf("%s %s: %s %s", c.kernel, cand.Config.Key(), cand.Status, cand.Reason)
			}
		}
		t.Logf("%s %s: %d candidates timed", c.kernel, c.dtype, timed)
		if timed < 8 {
			t.Errorf("%s: %d candidates timed", c.kernel, timed)
		}
	}
}

// The engine looks Metal's tuned configs up by device and runs them: a
// decode step with every launch-tuned kernel on a non-default config gives
// the default's tokens, and the engine reports which config each used.
func TestEngineUsesTunedMetalConfigs(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	cfg, _ := model.Preset("qwen3-moe-mini")
	cfg, _ = cfg.WithLayers(1)
	generate := func(o engine.Options) ([]engine.Output, map[string]string) {
		e, err := engine.New(be, cfg, model.NewCached(model.NewSynthetic(1, bridge.BF16)), o)
		if err != nil {
			t.Fatal(err)
		}
		var reqs []engine.Request
		for i := range 2 {
			p := make([]int32, 16)
			for j := range p {
				p[j] = int32(i*131 + j*7)
			}
			reqs = append(reqs, engine.Request{ID: i, Prompt: p, MaxNewTokens: 4})
		}
		out, err := e.Generate(reqs)
		if err != nil {
			t.Fatal(err)
		}
		return out, e.TunedUsed()
	}
	want, _ := generate(engine.Options{})

	entry := func(kernel string, shape tune.Shape, c tune.Config) tune.Located {
		return tune.Located{File: "test.json", Entry: tune.Entry{Device: tune.DeviceName(be), Backend: "metal-emu", Kernel: kernel,
			DType: "bf16", Shape: shape, Config: c, Speedup: 1.2, P: 0.001, Samples: 20, SourceHash: metal.KernelSourceHash(kernel)}}
	}
	l := tune.Layer{Name: tune.FromUser}
	// Decode steps of 2 tokens: the matmuls on 8-row tiles instead of the
	// matvec, the experts looped on tiles, attention with 2 simdgroups of
	// one head each.
	for _, s := range tune.MatMulShapes(cfg, 2, 2) {
		l.Entries = append(l.Entries, entry("matmul", tune.Shape{ops.M: s[0], ops.N: s[1], ops.K: s[2]},
			tune.Config{"mv_max": "0", "bm": "8", "bn": "32", "bk": "8", "sgm": "1", "sgn": "2"}))
	}
	l.Entries = append(l.Entries,
		entry("moe", tune.MoEShape(cfg, 2), tune.Config{"strategy": "loop", "mv_max": "0", "bm": "8", "bn": "16", "bk": "16", "sgm": "1", "sgn": "1"}),
		entry("paged_attention_decode", tune.Shape{ops.Seqs: 2, ops.Context: 16, ops.NumHeads: cfg.Heads, ops.NumKVHeads: cfg.KVHeads,
			ops.HeadSize: cfg.HeadDim, ops.BlockSize: 16}, tune.Config{"simdgroups": "2", "heads": "1", "part": "single"}))
	store := tune.NewStore(l)
	lookup := func(be bridge.Backend, cfg *model.Config, dt bridge.DType, moe bridge.MoEParams) engine.Tuned {
		return store.ForEngine(be, cfg, dt, moe)
	}
	got, used := generate(engine.Options{Tuned: lookup})
	if w := store.Warnings(); len(w) > 0 {
		t.Errorf("warnings: %v", w)
	}
	for i := range want {
		if !slices.Equal(got[i].Tokens, want[i].Tokens) {
			t.Errorf("request %d: tuned tokens %v, default %v", i, got[i].Tokens, want[i].Tokens)
		}
	}
	t.Logf("used: %v", used)
	for kernel, cfg := range map[string]string{"matmul": "tiles>1m/8x32x8/1x2 (user cache)", "moe": "loop/tiles>0rows/8x16x16/1x1 (user cache)",
		"paged_attention_decode": "2sg/q1/single (user cache)"} {
		if !strings.Contains(used[kernel], cfg) {
			t.Errorf("%s used %q, want %q among them", kernel, used[kernel], cfg)
		}
	}
	// What a suite run records before it starts (runner/bench tuned.go).
	rec := store.EngineChoices(be, cfg, bridge.BF16, bridge.MoEParams{}, 2, 2)
	for k, v := range store.LaunchChoices(be, cfg, bridge.BF16, 0, 2, 16) {
		rec[k] = v
	}
	if !strings.Contains(rec["matmul"], "8x32x8/1x2 (user cache)") || rec["paged_attention_decode"] != "2sg/q1/single (user cache)" ||
		!strings.HasPrefix(rec["moe"], "loop/tiles>0rows/8x16x16/1x1") {
		t.Errorf("recorded choices %v", rec)
	}
}

// A packed model's prefill looks the packed matmul's and experts' tuned
// tiles up by the model's packing (q4 here), and its decode steps the
// packed GEMVs' tuned launch, and runs them: the default's tokens, and the
// engine reports the tuned configs.
func TestEngineUsesTunedPackedTiles(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	cfg, src, err := model.Open(model.Spec{Model: "qwen3-moe-mini", Layers: 1, Seed: 1, Quant: "q4"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	const prompt = 24
	generate := func(o engine.Options) ([]engine.Output, map[string]string) {
		return generatePrompt(t, be, cfg, src, o, prompt, 3)
	}
	want, _ := generate(engine.Options{KVDType: "f32"})
	var l tune.Layer
	l.Name = tune.FromUser
	for _, s := range tune.MatMulShapes(cfg, prompt, 1) {
		if s[0] == 1 {
			continue // the LM head's one row: a GEMV, below
		}
		l.Entries = append(l.Entries, tune.Located{File: "test.json", Entry: tune.Entry{Device: tune.DeviceName(be), Backend: "metal-emu",
			Kernel: "qmatmul", DType: "q4", Shape: tune.Shape{ops.M: s[0], ops.N: s[1], ops.K: s[2]},
			Config: tune.Config{"bm": "16", "bn": "32", "bk": "32", "sgm": "2", "sgn": "1"}, Speedup: 1.2, P: 0.001, Samples: 20,
			SourceHash: metal.KernelSourceHash("qmatmul")}})
	}
	// The decode steps' packed GEMVs: 2 rows a simdgroup, 8 simdgroups.
	for _, s := range tune.MatMulShapes(cfg, 1, 1) {
		l.Entries = append(l.Entries, tune.Located{File: "test.json", Entry: tune.Entry{Device: tune.DeviceName(be), Backend: "metal-emu",
			Kernel: "qmatmul", DType: "q4", Shape: tune.Shape{ops.M: s[0], ops.N: s[1], ops.K: s[2]},
			Config: tune.Config{"rows": "2", "simdgroups": "8"}, Speedup: 1.2, P: 0.001, Samples: 20, SourceHash: metal.KernelSourceHash("qmatmul")}})
	}
	// The decode steps' packed expert GEMVs: 2 rows a simdgroup, 8 simdgroups.
	l.Entries = append(l.Entries, tune.Located{File: "test.json", Entry: tune.Entry{Device: tune.DeviceName(be), Backend: "metal-emu",
		Kernel: "qmoe", DType: "q4", Shape: tune.MoEShape(cfg, 1),
		Config: tune.Config{"mv_max": "1", "rows": "2", "simdgroups": "8"}, Speedup: 1.2, P: 0.001, Samples: 20, SourceHash: metal.KernelSourceHash("qmoe")}})
	// The prompt's 24 tokens give 3 rows a routed expert: tiles of 8 pairs.
	l.Entries = append(l.Entries, tune.Located{File: "test.json", Entry: tune.Entry{Device: tune.DeviceName(be), Backend: "metal-emu",
		Kernel: "qmoe", DType: "q4", Shape: tune.MoEShape(cfg, prompt),
		Config: tune.Config{"mv_max": "0", "bm": "8", "bn": "16", "bk": "32", "sgm": "1", "sgn": "1"}, Speedup: 1.2, P: 0.001, Samples: 20,
		SourceHash: metal.KernelSourceHash("qmoe")}})
	store := tune.NewStore(l)
	lookup := func(be bridge.Backend, cfg *model.Config, dt bridge.DType, moe bridge.MoEParams) engine.Tuned {
		return store.ForEngine(be, cfg, dt, moe)
	}
	got, used := generate(engine.Options{KVDType: "f32", Tuned: lookup})
	if w := store.Warnings(); len(w) > 0 {
		t.Errorf("warnings: %v", w)
	}
	t.Logf("used: %v", used)
	for _, want := range [][2]string{{"qmatmul", "16x32/2x1 (user cache)"}, {"qmatmul", "mv/r2/8sg (user cache)"},
		{"qmoe", "tiles>2rows/8x16/1x1 (user cache)"}, {"qmoe", "mv<=1rows/r2/8sg (user cache)"}} {
		if !strings.Contains(used[want[0]], want[1]) {
			t.Errorf("%s used %q, want the tuned %s", want[0], used[want[0]], want[1])
		}
	}
	if strings.Contains(used["qmatmul"], "mv/r2/32sg") {
		t.Errorf("a packed GEMV ran the default launch: %q", used["qmatmul"])
	}
	if d := kernels.MaxAbsDiff(got[0].Logits, want[0].Logits); !slices.Equal(got[0].Tokens, want[0].Tokens) || d > 1e-4 {
		t.Errorf("tuned tokens %v (default %v), logits %.3g apart", got[0].Tokens, want[0].Tokens, d)
	}
}

// A matmul's tuned config is looked up by its matrix's dtype, as the CPU's
// split is: a GGUF preset's F32 router (q4_k_m) beside bf16 matrices takes
// the config tuned for f32 at its shape, where it took the bf16 one, a tile
// measured with, and sized for, weights staged half as wide.
func TestTunedTileByMatrixDType(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	const prompt = 24
	tiles := map[string]tune.Config{
		"bf16": {"mv_max": "0", "bm": "16", "bn": "32", "bk": "32", "sgm": "2", "sgn": "1"},
		"f32":  {"mv_max": "0", "bm": "8", "bn": "16", "bk": "16", "sgm": "1", "sgn": "1"},
	}
	for _, tc := range []struct{ quant, used, unused string }{
		{"", "16x32x32/2x1 (user cache)", "8x16x16/1x1"},
		{"q4_k_m", "8x16x16/1x1 (user cache)", "16x32x32/2x1"},
	} {
		cfg, src, err := model.Open(model.Spec{Model: "qwen3-moe-mini", Layers: 1, Seed: 1, Quant: tc.quant})
		if err != nil {
			t.Fatal(err)
		}
		router := tune.Shape{ops.M: prompt, ops.N: cfg.NumExperts, ops.K: cfg.Hidden}
		l := tune.Layer{Name: tune.FromUser}
		for dtype, c := range tiles {
			l.Entries = append(l.Entries, tune.Located{File: "test.json", Entry: tune.Entry{Device: tune.DeviceName(be), Backend: "metal-emu",
				Kernel: "matmul", DType: dtype, Shape: router, Config: c, Speedup: 1.2, P: 0.001, Samples: 20, SourceHash: metal.KernelSourceHash("matmul")}})
		}
		store := tune.NewStore(l)
		generate := func(o engine.Options) ([]engine.Output, map[string]string) {
			return generatePrompt(t, be, cfg, src, o, prompt, 2)
		}
		want, _ := generate(engine.Options{KVDType: "f32"})
		got, used := generate(engine.Options{KVDType: "f32", Tuned: func(be bridge.Backend, cfg *model.Config, dt bridge.DType, moe bridge.MoEParams) engine.Tuned {
			return store.ForEngine(be, cfg, dt, moe)
		}})
		src.Close()
		if w := store.Warnings(); len(w) > 0 {
			t.Errorf("%q: warnings %v", tc.quant, w)
		}
		if !strings.Contains(used["matmul"], tc.used) || strings.Contains(used["matmul"], tc.unused) {
			t.Errorf("%q: matmul used %q, want %s and not %s", tc.quant, used["matmul"], tc.used, tc.unused)
		}
		// What a run records before it starts names the same.
		if rec := store.EngineChoices(be, cfg, bridge.BF16, bridge.MoEParams{}, prompt, 1); !strings.Contains(rec["matmul"], tc.used) {
			t.Errorf("%q: recorded matmul choices %q, want %s", tc.quant, rec["matmul"], tc.used)
		}
		if d := kernels.MaxAbsDiff(got[0].Logits, want[0].Logits); !slices.Equal(got[0].Tokens, want[0].Tokens) || d > 1e-3 {
			t.Errorf("%q: tuned tokens %v (default %v), logits %.3g apart", tc.quant, got[0].Tokens, want[0].Tokens, d)
		}
	}
}

// generatePrompt runs one request of a seeded prompt of prompt tokens for
// newTokens more, with logits, and gives the configs the engine's tuning
// used.
func generatePrompt(t *testing.T, be bridge.Backend, cfg *model.Config, src model.Source, o engine.Options, prompt, newTokens int) ([]engine.Output, map[string]string) {
	t.Helper()
	e, err := engine.New(be, cfg, src, o)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]int32, prompt)
	for j := range p {
		p[j] = int32(j*37 + 5)
	}
	out, err := e.Generate([]engine.Request{{ID: 1, Prompt: p, MaxNewTokens: newTokens, WantLogits: true}})
	if err != nil {
		t.Fatalf("%s: %v", cfg.Name, err)
	}
	return out, e.TunedUsed()
}

// A tuned packed GEMV launch (rows a simdgroup, simdgroups), of a matrix
// and of the experts at one token, is the one that runs: each rows value
// specializes its own pipelines, and each config passes the reference. The
// rows tried are those other than the untuned launch's (2 for the GEMV,
// 4 for the experts), whose pipelines the first Check compiles.
func TestTunedPackedGEMVRuns(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	for _, c := range []struct {
		args ops.Args
		cfg  map[string]string
		rows []string
		want int // pipelines a rows value adds
	}{
		{ops.Args{Op: ops.QMatMul, Ints: ops.Shape{ops.M: 1, ops.N: 203, ops.K: 256}, DType: ops.Q4}, nil, []string{"1", "3", "4"}, 1},
		// gate/up (SwiGLU) and down: two pipelines a rows value.
		{ops.Args{Op: ops.QMoE, Ints: ops.Shape{ops.Tokens: 1, ops.Experts: 8, ops.TopK: 2, ops.Hidden: 128, ops.Intermediate: 192}, DType: ops.Q4},
			map[string]string{ops.KnobMVMax: "2"}, []string{"1", "2", "3"}, 2},
	} {
		bench, err := kbench.Prepare(be, c.args)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bench.Check(); err != nil {
			t.Fatal(err)
		}
		for _, rows := range c.rows {
			cfg := map[string]string{ops.KnobRows: rows, ops.KnobSimdgroups: "2"}
			maps.Copy(cfg, c.cfg)
			before := be.Pipelines()
			be.SetLaunchConfig(string(c.args.Op), func(string, map[string]int) (map[string]string, bool) { return cfg, true })
			if _, err := bench.Check(); err != nil {
				t.Errorf("%s rows %s: %v", c.args.Op, rows, err)
			}
			if got := be.Pipelines() - before; got != c.want {
				t.Errorf("%s rows %s: %d new pipelines, want %d", c.args.Op, rows, got, c.want)
			}
		}
		be.SetLaunchConfig(string(c.args.Op), nil)
		bench.Close()
	}
}

// A packed MoE model's suite tunes the packed kernels its steps run: qmoe
// at the decode step's and the prompt's tokens and qmatmul at the decode
// step's and the prompt's matmuls, by its packing, not the float moe
// kernel it never runs, and the float matmul only at its F32 routers'
// shape (llama.cpp keeps ffn_gate_inp in F32).
func TestSuiteBucketsOfAPackedModel(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte(`name: packed
model: { preset: qwen3-moe-mini, dtype: q4_k_m, seed: 1 }
backend: metal-emu
params: { prompt_len: 32, gen_len: 4 }
cases:
  - name: decode
    matrix: { batch: [1] }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := suites.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := tuner.SuiteBuckets(s, be, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, b := range bs {
		got[string(b.Kernel.Op)] = append(got[string(b.Kernel.Op)], b.DType+" "+b.Shape.Key())
	}
	t.Logf("buckets: %v", got)
	if _, ok := got["moe"]; ok {
		t.Errorf("float moe buckets %v for packed experts", got["moe"])
	}
	if len(got["qmoe"]) != 2 || !strings.HasPrefix(got["qmoe"][0], "q4_k ") {
		t.Errorf("qmoe buckets %v: want the decode step's and the prompt's, q4_k", got["qmoe"])
	}
	// q's projection (512 x 512) as the decode step's GEMV and the
	// prompt's tiles.
	for _, want := range []string{"q4_k k=512,m=1,n=512", "q4_k k=512,m=32,n=512"} {
		if !slices.Contains(got["qmatmul"], want) {
			t.Errorf("qmatmul buckets %v: no %s", got["qmatmul"], want)
		}
	}
	// The routers are f32 (as llama.cpp writes them), and tuned so.
	if want := []string{"f32 k=512,m=1,n=32"}; !slices.Equal(got["matmul"], want) {
		t.Errorf("float matmul buckets %v, want only the routers' %v", got["matmul"], want)
	}
	if slices.ContainsFunc(got["qmatmul"], func(b string) bool { return strings.Contains(b, "n=32") }) {
		t.Errorf("qmatmul buckets %v at the float routers' shape", got["qmatmul"])
	}
}

// tuneBucket tunes one bucket of kernel at shape on be, with rounds timed
// and confirming rounds of a millisecond each, and returns its result.
func tuneBucket(t *testing.T, be bridge.Backend, kernel, dtype string, shape tune.Shape, rounds int) *tuner.Result {
	t.Helper()
	b, err := tuner.ShapeBucket(be, kernel, dtype, shape, "test")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tuner.Run(context.Background(), []tuner.Bucket{b}, tuner.Options{Backend: be, Rounds: rounds, Confirm: rounds,
		SampleTime: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if r.Err != nil {
		t.Fatalf("%s: %v", kernel, r.Err)
	}
	return r
}
