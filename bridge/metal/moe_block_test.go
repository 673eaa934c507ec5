package metal_test

import (
	"fmt"
	"github.com/mtlbench/mtlbench/kernels"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/engine/enginetest"
	"github.com/mtlbench/mtlbench/runner/model"
)

// TestMoEDecodeBlock: a decode step's MoE block, packed or float, is three
// dispatches (the router GEMV with the norm before the block folded in,
// gate/up with the routing, down with the weighted combine and the residual
// add: docs/metal-kernels.md, "The MoE block in a decode step"), and gives
// the tokens, logits (within 1e-4) and distinct experts a layer of the
// unfused block (router, moe_route, the expert GEMVs and moe_combine), with
// the top-k weights renormalised and not.
func TestMoEDecodeBlock(t *testing.T) {
	mini := func(q string) model.Spec { return model.Spec{Model: "qwen3-moe-mini", Quant: q, Seed: 5, Layers: 2} }
	for _, c := range []struct {
		name     string
		spec     model.Spec
		normTopK bool
		uniform  bool // one format for q, k and v in every layer
	}{
		{"q4", mini("q4"), true, true}, // an 8-bit router, as mlx-lm writes it
		{"q4", mini("q4"), false, true},
		{"q4_k_m", mini("q4_k_m"), true, true},
		// llama-quantize's file: an f32 router on matvec_fused's rows, v in
		// Q6_K in some layers.
		{"llamacpp-q4_k_m", model.Spec{Model: "../../runner/testdata/gguf/llamacpp-qwen3_moe-q4_k_m.gguf"}, true, false},
		// Float experts: bf16, and transformers' f32 checkpoint.
		{"bf16", mini(""), true, true},
		{"bf16", mini(""), false, true},
		{"hf-f32", model.Spec{Model: filepath.Join(fixtureDir, "qwen3_moe")}, true, false}, // a dense layer too
	} {
		t.Run(fmt.Sprintf("%s/norm_topk=%v", c.name, c.normTopK), func(t *testing.T) {
			off, mb := newEmu(t, metal.Tuning{}), newEmu(t, metal.Tuning{})
			spec := c.spec
			var engs [2]*engine.Engine
			for i, be := range []*metal.Backend{off, mb} {
				cfg, src, err := model.Open(spec)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { src.Close() })
				cfg.NormTopK = c.normTopK
				if engs[i], err = engine.New(be, cfg, src, engine.Options{Synchronous: true, NoFusion: i == 0}); err != nil {
					t.Fatal(err)
				}
				// One prompt token: its step is a decode-shaped one, whose
				// logits come back.
				if err := engs[i].Add(engine.Request{Prompt: []int32{7}, MaxNewTokens: 4, WantLogits: true}); err != nil {
					t.Fatal(err)
				}
			}
			for step := 0; engs[0].Pending(); step++ {
				or, err := engs[0].Step()
				if err != nil {
					t.Fatal(err)
				}
				mr, err := engs[1].Step()
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(or.Stats.ExpertsTouched, mr.Stats.ExpertsTouched) {
					t.Errorf("step %d: experts touched %v, unfused %v", step, mr.Stats.ExpertsTouched, or.Stats.ExpertsTouched)
				}
				if len(or.Sampled) != 1 || len(mr.Sampled) != 1 || or.Sampled[0].Token != mr.Sampled[0].Token {
					t.Fatalf("step %d: sampled %v, unfused %v", step, mr.Sampled, or.Sampled)
				}
				if ol := or.Sampled[0].Logits; ol != nil {
					d := kernels.MaxAbsDiff(mr.Sampled[0].Logits, ol)
					t.Logf("step %d: logits within %.2g of the unfused block's", step, d)
					if d > 1e-4 || len(ol) == 0 {
						t.Errorf("step %d: logits differ from the unfused block's by %.3g", step, d)
					}
				}
				st, _ := mb.LastStepCost()
				var names []string
				for _, s := range st {
					names = append(names, s.Kernel)
				}
				got := strings.Join(names, " ")
				// Each layer's block: the router right after the o GEMV (its
				// norm folded in), then gate/up and the sum, nothing after.
				gateUp := func(k string) bool {
					return strings.HasPrefix(k, "moe_mv_pair_") || strings.HasPrefix(k, "qmoe_mv_") && !strings.HasPrefix(k, "qmoe_mv_sum_")
				}
				sum := func(k string) bool {
					return strings.HasPrefix(k, "moe_mv_sum_") || strings.HasPrefix(k, "qmoe_mv_sum_")
				}
				blocks := 0
				for i, k := range names {
					if !gateUp(k) {
						continue
					}
					blocks++
					if i < 2 || i+1 == len(names) || !sum(names[i+1]) || strings.Contains(names[i-2], "norm") {
						t.Errorf("step %d: a MoE block of more than three dispatches: %s", step, got)
					}
				}
				if cfg := engs[1].Config(); blocks != cfg.Layers-len(cfg.MLPOnlyLayers) {
					t.Errorf("step %d: %d MoE blocks: %s", step, blocks, got)
				}
				for _, k := range []string{"moe_route", "moe_router_route", "moe_group", "moe_combine"} {
					if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, k) }) {
						t.Errorf("step %d: %s in a fused decode step: %s", step, k, got)
					}
				}
				// Where every layer's q/k/v share a format: per layer q/k/v,
				// attention, o, router, gate/up and down; the embedding and
				// the LM head, and where the step samples on the device the
				// merge of the argmax the LM head folds in (gemv_argmax).
				cfg := engs[1].Config()
				want := 2 + 6*cfg.Layers
				if mr.Sampled[0].Logits == nil {
					want++
				}
				if n := len(names); c.uniform && n != want {
					t.Errorf("step %d: %d dispatches, want %d: %s", step, n, want, got)
				}
			}
		})
	}
}

