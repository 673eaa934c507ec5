package metal_test

import (
	"fmt"
	"github.com/mtlbench/mtlbench/kernels"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/bridge/quanttest"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// decodeRun generates from two ragged prompts and returns the tokens, the
// first prompt's last-position logits and the dispatches of the last
// (decode) step.
func decodeRun(t *testing.T, mb *metal.Backend, spec model.Spec, opts engine.Options, vocab, batch int) ([][]int32, []float32, int) {
	t.Helper()
	e := openEngine(t, mb, spec, opts)
	reqs := []engine.Request{
		{ID: 0, Prompt: []int32{1, 5, 9, 13, 2}, MaxNewTokens: 6, WantLogits: true},
		{ID: 1, Prompt: []int32{int32(vocab - 1), 3, 7}, MaxNewTokens: 6},
	}[:batch]
	for _, r := range reqs {
		if err := e.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	toks := make([][]int32, len(reqs))
	var logits []float32
	last := 0
	for e.Pending() {
		res, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Sampled {
			toks[s.ReqID] = append(toks[s.ReqID], s.Token)
			if s.Logits != nil {
				logits = s.Logits
			}
		}
		if res.PrefillTokens == 0 && res.Tokens > 0 {
			last = res.Stats.Dispatches
		}
	}
	return toks, logits, last
}

// unfusedRun is decodeRun of spec with fusion off: the model's vocabulary,
// the tokens, the last-prompt logits and the decode step's dispatches.
func unfusedRun(t *testing.T, mb *metal.Backend, spec model.Spec) (int, [][]int32, []float32, int) {
	t.Helper()
	cfg, src, err := model.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	src.Close()
	mb.SetFusions()
	toks, logits, off := decodeRun(t, mb, spec, engine.Options{NoFusion: true}, cfg.Vocab, 2)
	return cfg.Vocab, toks, logits, off
}

// checkFused runs spec with only the named fusions (nil: all) and holds it
// to the unfused run's tokens and last-prompt logits (within 1e-4) with
// fewer dispatches than its off; it returns the fused dispatches.
func checkFused(t *testing.T, mb *metal.Backend, spec model.Spec, vocab int, names []string, offToks [][]int32,
	offLogits []float32, off int) int {
	t.Helper()
	mb.SetFusions(names...)
	defer mb.SetFusions()
	toks, logits, on := decodeRun(t, mb, spec, engine.Options{}, vocab, 2)
	if fmt.Sprint(toks) != fmt.Sprint(offToks) {
		t.Errorf("tokens %v fused, %v unfused", toks, offToks)
	}
	if d := kernels.MaxAbsDiff(logits, offLogits); d > 1e-4 {
		t.Errorf("last-prompt logits differ by %.3g", d)
	}
	t.Logf("%d dispatches a decode step fused, %d unfused", on, off)
	if on >= off {
		t.Errorf("%d dispatches fused, not fewer than %d unfused", on, off)
	}
	return on
}

// Every entry of Metal's fusion table, alone and all together, gives the
// tokens and logits of unfused steps, with fewer dispatches; with them all,
// a qwen3-moe-mini decode step takes at most 70% of the unfused dispatches.
func TestFusionsMatchUnfused(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	mb := newEmu(t, metal.Tuning{})
	// Each pattern with those whose work it needs done alongside: the
	// RMSNorm folds into GEMVs only when all of its readers share the
	// dispatch.
	sets := []struct {
		names []string
		moe   bool // only MoE models have it
	}{
		{nil, false},
		{[]string{"rope_attention"}, false},
		{[]string{"gemv_shared_input"}, false},
		{[]string{"gemv_shared_input", "rmsnorm_gemv"}, false},
		{[]string{"gemv_residual", "rmsnorm_gemv", "gemv_shared_input"}, false},
		{[]string{"moe_residual", "rmsnorm_gemv", "gemv_shared_input"}, true},
		{[]string{"moe_router_topk"}, true},
		// The MoE block's norm is an RMSNorm once gemv_residual has taken
		// the add before it into the o projection.
		{[]string{"rmsnorm_moe", "gemv_residual"}, true},
		{[]string{"rmsnorm_moe", "moe_residual", "gemv_residual"}, true},
	}
	for _, c := range []struct {
		name string
		spec model.Spec
		moe  bool
	}{
		{"qwen3-moe-mini", model.Spec{Model: "qwen3-moe-mini", Seed: 3, Layers: 2}, true},
		{"qwen2", model.Spec{Model: filepath.Join(fixtureDir, "qwen2")}, false},
		{"llama", model.Spec{Model: filepath.Join(fixtureDir, "llama")}, false},
	} {
		vocab, offToks, offLogits, off := unfusedRun(t, mb, c.spec)
		for _, set := range sets {
			if set.moe && !c.moe {
				continue
			}
			only := "all"
			if set.names != nil {
				only = strings.Join(set.names, "+")
			}
			t.Run(fmt.Sprintf("%s/%s", c.name, only), func(t *testing.T) {
				on := checkFused(t, mb, c.spec, vocab, set.names, offToks, offLogits, off)
				if only == "all" && c.moe {
					// And at batch 1, where decode is a row of GEMVs.
					_, _, off1 := decodeRun(t, mb, c.spec, engine.Options{NoFusion: true}, vocab, 1)
					_, _, on1 := decodeRun(t, mb, c.spec, engine.Options{}, vocab, 1)
					t.Logf("batch 1: %d dispatches a decode step fused, %d unfused", on1, off1)
					for _, r := range [][2]int{{on, off}, {on1, off1}} {
						if float64(r[0]) > 0.7*float64(r[1]) {
							t.Errorf("%d dispatches fused against %d unfused: more than 70%%", r[0], r[1])
						}
					}
				}
			})
		}
	}
}

// Packed GEMVs of one input share a dispatch (with SwiGLU for gate and up)
// and take the norm before them and the residual add after them, as float
// ones do: the same tokens and logits as unfused steps, with fewer
// dispatches, for each of those patterns (with those whose work it needs
// alongside) and for all of them.
func TestPackedFusionsMatchUnfused(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	mb := newEmu(t, metal.Tuning{})
	for _, c := range []struct {
		name string
		spec model.Spec
	}{
		{"llama-q4", model.Spec{Model: filepath.Join("../../runner/testdata", "mlx", "llama-q4")}},
		{"qwen3_moe-q4", model.Spec{Model: filepath.Join("../../runner/testdata", "mlx", "qwen3_moe-q4")}},
		{"qwen3-moe-mini-q8", model.Spec{Model: "qwen3-moe-mini", Quant: "q8", Seed: 3, Layers: 2}},
	} {
		moe := strings.Contains(c.name, "moe")
		vocab, offToks, offLogits, off := unfusedRun(t, mb, c.spec)
		on := map[string]int{}
		for _, set := range [][]string{nil, {"gemv_shared_input"}, {"gemv_shared_input", "rmsnorm_gemv"},
			{"gemv_residual", "rmsnorm_gemv", "gemv_shared_input"}, {"moe_residual", "rmsnorm_gemv", "gemv_shared_input"},
			{"rmsnorm_moe", "gemv_residual"}, {"rmsnorm_moe", "moe_residual", "gemv_residual"}} {
			only := "all"
			if set != nil {
				only = strings.Join(set, "+")
			}
			if !moe && slices.Contains(set, "rmsnorm_moe") {
				continue // only MoE models have it
			}
			t.Run(c.name+"/"+only, func(t *testing.T) {
				on[only] = checkFused(t, mb, c.spec, vocab, set, offToks, offLogits, off)
			})
		}
		// The block takes its norm in: a dispatch fewer a layer than the
		// norm on its own, at batch 2 (the pairs grouped by expert).
		if moe {
			mb.SetFusions("gemv_residual")
			_, _, without := decodeRun(t, mb, c.spec, engine.Options{}, vocab, 2)
			mb.SetFusions()
			if with := on["rmsnorm_moe+gemv_residual"]; with >= without {
				t.Errorf("%s: %d dispatches a decode step with rmsnorm_moe, %d without", c.name, with, without)
			}
		}
	}
}

// An LM head at batch 1, packed or float, takes the greedy pick in
// (gemv_argmax, after the final norm's fold): the tokens and logits of the
// table without it, a dispatch fewer where the vocabulary is more than one
// argmax partition (qwen3-moe-mini's 8192), as many where it is one.
func TestLMHeadArgmax(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	mb := newEmu(t, metal.Tuning{})
	without := quanttest.FusionsBut(mb, "gemv_argmax")
	for _, c := range []struct {
		name  string
		spec  model.Spec
		saved int
	}{
		{"qwen3-moe-mini-q8", model.Spec{Model: "qwen3-moe-mini", Quant: "q8", Seed: 3, Layers: 2}, 1},
		{"llama-q4", model.Spec{Model: filepath.Join("../../runner/testdata", "mlx", "llama-q4")}, 0},
		{"qwen3-moe-mini-bf16", model.Spec{Model: "qwen3-moe-mini", Seed: 3, Layers: 2}, 1},
		{"llama", model.Spec{Model: filepath.Join(fixtureDir, "llama")}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, src, err := model.Open(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			src.Close()
			mb.SetFusions(without...)
			offToks, offLogits, off := decodeRun(t, mb, c.spec, engine.Options{}, cfg.Vocab, 1)
			mb.SetFusions()
			toks, logits, on := decodeRun(t, mb, c.spec, engine.Options{}, cfg.Vocab, 1)
			t.Logf("vocabulary %d: %d dispatches a decode step with gemv_argmax, %d without", cfg.Vocab, on, off)
			if fmt.Sprint(toks) != fmt.Sprint(offToks) {
				t.Errorf("tokens %v with gemv_argmax, %v without", toks, offToks)
			}
			if d := kernels.MaxAbsDiff(logits, offLogits); d > 0 {
				t.Errorf("last-prompt logits differ by %.3g", d)
			}
			if off-on != c.saved {
				t.Errorf("%d dispatches with gemv_argmax, %d without: want %d fewer", on, off, c.saved)
			}
		})
	}
}
