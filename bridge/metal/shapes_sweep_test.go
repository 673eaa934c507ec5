package metal_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/engine/enginetest"
	"github.com/mtlbench/mtlbench/runner/model"
)

// sweepShape is a model shape of the sweep: an HF config's sizes.
type sweepShape struct {
	arch                       string // llama, llama_bias, mistral, qwen2, qwen3, qwen3_moe, mixtral, gpt2
	hidden, heads, kv, headDim int
	inter, vocab, layers       int
	experts, topK, moeInter    int
	dtype                      bridge.DType
	quant                      string
	group                      int // MLX affine groups other than the presets' 64
	batch                      int
	moe                        bridge.MoEStrategy
	block                      int // KV cache block size other than the engine's 16
	tie                        bool
	window                     int  // sliding_window (mistral)
	noNormTopK                 bool // norm_topk_prob false (qwen3_moe)
	sparseStep                 int  // decoder_sparse_step (qwen3_moe)
	mlpOnly                    []int
	ggml                       quant.Type // a GGML type in place of the preset's (q8_0: Q4_0; q4_k_m: Q6_K)
	cache                      string     // Metal's KV cache dtype in every mode
	chunk                      int        // the chunked mode's token budget other than 16
	lens                       []int      // prompt lengths in place of the modes'
	kvTokens                   int        // a cache smaller than 2048 tokens, which preempts
}