// TestQMoEBounds: MoEs of up to 256 experts route inside qmoe_mv and up
// to 16 experts a token are summed inside qmoe_mv_sum; beyond, moe_route
// and moe_combine keep their dispatches. All match the reference.
func TestQMoEBounds(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	for _, c := range []struct {
		experts, topK  int
		route, combine bool // moe_route, moe_combine dispatched
	}{{8, 2, false, false}, {8, 3, false, false}, {256, 8, false, false}, {257, 8, true, false}, {40, 16, false, false},
		{40, 17, false, true}} {
		args := ops.Args{Op: ops.QMoE, DType: ops.Q4, Ints: ops.Shape{ops.Tokens: 1, ops.Experts: c.experts, ops.TopK: c.topK,
			ops.Hidden: 256, ops.Intermediate: 64}}
		checkOp(t, be, args)
		var names []string
		for _, s := range stepStats(t, be, args) {
			names = append(names, s.Kernel)
		}
		if slices.Contains(names, "moe_route") != c.route || slices.Contains(names, "moe_combine") != c.combine ||
			slices.Contains(names, "qmoe_mv_sum_affine4") == c.combine {
			t.Errorf("%d experts, top %d: dispatches %v", c.experts, c.topK, names)
		}
	}
}

// TestGroupedExpertGEMVs: a block of a few tokens on the expert GEMVs
// groups its pairs by expert as its strategy says (moePerPair): grouped
// and chunked run qmoe_mv and the float GEMVs over moe_group's tiles, loop
// (and one token) the three-dispatch block, each against the reference;
// and grouping reads an expert's weights once a tile, so grouped reads
// fewer weight bytes than loop, no more than the distinct experts' rows
// and at least them.
func TestGroupedExpertGEMVs(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	for _, c := range []struct {
		op       ops.ID
		dt       ops.DType
		tokens   int
		strategy ops.MoEStrategy
		chunk    int
		tiles    bool // moe_group dispatched
	}{
		{ops.QMoE, ops.Q4, 6, ops.MoEGrouped, 0, true},
		{ops.QMoE, ops.Q4, 6, ops.MoEChunked, 5, true},
		{ops.QMoE, ops.Q4, 6, ops.MoELoop, 0, false},
		{ops.QMoE, ops.Q4, 6, ops.MoEChunked, 1, false},
		{ops.QMoE, ops.Q4, 1, ops.MoEGrouped, 0, false},
		{ops.QMoE, ops.Q4_K, 9, ops.MoEGrouped, 0, true},
		{ops.QMoE, ops.Q8_0, 3, ops.MoEGrouped, 0, true},
		{ops.QMoE, ops.IQ2_XXS, 3, ops.MoEGrouped, 0, true},
		{ops.MoE, ops.BF16, 6, ops.MoEGrouped, 0, true},
		{ops.MoE, ops.BF16, 6, ops.MoELoop, 0, false},
	} {
		ints := ops.Shape{ops.Tokens: c.tokens, ops.Experts: 16, ops.TopK: 4, ops.Hidden: 256, ops.Intermediate: 256}
		if c.chunk > 0 {
			ints[ops.MoEChunk] = c.chunk
		}
		args := ops.Args{Op: c.op, DType: c.dt, Ints: ints, MoEStrategy: c.strategy}
		checkOp(t, be, args)
		var names []string
		for _, s := range stepStats(t, be, args) {
			names = append(names, s.Kernel)
		}
		if slices.Contains(names, "moe_group") != c.tiles || slices.ContainsFunc(names, func(n string) bool {
			return strings.HasPrefix(n, "qmoe_mm_") || strings.HasPrefix(n, "moe_mm_")
		}) {
			t.Errorf("%s %s, %d tokens, %s/%d: dispatches %v", c.op, c.dt, c.tokens, c.strategy, c.chunk, names)
		}
	}

	// The weights each schedule reads, at Qwen3-30B-A3B's top-8 of 128 over
	// 16 tokens (scaled down): grouped reads each routed expert's rows about
	// once, loop once a pair.
	weights := func(s ops.MoEStrategy) (read, footprint int64) {
		args := ops.Args{Op: ops.QMoE, DType: ops.Q4, MoEStrategy: s, Ints: ops.Shape{ops.Tokens: 16, ops.Experts: 128,
			ops.TopK: 8, ops.Hidden: 256, ops.Intermediate: 128}}
		for _, o := range mtl.SumByOperand(stepStats(t, be, args)) {
			if strings.HasPrefix(o.Kernel, "qmoe_mv") && (o.Name == "w" || o.Name == "w2") {
				read += o.Read
				footprint += o.FootprintRead
			}
		}
		return read, footprint
	}
	gr, gf := weights(ops.MoEGrouped)
	lr, lf := weights(ops.MoELoop)
	t.Logf("expert weights read: grouped %d B (distinct %d), loop %d B (distinct %d)", gr, gf, lr, lf)
	if gf != lf || gr < gf || float64(gr) > 1.05*float64(gf) || float64(lr) < 1.3*float64(gr) {
		t.Errorf("expert weights read: grouped %d B of %d distinct, loop %d B of %d distinct", gr, gf, lr, lf)
	}
}

