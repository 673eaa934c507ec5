package metal_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/kbench"
	"github.com/mtlbench/mtlbench/runner/model"
)

// countingSource counts the tensors read from a synthetic source.
type countingSource struct {
	*model.Synthetic
	reads atomic.Int64
}

func (s *countingSource) Tensor(spec model.TensorSpec) (bridge.DType, []byte, error) {
	s.reads.Add(1)
	return s.Synthetic.Tensor(spec)
}

// TestShapeRefusedBeforeLoading: a model whose heads are larger than the
// attention kernels hold, or whose tokens go to more experts than the
// routing picks, is refused by engine.New with the reason before a weight
// is read (bridge.ShapeChecker), where it failed at its first step; the
// largest of each that the kernels take passes.
func TestShapeRefusedBeforeLoading(t *testing.T) {
	be, err := metal.New(metal.NullDevice{}, metal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	const llama = `{"architectures": ["LlamaForCausalLM"], "vocab_size": 16, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 8, `
	const moe = `{"architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 16, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 8, "moe_intermediate_size": 4, `
	for _, c := range []struct{ name, json, err string }{
		{"heads of 320", llama + `"head_dim": 320}`, "metal: heads of 320 values: the attention kernels take at most 256"},
		{"heads of 256", llama + `"head_dim": 256}`, ""},
		{"top-40", moe + `"head_dim": 4, "num_experts": 64, "num_experts_per_tok": 40}`, "metal: top-40 of 64 experts: the routing takes at most 32 experts a token"},
		{"top-32", moe + `"head_dim": 4, "num_experts": 64, "num_experts_per_tok": 32}`, ""},
		{"top-40, no MoE layer", moe + `"head_dim": 4, "num_experts": 64, "num_experts_per_tok": 40, "mlp_only_layers": [0]}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := model.ParseHFConfig("config.json", []byte(c.json))
			if err != nil {
				t.Fatal(err)
			}
			if c.err == "" {
				if err := be.CheckShape(engine.ShapeOf(cfg)); err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			src := &countingSource{Synthetic: model.NewSynthetic(1, bridge.F32)}
			e, err := engine.New(be, cfg, src, engine.Options{KVTokens: 64})
			if err == nil {
				e.Close()
				t.Fatal("engine.New took the model")
			}
			if !strings.Contains(err.Error(), c.err) {
				t.Fatalf("err = %v, want %q", err, c.err)
			}
			if n := src.reads.Load(); n != 0 {
				t.Fatalf("%d tensors read before the refusal", n)
			}
		})
	}
}

// Metal's grouping sorts a step's pairs by expert in threadgroup memory, 16
// bytes an expert: a model of 2047 experts runs its steps on a 32 KiB
// device and one of 2048 is refused by engine.New, and a kernel case of as
// many by kbench. A dispatch past the device's threadgroup memory that
// comes past both fails its step with the kernel named, where a GPU would
// run it with undefined results.
func TestThreadgroupMemoryPastTheDevice(t *testing.T) {
	be, err := metal.New(metal.NullDevice{}, metal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for _, c := range []struct {
		experts int
		err     string
	}{
		{2047, ""},
		{2048, "metal: 2048 experts: the grouping takes at most 2047 in this device's 32768 bytes of threadgroup memory"},
	} {
		js := fmt.Sprintf(`{"architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 16, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
			"num_key_value_heads": 1, "head_dim": 4, "intermediate_size": 8, "moe_intermediate_size": 4, "num_experts": %d, "num_experts_per_tok": 2}`, c.experts)
		cfg, err := model.ParseHFConfig("config.json", []byte(js))
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(be, cfg, model.NewSynthetic(1, bridge.F32), engine.Options{KVTokens: 64})
		if err == nil {
			_, err = e.Generate([]engine.Request{{ID: 0, Prompt: []int32{1, 2, 3}, MaxNewTokens: 2}})
			e.Close()
		}
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%d experts: err = %v, want %q", c.experts, err, c.err)
		}
	}
	// A kernel case is refused before it allocates, as engine.New refuses.
	moe := ops.Args{Op: ops.MoE, Ints: ops.Shape{ops.Tokens: 4, ops.Experts: 2049, ops.TopK: 2, ops.Hidden: 8, ops.Intermediate: 4}, DType: ops.F32}
	if _, err := kbench.Prepare(be, moe); err == nil || !strings.Contains(err.Error(), "2049 experts: the grouping takes at most 2047") {
		t.Errorf("a kernel case of 2049 experts: %v", err)
	}
	// A dispatch that comes past both fails its step, naming the kernel.
	const E, T, H, I = 2049, 4, 8, 4
	w := &bridge.MoEWeights{TopK: 2, NormTopK: true, Hidden: H, Inter: I}
	weight := func(shape ...int) bridge.Tensor {
		x, err := be.Weight(bridge.F32, shape, make([]byte, 4*shape[0]*shape[1]))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	w.Router = weight(E, H)
	for range E {
		w.Gate, w.Up, w.Down = append(w.Gate, weight(I, H)), append(w.Up, weight(I, H)), append(w.Down, weight(H, I))
	}
	x, out := weight(T, H), weight(T, H)
	pos := []int32{0, 1, 2, 3}
	meta := &bridge.StepMeta{NumTokens: T, NumSeqs: 1, MaxQueryLen: T, MaxSeqLen: T, Positions: pos, SlotMapping: pos,
		QueryStartLoc: []int32{0, T}, SeqLens: []int32{T}, BlockTable: []int32{0}, MaxBlocks: 1, BlockSize: 16}
	if err := be.BeginStep(meta, make([]int32, T), false); err != nil {
		t.Fatal(err)
	}
	be.MoE(out, x, w, bridge.MoEParams{Strategy: bridge.MoEGrouped})
	const want = "kernel moe_group: 32784 bytes of threadgroup memory (0 of them its own), more than the device's 32768"
	if _, err := be.EndStep(); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// narrowDevice's pipelines take at most most threads a threadgroup, as
// Apple's compiler may leave a kernel heavy in registers.
type narrowDevice struct {
	metal.NullDevice
	most int
}

func (d narrowDevice) NewLibrary(f map[string]string, o mtl.CompileOptions) (mtl.Library, error) {
	l, err := d.NullDevice.NewLibrary(f, o)
	return narrowLibrary{l, d.most}, err
}

type narrowLibrary struct {
	mtl.Library
	most int
}

func (l narrowLibrary) Pipeline(k string, fc mtl.FunctionConstants) (mtl.Pipeline, error) {
	p, err := l.Library.Pipeline(k, fc)
	return narrowPipeline{p, l.most}, err
}

type narrowPipeline struct {
	mtl.Pipeline
	most int
}

func (p narrowPipeline) MaxTotalThreadsPerThreadgroup() int { return p.most }

// Kernels sized in threads (the embeddings, routing, grouping, combine,
// argmax, element-wise kernels and the norms, RMSNorm and LayerNorm, alone
// and after a residual add) or in simdgroups of any number (the matvecs,
// fused or not, RoPE, decode attention, the MoE and packed GEMVs) run on
// pipelines that take fewer than the threads asked for, with fewer; a
// pipeline that cannot take a simdgroup fails the step with the kernel
// named, where a GPU would run it with undefined results.
func TestThreadsPastThePipeline(t *testing.T) {
	for _, c := range []struct {
		most int
		tu   metal.Tuning
		err  string
	}{
		{512, metal.Tuning{}, ""},
		{256, metal.Tuning{MoEGroupThreads: 1024, ArgmaxThreads: 1024, EltThreads: 1024, NormThreads: 1024}, ""},
		{256, metal.Tuning{MatVecSimdgroups: 32, QMatVecSimdgroups: 32, QMoESimdgroups: 32, MoESimdgroups: 32, AttnSimdgroups: 32, RoPEHeads: 32}, ""},
		{16, metal.Tuning{}, "threads, where the pipeline takes 1 to 16"},
	} {
		be, err := metal.New(narrowDevice{most: c.most}, metal.Options{Tuning: c.tu})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []struct{ preset, quant string }{{"qwen3-moe-mini", ""}, {"qwen3-moe-mini", "q4"}, {"tinyllama-1.1b", "q4_k_m"}, {"gpt2", ""}} {
			dt := bridge.F32
			cfg, src, err := model.Open(model.Spec{Model: m.preset, Layers: 1, DType: &dt, Quant: m.quant})
			if err != nil {
				t.Fatal(err)
			}
			e, err := engine.New(be, cfg, src, engine.Options{KVTokens: 1024})
			if err != nil {
				t.Fatal(err)
			}
			p := make([]int32, 300)
			_, err = e.Generate([]engine.Request{{ID: 0, Prompt: p, MaxNewTokens: 3}, {ID: 1, Prompt: p[:5], MaxNewTokens: 3}})
			if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Errorf("pipelines of %d threads, %v, %s %s: err = %v, want %q", c.most, c.tu, m.preset, m.quant, err, c.err)
			}
			e.Close()
			src.Close()
		}
		be.Close()
	}
}
