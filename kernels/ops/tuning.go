package ops

import (
	"fmt"
	"strconv"
)

// The tuning spaces' knobs, as configs (and the stored config files) name
// them; bridge/cuda reads the same names when it applies a config.
const (
	KnobStrategy = "strategy"
	KnobChunk    = "chunk"
	KnobPiece    = "piece"
	KnobThreads  = "threads"
	KnobRows     = "rows"
	KnobKSplit   = "ksplit"
	KnobPart     = "part"
	KnobPass     = "pass"
	KnobDSRows   = "ds_rows"
)

// The backends' tuning spaces, which the ops' declarations (decl.go) carry
// in their Tuning maps; runner/tune searches them and stores the winners.

// moeDims is the shape of an MoE block, and moeDispatch the seeds' dispatch
// choices, shared by every backend's moe kernel.
var (
	moeDims = []Dim{
		{Name: Tokens, Default: 1, Match: Log},
		{Name: Experts, Default: 128, Match: Exact},
		{Name: TopK, Default: 8, Match: Exact},
		{Name: Hidden, Default: 2048, Match: Exact},
		{Name: Intermediate, Default: 768, Match: Exact},
	}
	moeDispatch = []Knob{
		{Name: KnobStrategy, Doc: "loop | chunked | grouped", Values: Enum(string(MoELoop), string(MoEChunked), string(MoEGrouped))},
		{Name: KnobChunk, Doc: "(token, expert) pairs per chunk, chunked only", Values: Pow2(1, 256)},
	}
)

// cpuMoE is the CPU MoE dispatch (bridge/cpu/moe.go): the seeds' loop,
// chunked and grouped strategies, and the chunk size of chunked.
var cpuMoE = &Space{
	Doc:    "expert dispatch: loop (one token at a time), chunked (GEMM per expert per chunk of pairs), grouped (one GEMM per expert)",
	Dims:   append(moeDims[:len(moeDims):len(moeDims)], Dim{Name: Threads, Match: Exact, Device: true}),
	DType:  "bf16",
	Params: moeDispatch,
	Canonical: func(c Config, s Shape, _ Limits) Config {
		if c[KnobStrategy] != string(MoEChunked) {
			delete(c, KnobChunk)
			return c
		}
		// Chunks of one pair are the loop, a chunk holding every pair is
		// grouped: the same groups, in the same order.
		switch pairs, chunk := s[Tokens]*s[TopK], c.Int(KnobChunk); {
		case chunk == 1:
			return Config{KnobStrategy: string(MoELoop)}
		case chunk >= pairs:
			return Config{KnobStrategy: string(MoEGrouped)}
		}
		return c
	},
	Default: func(Shape, Limits) Config { return Config{KnobStrategy: string(MoEGrouped), KnobChunk: "64"} },
	Format: func(c Config) string {
		if c[KnobStrategy] == string(MoEChunked) {
			return "chunked/" + c[KnobChunk]
		}
		return c[KnobStrategy]
	},
}

// cpuMatMul is the CPU matmul's work split (bridge/cpu tunables.go): even
// (today's: one contiguous range per thread) or pieces of piece output rows
// handed out dynamically to threads goroutines.
var cpuMatMul = &Space{
	Doc: "work split: output rows in pieces (even: one range per thread) over threads goroutines",
	Dims: []Dim{
		{Name: M, Default: 1, Match: Log},
		{Name: N, Default: 2048, Match: Exact},
		{Name: K, Default: 2048, Match: Exact},
		{Name: Threads, Match: Exact, Device: true},
	},
	DType: "bf16",
	Params: []Knob{
		{Name: KnobPiece, Doc: "rows per piece: even, or 16..512", Values: func(s Shape, l Limits) []string {
			return append([]string{"even"}, Pow2(16, 512)(s, l)...)
		}},
		{Name: KnobThreads, Doc: "goroutines, 1..GOMAXPROCS", Values: UpTo(func(l Limits) int { return max(l.MaxThreads, 1) })},
	},
	Constraints: []Constraint{
		{Name: "piece <= n", Check: func(c Config, s Shape, _ Limits) error {
			if p := c.Int(KnobPiece); p > s[N] {
				return fmt.Errorf("a piece of %d rows exceeds n=%d", p, s[N])
			}
			return nil
		}},
		{Name: "coverage", Check: func(c Config, s Shape, _ Limits) error {
			// Fewer pieces than threads leaves goroutines idle: the same
			// work as a config with fewer threads.
			p, t := c.Int(KnobPiece), c.Int(KnobThreads)
			if p > 0 && (s[N]+p-1)/p < t {
				return fmt.Errorf("%d pieces of %d rows cannot keep %d threads busy", (s[N]+p-1)/p, p, t)
			}
			return nil
		}},
	},
	Canonical: func(c Config, s Shape, _ Limits) Config {
		if c[KnobPiece] == "even" {
			// The even split never runs more ranges than 16-row blocks.
			c[KnobThreads] = strconv.Itoa(min(c.Int(KnobThreads), (s[N]+15)/16))
		}
		return c
	},
	Default: func(_ Shape, l Limits) Config {
		return Config{KnobPiece: "even", KnobThreads: strconv.Itoa(max(l.MaxThreads, 1))}
	},
	Format: func(c Config) string { return c[KnobPiece] + "/" + c[KnobThreads] + "t" },
}

// The CUDA backend's tunable kernels (bridge/cuda tuning_linux.go applies
// their configs). "auto" is the backend's own per-shape choice, so the
// default is what runs untuned by construction, not a copy of its rules.
// The backend's L2 weight prefetch is not in these spaces: a kernel timed
// alone gains from it, but inside a decode step it competes for bandwidth
// with the kernel it overlaps, and it measured slower there.