func (s sweepShape) config() []byte {
	c := map[string]any{
		"vocab_size": s.vocab, "num_hidden_layers": s.layers, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
		"tie_word_embeddings": false, "max_position_embeddings": 4096,
	}
	switch s.arch {
	case "gpt2":
		c["architectures"] = []string{"GPT2LMHeadModel"}
		c["model_type"] = "gpt2"
		c["n_embd"], c["n_head"], c["n_layer"], c["n_positions"] = s.hidden, s.heads, s.layers, 1024
		delete(c, "max_position_embeddings") // n_positions under its GPT-2 name
		c["n_inner"] = s.inter
		c["tie_word_embeddings"] = true
		c["layer_norm_epsilon"] = 1e-5
	case "llama":
		c["architectures"] = []string{"LlamaForCausalLM"}
	case "mistral": // heads that do not divide hidden_size, which LlamaConfig refuses
		c["architectures"] = []string{"MistralForCausalLM"}
		c["sliding_window"] = nil
	case "qwen2":
		c["architectures"] = []string{"Qwen2ForCausalLM"}
	case "llama_bias":
		c["architectures"] = []string{"LlamaForCausalLM"}
		c["attention_bias"] = true
	case "qwen3":
		c["architectures"] = []string{"Qwen3ForCausalLM"}
	case "mixtral":
		c["architectures"] = []string{"MixtralForCausalLM"}
		c["num_local_experts"], c["num_experts_per_tok"] = s.experts, s.topK
	case "qwen3_moe":
		c["architectures"] = []string{"Qwen3MoeForCausalLM"}
		c["num_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"] = s.experts, s.topK, s.moeInter
		c["norm_topk_prob"] = !s.noNormTopK
		if s.sparseStep != 0 {
			c["decoder_sparse_step"] = s.sparseStep
		}
		if s.mlpOnly != nil {
			c["mlp_only_layers"] = s.mlpOnly
		}
	}
	if s.tie {
		c["tie_word_embeddings"] = true
	}
	if s.window != 0 {
		c["sliding_window"] = s.window
		if s.arch != "mistral" {
			// The Qwen classes slide the layers from max_window_layers
			// on, Qwen3-MoE's all of them, with use_sliding_window only.
			c["use_sliding_window"], c["max_window_layers"] = true, 1
		}
	}
	if s.arch != "gpt2" {
		c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"] = s.hidden, s.heads, s.kv
		c["head_dim"], c["intermediate_size"] = s.headDim, s.inter
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	return b
}

func (s sweepShape) String() string {
	f := s.dtype.String()
	if s.quant != "" {
		f = s.quant
	}
	n := fmt.Sprintf("%s/h%d/q%dkv%dd%d/i%d/v%d", s.arch, s.hidden, s.heads, s.kv, s.headDim, s.inter, s.vocab)
	if s.experts > 0 {
		n += fmt.Sprintf("/e%dk%dm%d", s.experts, s.topK, s.moeInter)
	}
	n = fmt.Sprintf("%s/L%d/%s/b%d", n, s.layers, f, s.batch)
	if s.moe != "" {
		n += "/" + string(s.moe)
	}
	if s.block != 0 {
		n += fmt.Sprintf("/bs%d", s.block)
	}
	if s.tie {
		n += "/tied"
	}
	if s.window != 0 {
		n += fmt.Sprintf("/w%d", s.window)
	}
	if s.noNormTopK {
		n += "/unnormed"
	}
	if s.sparseStep != 0 || s.mlpOnly != nil {
		n += fmt.Sprintf("/sparse%d%v", s.sparseStep, s.mlpOnly)
	}
	if s.ggml != 0 {
		n += "/" + quant.Spec{Type: s.ggml}.String()
	}
	if s.group != 0 {
		n += fmt.Sprintf("/g%d", s.group)
	}
	if s.cache != "" {
		n += "/kv" + s.cache
	}
	if s.chunk != 0 {
		n += fmt.Sprintf("/c%d", s.chunk)
	}
	if s.lens != nil {
		n += fmt.Sprintf("/p%d", s.lens[0])
	}
	if s.kvTokens != 0 {
		n += fmt.Sprintf("/kvt%d", s.kvTokens)
	}
	return n
}

// TestShapesSweepMatchesCPU runs synthetic models of shapes no fixture has
// (hidden and intermediate sizes off the kernels' tiles, padded heads, odd
// GQA ratios and expert counts, vocabularies off 32, cache blocks of 8, 16
// and 32, sliding windows, tied embeddings, Qwen3-MoE's routing options,
// MLX groups of 32 to 128 and GGUF block types) on the emulated Metal
// backend and the CPU, one request or several at once (up to 40, and nine
// in caches that preempt), prefilled in chunks, whole or a token a step,
// then decoded: the CPU's tokens and last prompt logits within 1e-4 (f32)
// or 1e-3 (half floats, packed weights) with an f32 KV cache on both, and
// within 1e-3 with a cache in half floats, which the CPU keeps in the same
// dtype as Metal, each key and value rounded alike (5.3e-4 the most seen,
// a GPT-2 with an f16 cache a token a step).
func TestShapesSweepMatchesCPU(t *testing.T) {
	mb := newEmu(t, metal.Tuning{})
	f32, f16, bf16 := bridge.F32, bridge.F16, bridge.BF16
	shapes := []sweepShape{
		// GQA 3, 1, 7 and 5 over one KV head or more; padded heads (48,
		// 80, 112, 160, 192: decode attention in the next larger
		// instantiation, prefill attention where no tiled kernel is)
		{arch: "mistral", hidden: 40, heads: 3, kv: 1, headDim: 48, inter: 88, vocab: 151, layers: 1, dtype: f32, batch: 1},
		{arch: "llama", hidden: 72, heads: 2, kv: 2, headDim: 80, inter: 136, vocab: 1000, layers: 1, dtype: f32, batch: 3},
		{arch: "qwen3", hidden: 136, heads: 7, kv: 1, headDim: 96, inter: 344, vocab: 151, layers: 1, dtype: f32, batch: 3},
		{arch: "llama_bias", hidden: 203, heads: 7, kv: 1, headDim: 112, inter: 88, vocab: 151, layers: 1, dtype: f32, batch: 3},
		{arch: "llama", hidden: 72, heads: 3, kv: 1, headDim: 160, inter: 88, vocab: 151, layers: 1, dtype: f16, batch: 3},
		{arch: "qwen3", hidden: 40, heads: 5, kv: 1, headDim: 192, inter: 88, vocab: 151, layers: 1, dtype: bf16, batch: 1},
		// rows not 16-byte aligned (hidden 41 and 20 in halves), a
		// vocabulary of 50257, nine sequences (the tiles at decode)
		{arch: "mistral", hidden: 41, heads: 3, kv: 1, headDim: 48, inter: 89, vocab: 50257, layers: 1, dtype: bf16, batch: 1},
		{arch: "llama", hidden: 20, heads: 2, kv: 1, headDim: 20, inter: 36, vocab: 151, layers: 1, dtype: f16, batch: 9},
		// GPT-2's odd heads (15, 33), which RoPE does not constrain
		{arch: "gpt2", hidden: 75, heads: 5, inter: 136, vocab: 151, layers: 1, dtype: bf16, batch: 3},
		{arch: "gpt2", hidden: 99, heads: 3, inter: 136, vocab: 151, layers: 1, dtype: f16, batch: 3},
		// odd expert counts; top-k 1, 3, 7, all of them, past the decode
		// block's 16 (moe_combine) and experts past the routing GEMV's 256
		{arch: "qwen3_moe", hidden: 72, heads: 3, kv: 1, headDim: 48, inter: 88, vocab: 151, layers: 1, experts: 3, topK: 1, moeInter: 44, dtype: f32, batch: 3},
		{arch: "qwen3_moe", hidden: 41, heads: 3, kv: 1, headDim: 36, inter: 88, vocab: 151, layers: 1, experts: 5, topK: 3, moeInter: 37, dtype: f16, batch: 9},
		{arch: "qwen3_moe", hidden: 40, heads: 7, kv: 1, headDim: 80, inter: 88, vocab: 151, layers: 1, experts: 60, topK: 7, moeInter: 20, dtype: bf16, batch: 3},
		{arch: "qwen3_moe", hidden: 40, heads: 3, kv: 1, headDim: 48, inter: 88, vocab: 151, layers: 1, experts: 257, topK: 20, moeInter: 20, dtype: f32, batch: 3},
		{arch: "mixtral", hidden: 72, heads: 3, kv: 1, headDim: 48, inter: 44, vocab: 151, layers: 1, experts: 5, topK: 2, dtype: f32, batch: 3, moe: bridge.MoEChunked},
		// Qwen3-30B-A3B's routing (128 experts, top-8) at tiny sizes
		{arch: "qwen3_moe", hidden: 64, heads: 2, kv: 1, headDim: 64, inter: 96, vocab: 1003, layers: 1, experts: 128, topK: 8, moeInter: 32, dtype: bf16, batch: 3},
		// heads of 256 (the tiled prefill kernel's largest) in groups of 6
		// over 2 KV heads, in cache blocks of 32
		{arch: "qwen3", hidden: 64, heads: 12, kv: 2, headDim: 256, inter: 96, vocab: 1003, layers: 1, dtype: bf16, batch: 3, block: 32},
		// packed: rows that divide into the format's blocks are packed,
		// the others stay in floats, as mlx-lm and llama.cpp leave them
		{arch: "llama_bias", hidden: 192, heads: 3, kv: 1, headDim: 96, inter: 344, vocab: 151, layers: 1, dtype: bf16, quant: "q4", batch: 3},
		{arch: "qwen3_moe", hidden: 192, heads: 3, kv: 1, headDim: 64, inter: 88, vocab: 151, layers: 1, experts: 3, topK: 1, moeInter: 44, dtype: bf16, quant: "q8", batch: 3},
		{arch: "qwen3_moe", hidden: 64, heads: 3, kv: 1, headDim: 48, inter: 88, vocab: 151, layers: 1, experts: 33, topK: 32, moeInter: 64, dtype: bf16, quant: "q4", group: 32, batch: 3},
		{arch: "mistral", hidden: 256, heads: 3, kv: 1, headDim: 128, inter: 384, vocab: 151, layers: 1, dtype: bf16, quant: "q4", group: 128, batch: 3},
		// Qwen2-0.5B's attention (14 query heads of 64 over 2 KV heads: an
		// output projection of 896), vocabulary 1003, cache blocks of 8
		{arch: "qwen2", hidden: 160, heads: 14, kv: 2, headDim: 64, inter: 224, vocab: 1003, layers: 1, dtype: bf16, quant: "q4", group: 32, batch: 3, block: 8},
		{arch: "mistral", hidden: 256, heads: 3, kv: 1, headDim: 112, inter: 344, vocab: 151, layers: 1, dtype: f32, quant: "q4_k_m", batch: 3},
		{arch: "qwen3_moe", hidden: 160, heads: 5, kv: 1, headDim: 32, inter: 88, vocab: 151, layers: 1, experts: 7, topK: 3, moeInter: 96, dtype: bf16, quant: "q8_0", batch: 3},
		// GQA 8 over a single KV head of 128, GQA 4 and 2 over heads of
		// 64, heads of 256 one to one; caches in half floats under every
		// mode (prefill attention reads them too); chunks of 7 and 40,
		// which split a cache block and the GEMM tiles
		{arch: "qwen3", hidden: 100, heads: 8, kv: 1, headDim: 128, inter: 200, vocab: 257, layers: 1, dtype: f16, batch: 3, cache: "f16"},
		{arch: "qwen2", hidden: 96, heads: 8, kv: 2, headDim: 64, inter: 150, vocab: 1001, layers: 2, dtype: bf16, batch: 3, cache: "f16", chunk: 7},
		{arch: "qwen3", hidden: 72, heads: 2, kv: 2, headDim: 256, inter: 100, vocab: 131, layers: 1, dtype: f32, batch: 3, cache: "bf16", chunk: 40},
		{arch: "mistral", hidden: 88, heads: 4, kv: 2, headDim: 64, inter: 120, vocab: 509, layers: 2, dtype: f32, batch: 3, window: 8},
		{arch: "mistral", hidden: 100, heads: 4, kv: 1, headDim: 80, inter: 120, vocab: 509, layers: 1, dtype: bf16, batch: 3, window: 24, cache: "f16"},
		// Qwen2's window from max_window_layers on (layer 0 attends to
		// every key, layer 1 to 8), Qwen3-MoE's on every layer
		{arch: "qwen2", hidden: 64, heads: 4, kv: 2, headDim: 64, inter: 96, vocab: 151, layers: 2, dtype: f32, batch: 3, window: 8},
		{arch: "qwen3_moe", hidden: 64, heads: 4, kv: 2, headDim: 64, inter: 96, vocab: 151, layers: 2, experts: 8, topK: 2, moeInter: 40, dtype: f32, batch: 3, window: 12},
		{arch: "llama", hidden: 96, heads: 3, kv: 3, headDim: 32, inter: 200, vocab: 513, layers: 2, dtype: f16, batch: 3, tie: true},
		{arch: "gpt2", hidden: 64, heads: 1, inter: 100, vocab: 257, layers: 2, dtype: f32, batch: 3, cache: "f16", chunk: 7},
		// Qwen3-MoE's routing without renormalising the top-k, one expert
		// and every one of them, MoE every second layer or all but the
		// first
		{arch: "qwen3_moe", hidden: 72, heads: 4, kv: 2, headDim: 32, inter: 88, vocab: 151, layers: 2, experts: 8, topK: 2, moeInter: 40, dtype: f32, batch: 3, noNormTopK: true, sparseStep: 2},
		{arch: "qwen3_moe", hidden: 72, heads: 4, kv: 1, headDim: 64, inter: 88, vocab: 151, layers: 2, experts: 8, topK: 8, moeInter: 40, dtype: bf16, batch: 3, noNormTopK: true, mlpOnly: []int{0}},
		{arch: "qwen3_moe", hidden: 72, heads: 4, kv: 1, headDim: 64, inter: 88, vocab: 151, layers: 1, experts: 6, topK: 1, moeInter: 40, dtype: f16, batch: 3, noNormTopK: true},
		// MLX q8 in groups of 32 and 128, GGUF Q4_0 and Q6_K
		{arch: "qwen3", hidden: 128, heads: 2, kv: 1, headDim: 64, inter: 96, vocab: 151, layers: 1, dtype: bf16, quant: "q8", group: 32, batch: 3},
		{arch: "qwen3", hidden: 256, heads: 2, kv: 1, headDim: 128, inter: 384, vocab: 151, layers: 1, dtype: f16, quant: "q8", group: 128, batch: 3},
		{arch: "qwen2", hidden: 96, heads: 3, kv: 1, headDim: 32, inter: 160, vocab: 151, layers: 1, dtype: f32, quant: "q8_0", ggml: quant.Q4_0, batch: 3},
		{arch: "qwen3", hidden: 256, heads: 2, kv: 1, headDim: 128, inter: 512, vocab: 151, layers: 1, dtype: f32, quant: "q4_k_m", ggml: quant.Q6_K, batch: 3},
		// GGUF Q4_K_M over experts whose rows fall back to Q5_0, Q6_K
		// down projections in both layers (use_more_bits)
		{arch: "qwen3_moe", hidden: 256, heads: 4, kv: 1, headDim: 64, inter: 88, vocab: 151, layers: 2, experts: 8, topK: 2, moeInter: 96, dtype: f32, quant: "q4_k_m", batch: 3},
		// GQA 8 over two KV heads of 256 (the decode kernel's 8 query heads
		// a threadgroup at its largest head)
		{arch: "qwen3", hidden: 64, heads: 16, kv: 2, headDim: 256, inter: 96, vocab: 151, layers: 1, dtype: f32, batch: 3},
		// contexts past the default 512-key partitions of decode attention;
		// 40 sequences at decode, past the GEMM's 32-row tiles
		{arch: "qwen3", hidden: 64, heads: 4, kv: 1, headDim: 64, inter: 96, vocab: 151, layers: 1, dtype: bf16, batch: 2, chunk: 200, lens: []int{600, 530}},
		{arch: "qwen3", hidden: 64, heads: 8, kv: 1, headDim: 128, inter: 96, vocab: 151, layers: 1, dtype: f32, batch: 40, lens: raggedLens(40)},
		// caches of five blocks for nine prompts that each fill about
		// one: sequences are preempted as they decode into a second block,
		// and computed again
		{arch: "qwen2", hidden: 64, heads: 4, kv: 2, headDim: 64, inter: 96, vocab: 151, layers: 2, dtype: bf16, batch: 9, block: 8, kvTokens: 40, lens: []int{7, 8, 6, 7, 5, 7, 3, 7, 6}},
		{arch: "qwen3_moe", hidden: 64, heads: 4, kv: 1, headDim: 64, inter: 88, vocab: 151, layers: 1, experts: 8, topK: 2, moeInter: 40, dtype: f16, batch: 9, kvTokens: 80, cache: "f32", lens: []int{15, 15, 14, 13, 15, 12, 15, 15, 9}},
	}
	// chunked: a 37-token prompt in chunks of 16 beside shorter ones, one
	// pass of attention over each context; whole: a 70-token prompt and
	// the others in one step each (the GEMM tiles of 32 and 64 rows, the
	// tiled prefill attention), decode over partitions of 16 keys
	// (split-K); token: a token a step over a cache block (the GEMVs and
	// decode attention give the logits) with the cache in the model's
	// dtype.
	modes := []struct {
		name   string
		be     *metal.Backend
		lens   []int
		budget int
		kv     string
	}{
		{"chunked", mb, []int{37, 9, 20, 3, 5, 11, 16, 17, 1}, 16, "f32"},
		{"whole", newEmu(t, metal.Tuning{AttnPartitionSize: 16}), []int{70, 9, 33, 3, 5, 11, 16, 17, 1}, 0, "f32"},
		{"token", mb, []int{19, 5, 8, 3, 2, 4, 6, 1, 7}, 1, "auto"},
	}
	for _, s := range shapes {
		for _, m := range modes {
			if m.kv != "f32" && s.dtype == bridge.F32 && s.quant == "" && s.cache == "" {
				continue // the cache stays f32: the decode steps above cover it
			}
			t.Run(s.String()+"/"+m.name, func(t *testing.T) { sweepOne(t, s, m.be, m.lens[:min(s.batch, len(m.lens))], m.budget, m.kv) })
		}
	}
}

func sweepOne(t *testing.T, s sweepShape, mb *metal.Backend, lens []int, budget int, kv string) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), s.config(), 0o644); err != nil {
		t.Fatal(err)
	}
	dt := s.dtype
	cfg, src, err := model.Open(model.Spec{Model: dir, Synthetic: true, DType: &dt, Quant: s.quant, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if s.group != 0 {
		// The source draws with the same specs: they are set in place.
		for _, q := range cfg.Quant.Per {
			if q != nil && q.Type == quant.Affine {
				q.Group = s.group
			}
		}
		cfg.Quant.Default.Group = s.group
	}
	if s.ggml != 0 {
		// Q4_0 takes the rows Q8_0 does, Q6_K those Q4_K does: the
		// preset's default spec changes type in place, its fallbacks stay.
		cfg.Quant.Default.Type = s.ggml
	}
	cached := model.NewCached(src)
	if s.lens != nil {
		lens = s.lens
	}
	var reqs []engine.Request
	for i, n := range lens {
		p := enginetest.Prompt(n+i, cfg.Vocab)[i:]
		reqs = append(reqs, engine.Request{ID: i, Prompt: p, MaxNewTokens: 4, WantLogits: true})
	}
	if s.chunk != 0 && budget > 1 {
		budget = s.chunk
	}
	if s.cache != "" {
		kv = s.cache
	}
	kvTokens := 2048
	if s.kvTokens != 0 {
		kvTokens = s.kvTokens
	}
	// The CPU keeps the cache Metal keeps (auto: the model's dtype there),
	// so a half-float cache is compared like for like.
	kvdt, err := engine.KVDType(mb, src.DType(), kv)
	if err != nil {
		t.Fatal(err)
	}
	opts := engine.Options{KVTokens: kvTokens, KVDType: kvdt.String(), TokenBudget: budget, BlockSize: s.block, MoE: bridge.MoEParams{Strategy: s.moe, ChunkSize: 5}}
	var outs [2][]engine.Output
	for i, be := range []bridge.Backend{cpu.New(cpu.Options{}), mb} {
		e, err := engine.New(be, cfg, cached, opts)
		if err != nil {
			t.Fatalf("%s: %v", be.Info().Backend, err)
		}
		if e.KVDType() != kvdt {
			t.Fatalf("%s keeps its cache in %v, want %v", be.Info().Backend, e.KVDType(), kvdt)
		}
		var preempted int
		outs[i], preempted, err = generate(e, reqs)
		e.Close()
		if err != nil {
			t.Fatalf("%s: %v", be.Info().Backend, err)
		}
		// A token a step runs the sequences nearly one after another,
		// which need not preempt.
		if s.kvTokens != 0 && budget != 1 && preempted == 0 {
			t.Fatalf("%s: no sequence was preempted in a cache of %d tokens", be.Info().Backend, s.kvTokens)
		}
	}
	tol := 1e-4
	if s.dtype != bridge.F32 || s.quant != "" {
		tol = 1e-3
	}
	if kvdt != bridge.F32 {
		tol = 1e-3
	}
	enginetest.OutputsMatch(t, outs[1], outs[0], "the CPU's", tol)
}

// raggedLens are n prompt lengths of 1 to 23 tokens.
func raggedLens(n int) []int {
	l := make([]int, n)
	for i := range l {
		l[i] = 1 + i*37%23
	}
	return l
}

// generate is engine.Generate counting the sequences preempted on the way.
func generate(e *engine.Engine, reqs []engine.Request) ([]engine.Output, int, error) {
	out := make([]engine.Output, len(reqs))
	for i, r := range reqs {
		if err := e.Add(r); err != nil {
			return nil, 0, err
		}
		out[i].ID = r.ID
	}
	preempted := 0
	for e.Pending() {
		res, err := e.Step()
		if err != nil {
			return nil, 0, err
		}
		preempted += res.Preempted
		for _, s := range res.Sampled {
			o := &out[s.ReqID] // request ids are their indices
			o.Tokens = append(o.Tokens, s.Token)
			if s.Logits != nil {
				o.Logits = s.Logits
			}
		}
	}
	return out, preempted, nil
}

// A tuning that runs every query through the tiled prefill kernel
// (AttnPrefillMinQuery 1, which Tuning.Check takes) runs decode steps there
// too, and that kernel writes the step's keys before reading them: the
// decode attention with RoPE folded in, whose kernel writes the rotated key
// itself, is not used then, where every decode step of a RoPE model failed
// ("internal: RoPE fused into an attention that reads new keys from the
// cache"). Tokens and logits are the CPU's, with QK-norm and without.
func TestPrefillKernelForEveryQuery(t *testing.T) {
	mb := newEmu(t, metal.Tuning{AttnPrefillMinQuery: 1})
	for _, s := range []sweepShape{
		{arch: "llama", hidden: 64, heads: 4, kv: 2, headDim: 32, inter: 96, vocab: 151, layers: 1, dtype: bridge.F32, batch: 3},
		{arch: "qwen3", hidden: 64, heads: 4, kv: 1, headDim: 64, inter: 96, vocab: 151, layers: 1, dtype: bridge.BF16, batch: 3},
	} {
		t.Run(s.String(), func(t *testing.T) { sweepOne(t, s, mb, []int{19, 5, 8}, 0, "f32") })
	}
}
