package ops

import "slices"

// Param names a parameter of an op, as suites write it.
type Param string

// The ops' parameters. Model cases share some (block_size, moe_strategy,
// moe_chunk, threads, variant) with the same meaning.
const (
	Tokens           Param = "tokens"
	Seqs             Param = "seqs"
	Context          Param = "context"
	NumHeads         Param = "num_heads"
	NumKVHeads       Param = "num_kv_heads"
	HeadSize         Param = "head_size"
	BlockSize        Param = "block_size"
	Hidden           Param = "hidden"
	Width            Param = "width"
	M                Param = "m"
	N                Param = "n"
	K                Param = "k"
	Experts          Param = "experts"
	TopK             Param = "top_k"
	Intermediate     Param = "intermediate"
	DTypeParam       Param = "dtype"
	Partitions       Param = "partitions"
	MoEStrategyParam Param = "moe_strategy"
	MoEChunk         Param = "moe_chunk"
	Threads          Param = "threads"
	Variant          Param = "variant"
	Bias             Param = "bias"
	Window           Param = "window"
	// Routed is not a case parameter: it is the distinct experts a call's
	// tokens route to, which the MoE cost model reads when the caller knows
	// it (absent: every routed pair hits a new expert, the upper bound).
	Routed Param = "routed"
)

// Bounds past which a value is a typo rather than a setting.
const (
	// MaxThreads is the most CPU goroutines a case or run --threads asks
	// for: past it a CPU is oversubscribed many times over, and the tuner
	// would list every count up to it as a candidate.
	MaxThreads = 1024
	// MaxMoEChunk is the most (token, expert) pairs a chunk holds: the
	// backends cap a chunk at a step's pairs, so past any step's pairs a
	// larger chunk is the same work, keyed apart.
	MaxMoEChunk = 1 << 24
)

// Kind is a parameter's value type.
type Kind int

const (
	IntKind  Kind = iota // an integer
	EnumKind             // one of Values
	TextKind             // free text (a label)
)

// Spec is the rule every value of a parameter obeys, wherever it is given
// (a suite file, a --set override, a tuner's shape).
type Spec struct {
	Name   Param
	Kind   Kind
	Min    int      // Int: smallest allowed value
	Max    int      // Int: largest allowed value, if set
	Step   int      // Int: allowed values are multiples of it, if set
	OneOf  []int    // Int: the only allowed values, if set
	Values []string // Enum: the allowed values
	Doc    string
}

// Specs are the rules of the ops' parameters.
var Specs = map[Param]Spec{
	Tokens:           {Name: Tokens, Kind: IntKind, Min: 1, Doc: "tokens of the call (decode: 1 per sequence; prefill attention: each sequence's, seqs × tokens in all)"},
	Seqs:             {Name: Seqs, Kind: IntKind, Min: 1, Doc: "sequences of an attention call"},
	Context:          {Name: Context, Kind: IntKind, Min: 0, Doc: "tokens already in the KV cache (rope: first position); decode attention and rope take at least 1"},
	NumHeads:         {Name: NumHeads, Kind: IntKind, Min: 1, Doc: "query heads"},
	NumKVHeads:       {Name: NumKVHeads, Kind: IntKind, Min: 1, Doc: "KV heads; num_heads is a multiple"},
	HeadSize:         {Name: HeadSize, Kind: IntKind, Min: 2, Max: 256, Step: 2, Doc: "elements per head (even: RoPE rotates pairs)"},
	BlockSize:        {Name: BlockSize, Kind: IntKind, OneOf: []int{8, 16, 32}, Doc: "tokens per KV cache block"},
	Hidden:           {Name: Hidden, Kind: IntKind, Min: 1, Doc: "model width"},
	Width:            {Name: Width, Kind: IntKind, Min: 1, Doc: "row length (norms: hidden; argmax: vocabulary)"},
	M:                {Name: M, Kind: IntKind, Min: 1, Doc: "matmul rows (tokens)"},
	N:                {Name: N, Kind: IntKind, Min: 1, Doc: "matmul outputs per row (embedding: vocabulary; position_embedding: positions)"},
	K:                {Name: K, Kind: IntKind, Min: 1, Doc: "matmul inner size"},
	Experts:          {Name: Experts, Kind: IntKind, Min: 1, Doc: "MoE experts"},
	TopK:             {Name: TopK, Kind: IntKind, Min: 1, Doc: "experts per token; at most experts"},
	Intermediate:     {Name: Intermediate, Kind: IntKind, Min: 1, Doc: "FFN (expert) width"},
	DTypeParam:       {Name: DTypeParam, Kind: EnumKind, Values: dtypeNames(), Doc: "weight dtype (packed formats for the q ops)"},
	Partitions:       {Name: Partitions, Kind: IntKind, Min: 0, Doc: "split-context partitions, a label (0 = auto)"},
	MoEStrategyParam: {Name: MoEStrategyParam, Kind: EnumKind, Values: []string{string(MoELoop), string(MoEChunked), string(MoEGrouped)}, Doc: "MoE dispatch"},
	MoEChunk:         {Name: MoEChunk, Kind: IntKind, Min: 1, Max: MaxMoEChunk, Doc: "(token, expert) pairs per chunk, chunked only"},
	Threads:          {Name: Threads, Kind: IntKind, Min: 1, Max: MaxThreads, Doc: "CPU goroutines"},
	Variant:          {Name: Variant, Kind: TextKind, Doc: "a free label for a code variant"},
	Window:           {Name: Window, Kind: IntKind, Min: 0, Doc: "sliding attention window (0: none): the query at position p attends to the keys p-window < j <= p"},
	Bias:             {Name: Bias, Kind: IntKind, Min: 0, Max: 1, Doc: "1 adds an f32 bias of n to each output row (Qwen2's q/k/v, attention_bias, mlp_bias, GPT-2)"},
}

// dtypeNames are the float dtypes, then the packed formats.
func dtypeNames() []string {
	var n []string
	for _, d := range append(slices.Clone(DTypes), QuantDTypes...) {
		n = append(n, string(d))
	}
	return n
}