// cudaMatMul is the decode GEMV (up to 8 rows; larger m runs cuBLAS).
var cudaMatMul = &Space{
	Doc: "decode GEMV: rows per warp (bf16 only above 1), warps splitting k",
	Dims: []Dim{
		{Name: M, Default: 1, Match: Log},
		{Name: N, Default: 2048, Match: Exact},
		{Name: K, Default: 2048, Match: Exact},
	},
	DType: "bf16",
	Params: []Knob{
		{Name: KnobRows, Doc: "auto | 1 | 2 | 4 rows per warp (4 only up to 4 tokens a pass)", Values: Enum("auto", "1", "2", "4")},
		{Name: KnobKSplit, Doc: "auto | 1..8 warps sharing a row", Values: Enum("auto", "1", "2", "4", "8")},
	},
	Applies: func(s Shape) bool { return s[M] <= 8 },
	Constraints: []Constraint{
		{Name: "rows per warp", Check: func(c Config, s Shape, _ Limits) error {
			if c[KnobRows] == "4" && s[M] > 4 {
				return fmt.Errorf("4 rows per warp exist for up to 4 tokens a pass, not m=%d", s[M])
			}
			return nil
		}},
		{Name: "split-K", Check: func(c Config, s Shape, _ Limits) error {
			// Each warp takes 256 elements of a row at a time.
			if ks, err := strconv.Atoi(c[KnobKSplit]); err == nil && s[K] < 256*ks {
				return fmt.Errorf("%d warps over k=%d would leave some idle", ks, s[K])
			}
			return nil
		}},
	},
	Default: func(Shape, Limits) Config { return Config{KnobRows: "auto", KnobKSplit: "auto"} },
	Format:  func(c Config) string { return "r" + c[KnobRows] + "/k" + c[KnobKSplit] },
}

// cudaAttention is paged decode attention with the fused KV write: decode.cu
// (head sizes up to 128, GQA groups up to 8) or, past those, attention.cu's
// kernel with 8 warps per block.
var cudaAttention = &Space{
	Doc: "split-context decode attention: context positions per partition (a multiple of the 32-position chunk)",
	Dims: []Dim{
		{Name: Seqs, Default: 1, Match: Log},
		{Name: Context, Default: 1024, Match: Log},
		{Name: NumHeads, Default: 32, Match: Exact},
		{Name: NumKVHeads, Default: 8, Match: Exact},
		{Name: HeadSize, Default: 128, Match: Exact},
		{Name: BlockSize, Default: 16, Match: Exact},
	},
	DType: "bf16",
	Params: []Knob{
		{Name: KnobPart, Doc: "context positions per partition", Values: Pow2(32, 1024)},
	},
	Constraints: []Constraint{
		{Name: "partitions", Check: func(c Config, s Shape, _ Limits) error {
			// The backend caps a launch at 64 partitions (one merge slot
			// each) by doubling the part: a smaller one is the same launch.
			if n := (s[Context] + c.Int(KnobPart) - 1) / c.Int(KnobPart); n > 64 {
				return fmt.Errorf("%d partitions exceed the 64 one launch merges", n)
			}
			return nil
		}},
	},
	Default: func(Shape, Limits) Config { return Config{KnobPart: "32"} },
	Format:  func(c Config) string { return "p" + c[KnobPart] },
}

// cudaMoE is the MoE block: dispatch (as the CPU's) plus the expert GEMVs'
// launch shape.
var cudaMoE = &Space{
	Doc:   "expert dispatch (loop, chunked, grouped) and the expert GEMVs: rows per warp, pairs per pass; one token: down-projection rows per block",
	Dims:  moeDims,
	DType: "bf16",
	Params: append(moeDispatch[:len(moeDispatch):len(moeDispatch)],
		Knob{Name: KnobRows, Doc: "rows per warp of the expert GEMVs (2: bf16 only)", Values: Enum("1", "2")},
		Knob{Name: KnobPass, Doc: "pairs per pass of an expert's rows: auto (by pairs per slot) or 1..8", Values: Enum("auto", "1", "2", "4", "8")},
		Knob{Name: KnobDSRows, Doc: "one token: rows per block of the down projection (2, 8: bf16 only)", Values: Enum("2", "4", "8")},
	),
	Canonical: func(c Config, s Shape, lim Limits) Config {
		if s[Tokens] == 1 {
			// One token: each expert its own slot, one pair a pass, whatever
			// the strategy.
			c[KnobStrategy] = string(MoEGrouped)
			delete(c, KnobChunk)
			c[KnobPass] = "auto"
			return c
		}
		delete(c, KnobDSRows)
		rest := Config{KnobStrategy: c[KnobStrategy], KnobChunk: c[KnobChunk]}
		rest = cpuMoE.Canonical(rest, s, lim)
		delete(c, KnobChunk)
		for k, v := range rest {
			c[k] = v
		}
		return c
	},
	Default: func(Shape, Limits) Config {
		// The backend's defaults (bridge/cuda moeConfig).
		return Config{KnobStrategy: string(MoEGrouped), KnobChunk: "64", KnobRows: "1", KnobPass: "auto", KnobDSRows: "4"}
	},
	Format: func(c Config) string {
		s := cpuMoE.Format(c) + "/r" + c[KnobRows]
		if v, ok := c[KnobDSRows]; ok {
			return s + "/d" + v
		}
		return s + "/p" + c[KnobPass]
	},
}
