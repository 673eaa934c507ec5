package ops

import (
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// The attention head layout attention and RoPE share (Qwen3's defaults).
var heads = []Use{
	{Param: NumHeads, Default: 32},
	{Param: NumKVHeads, Default: 8},
	{Param: HeadSize, Default: 128},
}

func with(base []Use, more ...Use) []Use {
	return append(append([]Use(nil), base...), more...)
}

// matMulUses is MatMul's and QMatMul's shape: a float op and its packed
// twin take the same params and defaults, only the weight's dtype differs.
func matMulUses(dt DType) []Use {
	return []Use{
		{Param: M, Default: 1, Alias: Tokens},
		{Param: N, Default: 2048},
		{Param: K, Default: 2048, Alias: Hidden},
		{Param: DTypeParam, Value: string(dt)},
		{Param: Bias},
	}
}

// moeUses is MoE's and QMoE's shape (as matMulUses).
func moeUses(dt DType) []Use {
	return []Use{
		{Param: Tokens, Default: 1},
		{Param: Experts, Default: 128},
		{Param: TopK, Default: 8},
		{Param: Hidden, Default: 2048},
		{Param: Intermediate, Default: 768},
		{Param: DTypeParam, Value: string(dt)},
		{Param: MoEStrategyParam, Value: string(MoEGrouped)},
		{Param: MoEChunk, Default: 64},
	}
}

// gatherUses is Embedding's and QEmbedding's shape (as matMulUses).
func gatherUses(dt DType) []Use {
	return []Use{
		{Param: Tokens, Default: 1},
		{Param: Width, Default: 2048, Alias: Hidden},
		{Param: N, Default: 32000},
		{Param: DTypeParam, Value: string(dt)},
	}
}

// decls are the ops, in the order listings show them.
var decls = []*Op{
	{
		ID:  PagedAttentionDecode,
		Doc: "one query token per sequence against a paged KV cache, writing the new K/V",
		Params: with(heads,
			Use{Param: Seqs, Default: 1},
			Use{Param: Context, Default: 1024},
			Use{Param: BlockSize, Default: 16},
			Use{Param: Partitions},
			Use{Param: Window},
			Use{Param: DTypeParam, Value: string(BF16)}, // the model's: the KV cache's where a backend keeps it so
		),
		Reference: kernels.PagedAttention,
		Cost:      attentionCost,
		Tuning:    map[Backend]*Space{CUDA: cudaAttention, Metal: metalAttention},
	},
	{
		ID:  PagedAttentionPrefill,
		Doc: "causal attention of new tokens over cached context (chunked prefill when context > 0)",
		Params: with(heads,
			Use{Param: Seqs, Default: 1},
			Use{Param: Tokens, Default: 256},
			Use{Param: Context, Default: 0},
			Use{Param: BlockSize, Default: 16},
			Use{Param: Partitions},
			Use{Param: Window},
			Use{Param: DTypeParam, Value: string(BF16)}, // the model's: the KV cache's where a backend keeps it so
		),
		Reference: kernels.PagedAttention,
		Cost:      attentionCost,
		Tuning:    map[Backend]*Space{Metal: metalPrefill},
	},
	{
		ID:        KVWrite,
		Doc:       "new K/V into their cache slots; backends fuse it into attention",
		Reference: kernels.KVWrite,
	},
	{
		ID:        RMSNorm,
		Doc:       "RMS normalisation of each row",
		Params:    []Use{{Param: Tokens, Default: 1}, {Param: Width, Default: 2048, Alias: Hidden}},
		Reference: kernels.RMSNorm,
		Cost: func(s Shape, t Types) Cost {
			n, w := int64(s[Tokens])*int64(s[Width]), int64(s[Width])
			return Cost{Read: n*t.Act.Size() + 4*w, Written: n * t.Act.Size(), FLOPs: 4 * n}
		},
		Tuning: map[Backend]*Space{Metal: metalNorm(2048)},
	},
	{
		ID:        AddRMSNorm,
		Doc:       "residual += x, then RMS normalisation of the sum",
		Params:    []Use{{Param: Tokens, Default: 1}, {Param: Width, Default: 2048, Alias: Hidden}},
		Reference: kernels.AddRMSNorm,
		Cost: func(s Shape, t Types) Cost {
			n, w := int64(s[Tokens])*int64(s[Width]), int64(s[Width])
			return Cost{Read: 2*n*t.Act.Size() + 4*w, Written: 2 * n * t.Act.Size(), FLOPs: 5 * n}
		},
		Tuning: map[Backend]*Space{Metal: metalNorm(2048)},
	},
	{
		ID:        RoPE,
		Doc:       "QK-norm then rotary embedding of q and k, in place; positions start at context",
		Params:    with(heads, Use{Param: Tokens, Default: 1}, Use{Param: Context, Default: 1024}),
		Reference: kernels.RoPE,
		Cost: func(s Shape, t Types) Cost {
			d := int64(s[HeadSize])
			n := int64(s[Tokens]) * int64(s[NumHeads]+s[NumKVHeads]) * d
			return Cost{Read: n*t.Act.Size() + 2*4*d, Written: n * t.Act.Size(), FLOPs: 7 * n}
		},
	},
	{
		ID:        SiLUMul,
		Doc:       "silu(gate) * up",
		Params:    []Use{{Param: Tokens, Default: 1}, {Param: Intermediate, Default: 6144}},
		Reference: kernels.SiLUMul,
		Cost: func(s Shape, t Types) Cost {
			n := int64(s[Tokens]) * int64(s[Intermediate])
			return Cost{Read: 2 * n * t.Act.Size(), Written: n * t.Act.Size(), FLOPs: 5 * n}
		},
	},
	{
		ID:        MatMul,
		Doc:       "x[m,k] times the weight[n,k] transposed",
		Params:    matMulUses(BF16),
		Reference: kernels.MatMul,
		Cost: func(s Shape, t Types) Cost {
			m, n, k, b := int64(s[M]), int64(s[N]), int64(s[K]), int64(s[Bias])
			return Cost{Read: n*k*t.Weight.Size() + m*k*t.Act.Size() + 4*b*n, Written: m * n * t.Act.Size(), FLOPs: 2*m*n*k + b*m*n}
		},
		Tuning: map[Backend]*Space{CPU: cpuMatMul, CUDA: cudaMatMul, Metal: metalMatMul},
	},
	{
		ID:        MoE,
		Doc:       "router, top-k and the routed experts' SwiGLU FFNs, weighted into one output",
		Params:    moeUses(BF16),
		Reference: kernels.MoE,
		Cost:      moeCost,
		Tuning:    map[Backend]*Space{CPU: cpuMoE, CUDA: cudaMoE, Metal: metalMoE},
	},
	{
		ID:  Argmax,
		Doc: "index of each row's largest logit (f32 logits, as the engine's)",
		Params: []Use{
			{Param: Tokens, Default: 1},
			{Param: Width, Default: 32000},
		},
		Reference: kernels.Argmax,
		Cost: func(s Shape, _ Types) Cost {
			// One compare per logit counts as a flop: argmax is bandwidth
			// bound, and a count keeps its roofline point on the chart.
			t, v := int64(s[Tokens]), int64(s[Width])
			return Cost{Read: 4 * t * v, Written: 4 * t, FLOPs: t * v}
		},
		Tuning: map[Backend]*Space{Metal: metalArgmax},
	},
	{
		ID:        Embedding,
		Doc:       "rows of the embedding table for the token ids",
		Params:    gatherUses(BF16),
		Reference: kernels.Gather,
		Cost: func(s Shape, t Types) Cost {
			n := int64(s[Tokens]) * int64(s[Width])
			rows := gatheredRows(s)
			return Cost{Read: rows*int64(s[Width])*t.Weight.Size() + 4*int64(s[Tokens]), Written: n * t.Act.Size()}
		},
	},
	{
		ID:        LayerNorm,
		Doc:       "LayerNorm of each row: mean and variance, then weight and bias (GPT-2)",
		Params:    []Use{{Param: Tokens, Default: 1}, {Param: Width, Default: 768, Alias: Hidden}},
		Reference: kernels.LayerNorm,
		Cost: func(s Shape, t Types) Cost {
			n, w := int64(s[Tokens])*int64(s[Width]), int64(s[Width])
			return Cost{Read: n*t.Act.Size() + 2*4*w, Written: n * t.Act.Size(), FLOPs: 7 * n}
		},
		Tuning: map[Backend]*Space{Metal: metalNorm(768)},
	},
	{
		ID:        AddLayerNorm,
		Doc:       "residual += x, then LayerNorm of the sum (GPT-2)",
		Params:    []Use{{Param: Tokens, Default: 1}, {Param: Width, Default: 768, Alias: Hidden}},
		Reference: kernels.AddLayerNorm,
		Cost: func(s Shape, t Types) Cost {
			n, w := int64(s[Tokens])*int64(s[Width]), int64(s[Width])
			return Cost{Read: 2*n*t.Act.Size() + 2*4*w, Written: 2 * n * t.Act.Size(), FLOPs: 8 * n}
		},
		Tuning: map[Backend]*Space{Metal: metalNorm(768)},
	},
	{
		ID:        GELU,
		Doc:       "GELU with the tanh approximation (GPT-2's gelu_new), in place",
		Params:    []Use{{Param: Tokens, Default: 1}, {Param: Intermediate, Default: 3072}},
		Reference: kernels.GELU,
		Cost: func(s Shape, t Types) Cost {
			// x³, the polynomial, tanh (counted as one) and the product.
			n := int64(s[Tokens]) * int64(s[Intermediate])
			return Cost{Read: n * t.Act.Size(), Written: n * t.Act.Size(), FLOPs: 8 * n}
		},
	},
	{
		ID:  PositionEmbedding,
		Doc: "rows of the learned position table for the tokens' positions, added to x (GPT-2)",
		Params: []Use{
			{Param: Tokens, Default: 1},
			{Param: Width, Default: 768, Alias: Hidden},
			{Param: N, Default: 1024},
			{Param: DTypeParam, Value: string(BF16)},
		},
		Reference: kernels.AddPositions,
		Cost: func(s Shape, t Types) Cost {
			n := int64(s[Tokens]) * int64(s[Width])
			rows := gatheredRows(s)
			return Cost{Read: rows*int64(s[Width])*t.Weight.Size() + n*t.Act.Size() + 4*int64(s[Tokens]), Written: n * t.Act.Size(), FLOPs: n}
		},
	},
}

// gatheredRows is the distinct rows of an N-row table that Tokens lookups
// need at least: a row asked for twice is read once in the ideal, so more
// tokens than rows read the whole table.
func gatheredRows(s Shape) int64 { return int64(min(s[Tokens], s[N])) }

// quantDecls are the ops on packed weights: their cost models count the
// packed bytes with their scales (ops.DType.Bytes), so rooflines of packed
// decode stay right.
var quantDecls = []*Op{
	{
		ID:        QMatMul,
		Doc:       "x[m,k] times a packed weight[n,k] transposed, dequantized in registers",
		Params:    matMulUses(Q4),
		Reference: quant.MatMul,
		Cost: func(s Shape, t Types) Cost {
			m, n, k, b := int64(s[M]), int64(s[N]), int64(s[K]), int64(s[Bias])
			return Cost{Read: t.Weight.Bytes(n*k, k) + m*k*t.Act.Size() + 4*b*n, Written: m * n * t.Act.Size(), FLOPs: 2*m*n*k + b*m*n}
		},
		Tuning: map[Backend]*Space{CUDA: cudaQMatMul, Metal: metalQMatMul},
	},
	{
		ID:        QMoE,
		Doc:       "router (bf16), top-k and the routed packed experts' SwiGLU FFNs",
		Params:    moeUses(Q4),
		Reference: quant.MoE,
		Cost: func(s Shape, t Types) Cost {
			tok, e, k := int64(s[Tokens]), int64(s[Experts]), int64(s[TopK])
			h, i := int64(s[Hidden]), int64(s[Intermediate])
			routed := int64(s[Routed])
			if routed <= 0 {
				routed = min(e, tok*k)
			}
			a := t.Act.Size()
			expert := 2*t.Weight.Bytes(h*i, h) + t.Weight.Bytes(h*i, i)
			return Cost{
				Read:    e*h*BF16.Size() + routed*expert + tok*h*a,
				Written: tok * h * a,
				FLOPs:   2*tok*e*h + tok*k*(6*h*i+5*i+2*h),
			}
		},
		Tuning: map[Backend]*Space{Metal: metalQMoE},
	},
	{
		ID:        QEmbedding,
		Doc:       "rows of a packed embedding table for the token ids, dequantized",
		Params:    gatherUses(Q4),
		Reference: quant.Gather,
		Cost: func(s Shape, t Types) Cost {
			tok, w := int64(s[Tokens]), int64(s[Width])
			return Cost{Read: t.Weight.Bytes(gatheredRows(s)*w, w) + 4*tok, Written: tok * w * t.Act.Size()}
		},
	},
}

func init() { decls = append(decls, quantDecls...) }

// attentionCost: q read, out written, new k/v read and written into the
// cache, the cached keys and values the queries read once per sequence;
// token i of a sequence attends to context+i+1 keys, a dot and an axpy
// each. With a sliding window (Window > 0) each query attends to at most
// window keys and the cached ones before the first query's window are not
// read (kernels.AttendedKeys, KeysRead). Decode has one token per
// sequence. An attention op's dtype (Types.Weight) is its KV cache's; q,
// the new k/v and the output are activations.
func attentionCost(s Shape, t Types) Cost {
	a, c := t.Act.Size(), t.Weight.Size()
	n := max(s[Tokens], 1)
	tok := int64(n)
	seqs, ctx, w := int64(s[Seqs]), s[Context], s[Window]
	toks, qw, kvw := seqs*tok, int64(s[NumHeads])*int64(s[HeadSize]), int64(s[NumKVHeads])*int64(s[HeadSize])
	keys := kernels.AttendedKeys(ctx, n, w)
	cached := kernels.KeysRead(ctx, n, w) - tok
	return Cost{
		Read:    a*(toks*qw+2*toks*kvw) + c*2*seqs*cached*kvw,
		Written: a*(toks*qw) + c*2*toks*kvw,
		FLOPs:   seqs * keys * 4 * qw,
	}
}

// moeCost reads the router and only the experts the tokens route to
// (Routed; absent, every routed pair is taken to hit a new expert).
func moeCost(s Shape, t Types) Cost {
	tok, e, k := int64(s[Tokens]), int64(s[Experts]), int64(s[TopK])
	h, i := int64(s[Hidden]), int64(s[Intermediate])
	routed := int64(s[Routed])
	if routed <= 0 {
		routed = min(e, tok*k)
	}
	w, a := t.Weight.Size(), t.Act.Size()
	return Cost{
		Read:    e*h*w + routed*3*h*i*w + tok*h*a,
		Written: tok * h * a,
		FLOPs:   2*tok*e*h + tok*k*(6*h*i+5*i+2*h),
	}
}