// A MoE layer of one expert whose packed weights the backend maps in place
// (its stacked region is then that expert's own tensor) runs as the CPU
// does: the tokens, and logits within 1e-4, prefill tiles and decode
// GEMVs, with the expert top-1 of one and routed in float or packed.
func TestOneExpertMatchesCPU(t *testing.T) {
	mb := newEmu(t, metal.Tuning{})
	for _, c := range []struct {
		dtype string
		inter int
	}{{"q8_0", 32}, {"q4", 64}, {"q8", 64}, {"f32", 32}} {
		t.Run(c.dtype, func(t *testing.T) {
			js := fmt.Sprintf(`{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 64,
				"num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "intermediate_size": 64,
				"moe_intermediate_size": %d, "num_experts": 1, "num_experts_per_tok": 1, "norm_topk_prob": true,
				"num_hidden_layers": 2, "vocab_size": 77, "rms_norm_eps": 1e-6, "tie_word_embeddings": false}`, c.inter)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(js), 0o644); err != nil {
				t.Fatal(err)
			}
			spec := model.Spec{Model: dir, Synthetic: true, Seed: 3}
			if c.dtype == "f32" {
				dt := bridge.F32
				spec.DType = &dt
			} else {
				spec.Quant = c.dtype
			}
			reqs := []engine.Request{{ID: 1, Prompt: enginetest.Prompt(9, 77), MaxNewTokens: 3, WantLogits: true},
				{ID: 2, Prompt: enginetest.Prompt(30, 77), MaxNewTokens: 3, WantLogits: true}}
			var outs [2][]engine.Output
			for i, be := range []bridge.Backend{mb, cpu.New(cpu.Options{})} {
				cfg, src, err := model.Open(spec)
				if err != nil {
					t.Fatal(err)
				}
				defer src.Close()
				e, err := engine.New(be, cfg, src, engine.Options{KVTokens: 256, KVDType: "f32"})
				if err != nil {
					t.Fatal(err)
				}
				if outs[i], err = e.Generate(reqs); err != nil {
					t.Fatalf("%s: %v", be.Info().Backend, err)
				}
				e.Close()
			}
			enginetest.OutputsMatch(t, outs[0], outs[1], "the CPU's", 1e-4)
		})
	}
}

// The expert kernels follow the rows each routed expert gets, not the
// token count (ops.MetalMoERows, docs/metal-kernels.md, "MoE tile
// occupancy"): with Qwen3-30B-A3B's routing (128 experts, top-8) a call of
// 16 tokens, 1.6 rows an expert, stays on the matvecs, which read each
// routed expert's weights once, where a rule by tokens (above 8) put it on
// tiles of 16 to 64 rows holding one or two; past ops.MetalMoEMatVecMaxRows
// (2, rounded: 36 tokens are 2.5 rows and stay) the simdgroup_matrix tiles
// run. Each call matches the reference.
func TestMoEPathByRowsPerExpert(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	for _, c := range []struct {
		tokens int
		tiles  bool
	}{{1, false}, {16, false}, {36, false}, {64, true}, {256, true}} {
		a := ops.Args{Op: ops.MoE, Ints: ops.Shape{ops.Tokens: c.tokens, ops.Experts: 128, ops.TopK: 8, ops.Hidden: 64,
			ops.Intermediate: 64}, DType: ops.BF16}
		w, _, _ := checkedWitness(t, be, a)
		var mv, mm []string
		for _, k := range w.Kernels {
			switch {
			case strings.HasPrefix(k.Kernel, "moe_mv_"):
				mv = append(mv, k.Kernel)
			case strings.HasPrefix(k.Kernel, "moe_mm_"):
				mm = append(mm, k.Kernel)
			}
		}
		rows := ops.MoERowsPerExpert(c.tokens, 128, 8)
		t.Logf("%d tokens, %.1f rows an expert: matvecs %v, tiles %v", c.tokens, rows, mv, mm)
		if c.tiles && (len(mm) == 0 || len(mv) > 0) || !c.tiles && (len(mv) == 0 || len(mm) > 0) {
			t.Errorf("%d tokens (%.1f rows an expert): matvecs %v, tiles %v; want the %s", c.tokens, rows, mv, mm,
				map[bool]string{true: "tiles", false: "matvecs"}[c.tiles])
		}
	}
}
