package ops

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/mtlbench/mtlbench/internal/plural"
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

	// Metal (bridge/metal reads them; docs/tuning.md describes them).
	KnobSimdgroups = "simdgroups"
	KnobHeads      = "heads"
	KnobMinQuery   = "min_query"
	KnobKeys       = "keys"
	KnobQueries    = "queries"
	KnobMVMax      = "mv_max"
	KnobBM         = "bm"
	KnobBN         = "bn"
	KnobBK         = "bk"
	KnobSGM        = "sgm"
	KnobSGN        = "sgn"
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

// matmulDims and decodeAttentionDims are the launch shapes of a matmul and
// of decode attention, the same on every backend.
var (
	matmulDims = []Dim{
		{Name: M, Default: 1, Match: Log},
		{Name: N, Default: 2048, Match: Exact},
		{Name: K, Default: 2048, Match: Exact},
	}
	decodeAttentionDims = []Dim{
		{Name: Seqs, Default: 1, Match: Log},
		{Name: Context, Default: 1024, Match: Log},
		{Name: NumHeads, Default: 32, Match: Exact},
		{Name: NumKVHeads, Default: 8, Match: Exact},
		{Name: HeadSize, Default: 128, Match: Exact},
		{Name: BlockSize, Default: 16, Match: Exact},
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
	Doc:   "work split: output rows in pieces (even: one range per thread) over threads goroutines",
	Dims:  append(matmulDims[:len(matmulDims):len(matmulDims)], Dim{Name: Threads, Match: Exact, Device: true}),
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
				return fmt.Errorf("a piece of %s exceeds n=%d", plural.Of(p, "row"), s[N])
			}
			return nil
		}},
		{Name: "coverage", Check: func(c Config, s Shape, _ Limits) error {
			// Fewer pieces than threads leaves goroutines idle: the same
			// work as a config with fewer threads.
			p, t := c.Int(KnobPiece), c.Int(KnobThreads)
			if p > 0 && (s[N]+p-1)/p < t {
				return fmt.Errorf("%s of %s cannot keep %s busy", plural.Of((s[N]+p-1)/p, "piece"), plural.Of(p, "row"), plural.Of(t, "thread"))
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
	Doc:   "decode GEMV: rows per warp (bf16 only above 1), warps splitting k",
	Dims:  matmulDims,
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

// cudaQMatMul is the packed GEMV of steps of fewer tokens than take tensor
// cores (bridge/cuda tcMinRows): quant_int.cu's integer-dot kernels, whose
// warps each take a group of weight rows. More rows a warp keep more loads
// in flight; fewer give more warps, and a group that does not fit the
// resident warps waits a round (docs/cuda.md). Looked up by the launch's
// first matrix (q of q/k/v, gate of gate/up).
var cudaQMatMul = &Space{
	Doc:   "packed decode GEMV (affine, integer dot products): weight rows per warp",
	Dims:  matmulDims,
	DType: "q4",
	Params: []Knob{
		{Name: KnobRows, Doc: "auto | 1 | 2 | 3 | 4 weight rows per warp (3 and 4 only for one token; 3 only for gate/up pairs, 4 not for them)", Values: Enum("auto", "1", "2", "3", "4")},
	},
	Applies: func(s Shape) bool { return s[M] < 128 },
	Constraints: []Constraint{
		{Name: "rows per warp", Check: func(c Config, s Shape, _ Limits) error {
			if (c[KnobRows] == "3" || c[KnobRows] == "4") && s[M] > 1 {
				return fmt.Errorf("%s rows per warp exist for one token a block, not m=%d", c[KnobRows], s[M])
			}
			return nil
		}},
	},
	Default: func(Shape, Limits) Config { return Config{KnobRows: "auto"} },
	Format:  func(c Config) string { return "r" + c[KnobRows] },
}

// cudaAttention is paged decode attention with the fused KV write: decode.cu
// (head sizes up to 128, GQA groups up to 8) or, past those, attention.cu's
// kernel with 8 warps per block.
var cudaAttention = &Space{
	Doc:   "split-context decode attention: context positions per partition (a multiple of the 32-position chunk)",
	Dims:  decodeAttentionDims,
	DType: "bf16",
	Params: []Knob{
		{Name: KnobPart, Doc: "context positions per partition; auto: the backend's split, whose partition count follows the context (SplitRule)",
			Values: func(s Shape, lim Limits) []string { return append([]string{"auto"}, Pow2(32, 1024)(s, lim)...) }},
	},
	Constraints: []Constraint{
		{Name: "partitions", Check: func(c Config, s Shape, _ Limits) error {
			// The backend caps a launch at 256 partitions (one merge slot
			// each) by doubling the part: a smaller one is the same launch.
			p := c.Int(KnobPart)
			if p <= 0 {
				return nil // auto
			}
			if n := (s[Context] + p - 1) / p; n > 256 {
				return fmt.Errorf("%d partitions exceed the 256 one launch merges", n)
			}
			return nil
		}},
	},
	Default: func(Shape, Limits) Config { return Config{KnobPart: "auto"} },
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

// The Metal backend's tunable kernels (bridge/metal launch.go overlays a
// config on its Tuning for one dispatch). Constraints are Apple's limits
// (docs/tuning.md): threads per threadgroup (Limits.MaxThreads, the
// device's and the kernel's pipelines' maxTotalThreadsPerThreadgroup),
// threadgroup memory counted as the backend sizes it, SIMD width 32, and
// the simdgroup_matrix tile rules of bridge/metal's Tile.check.

// metalTileSlack is the threadgroup memory a GEMM tile leaves free for
// the kernels' static arrays (row maps), as Tile.check allows 31 of the
// 32 KiB.
const metalTileSlack = 1024

var (
	metalTileNames = []string{KnobBM, KnobBN, KnobBK, KnobSGM, KnobSGN}
	metalMVNames   = []string{KnobRows, KnobSimdgroups}
	// metalDefTile is the dense GEMM's tile: 64x64 outputs over 2x2
	// simdgroups of 4x4 8x8 accumulators, k steps of 32 (MLX's steel GEMM
	// and ggml's kernel_mul_mm take 32-64 rows and columns and 16-32 deep).
	metalDefTile = Config{KnobBM: "64", KnobBN: "64", KnobBK: "32", KnobSGM: "2", KnobSGN: "2"}
)

// MetalTileMemory is the threadgroup memory of a simdgroup_matrix GEMM tile
// as bridge/metal sizes it (kernels/metal/gemm.h mm_stage_bytes): per stage,
// bm activation rows (f32) and mats weight matrices of bn rows kept in
// their dtype (stage bytes an element: 2 for f16 and bf16, 4 for f32 and
// for bf16 before MSL 3.1), each row bk deep plus 16 bytes of padding; two
// stages (double buffered) when they fit in most bytes, else one.
func MetalTileMemory(bm, bn, bk, mats, stage, most int) (bytes, stages int) {
	per := 4*bm*(bk+4) + mats*bn*(bk+16/stage)*stage
	if 2*per <= most {
		return 2 * per, 2
	}
	return per, 1
}

// MoERowsPerExpert is the mean rows of a routed expert's GEMM (its tokens)
// in a MoE call of tokens tokens each routed to topK of experts experts:
// the pairs over the experts expected to be routed to at all,
// E*(1-(1-K/E)^T) under uniform routing; at least 1. The Metal backend
// picks its expert kernels and tile rows by it (docs/metal-kernels.md,
// "MoE tile occupancy").
func MoERowsPerExpert(tokens, experts, topK int) float64 {
	if tokens < 1 || experts < 1 || topK < 1 {
		return 1
	}
	k := min(topK, experts)
	touched := float64(experts) * (1 - math.Pow(1-float64(k)/float64(experts), float64(tokens)))
	return max(1, float64(tokens*k)/max(touched, 1))
}

// MetalMoEMatVecMaxRows is the rows per routed expert up to which the Metal
// MoE runs its expert matvecs (tiles of at most 8 rows, each expert's
// weights read once per tile) untuned; above it the simdgroup_matrix
// tiles of MetalMoETile. Measured with the emulator's cost witness on
// experts of Qwen3-30B-A3B's shape (bridge/metal TestMoEOccupancy,
// docs/metal-kernels.md): from about 2 rows per expert the tiles move
// fewer bytes (the matvecs restage their activations per threadgroup and
// read an expert's weights once per 8 rows).
const MetalMoEMatVecMaxRows = 2

// MetalMoERows is MoERowsPerExpert rounded to the nearest whole row: what
// the mv_max knob and the untuned choice compare.
func MetalMoERows(tokens, experts, topK int) int {
	return int(math.Round(MoERowsPerExpert(tokens, experts, topK)))
}

// MetalMoETile is the untuned expert GEMM tile for rows rows per routed
// expert: the shortest of 16, 32 and 64 rows that holds about twice the
// mean (an expert's rows vary about it), so tiles are mostly full and an
// expert's weights are mostly read once; 64 columns (32 with 64 rows, so
// gate, up and the activations double-buffer in 31 KiB), k steps of 32.
func MetalMoETile(rows int) Config {
	switch {
	case rows <= 8:
		return Config{KnobBM: "16", KnobBN: "64", KnobBK: "32", KnobSGM: "1", KnobSGN: "4"}
	case rows <= 16:
		return Config{KnobBM: "32", KnobBN: "64", KnobBK: "32", KnobSGM: "2", KnobSGN: "2"}
	}
	return Config{KnobBM: "64", KnobBN: "32", KnobBK: "32", KnobSGM: "2", KnobSGN: "2"}
}

// metalMVTaken reports whether the matvec takes rows(s) rows under c's
// mv_max.
func metalMVTaken(c Config, rows int) bool { mv := c.Int(KnobMVMax); return mv > 0 && rows <= mv }

// metalPathKnobs are the knobs of the matvec (rows per simdgroup,
// simdgroups up to maxSG) and of the simdgroup_matrix tiles; each path's
// apply only where it runs at the shape's rows(s).
func metalPathKnobs(rows func(Shape) int, maxSG int) []Knob {
	mv := func(c Config, s Shape) bool { return metalMVTaken(c, rows(s)) }
	tiles := func(c Config, s Shape) bool { return !metalMVTaken(c, rows(s)) }
	return []Knob{
		{Name: KnobRows, Doc: "matvec: output rows per simdgroup, 1..4", Values: Enum("1", "2", "3", "4"), When: mv},
		{Name: KnobSimdgroups, Doc: "matvec: simdgroups per threadgroup", Values: Pow2(1, maxSG), When: mv},
		{Name: KnobBM, Doc: "tile rows, a multiple of 8*sgm up to 64", Values: Pow2(8, 64), When: tiles},
		{Name: KnobBN, Doc: "tile columns, a multiple of 8*sgn", Values: Pow2(16, 128), When: tiles},
		{Name: KnobBK, Doc: "k per staged step: 8, 16 or 32", Values: Pow2(8, 32), When: tiles},
		{Name: KnobSGM, Doc: "simdgroups down the tile", Values: Pow2(1, 4), When: tiles},
		{Name: KnobSGN, Doc: "simdgroups across the tile", Values: Pow2(1, 4), When: tiles},
	}
}

// metalSIMD: every kernel assumes simdgroups of 32 threads.
var metalSIMD = Constraint{Name: "simd width", Check: func(_ Config, _ Shape, lim Limits) error {
	if lim.SIMDWidth != 0 && lim.SIMDWidth != 32 {
		return fmt.Errorf("the kernels assume simdgroups of 32 threads, the device's are %d", lim.SIMDWidth)
	}
	return nil
}}

// metalThreads caps a threadgroup at 1024 threads and the limits' maximum.
func metalThreads(threads func(Config, Shape) int) Constraint {
	return Constraint{Name: "threads per threadgroup", Check: func(c Config, s Shape, lim Limits) error {
		most := 1024
		if lim.MaxThreads > 0 {
			most = min(most, lim.MaxThreads)
		}
		if n := threads(c, s); n > most {
			return fmt.Errorf("%d threads exceed the %d a threadgroup may have", n, most)
		}
		return nil
	}}
}

// metalMemory caps the threadgroup memory a dispatch asks for (bytes, as
// the backend computes it) at the device's less slack.
func metalMemory(slack int, bytes func(Config, Shape) int) Constraint {
	return Constraint{Name: "threadgroup memory", Check: func(c Config, s Shape, lim Limits) error {
		most := lim.ThreadgroupMemory
		if most <= 0 {
			most = 32 << 10
		}
		if n := bytes(c, s); n > most-slack {
			return fmt.Errorf("%d bytes exceed the %d available", n, most-slack)
		}
		return nil
	}}
}

// metalTiled reports whether c runs the simdgroup_matrix tiles (its tile
// knobs kept by the canonical form).
func metalTiled(c Config) bool { _, ok := c[KnobBM]; return ok }

func metalTileThreads(c Config) int { return 32 * c.Int(KnobSGM) * c.Int(KnobSGN) }

// metalTileBytes is a tile's threadgroup memory for mats weight matrices
// staged lim.StageBytes an element (2 unless the limits say otherwise),
// double buffered where that fits: MetalTileMemory, with the device's
// memory less the slack.
func metalTileBytes(c Config, mats int, lim Limits) int {
	most := lim.ThreadgroupMemory
	if most <= 0 {
		most = 32 << 10
	}
	stage := lim.StageBytes
	if stage <= 0 {
		stage = 2
	}
	n, _ := MetalTileMemory(c.Int(KnobBM), c.Int(KnobBN), c.Int(KnobBK), mats, stage, most-metalTileSlack)
	return n
}

// metalTileMemory is the threadgroup memory constraint of a space whose
// tiles stage mats weight matrices.
func metalTileMemory(mats int) Constraint {
	return Constraint{Name: "threadgroup memory", Check: func(c Config, s Shape, lim Limits) error {
		if !metalTiled(c) {
			return nil
		}
		most := lim.ThreadgroupMemory
		if most <= 0 {
			most = 32 << 10
		}
		if n := metalTileBytes(c, mats, lim); n > most-metalTileSlack {
			return fmt.Errorf("%d bytes (one stage, padded rows) exceed the %d available", n, most-metalTileSlack)
		}
		return nil
	}}
}

// metalTileRules are Tile.check's shape rules (memory is its own
// constraint).
var metalTileRules = Constraint{Name: "tile", Check: func(c Config, _ Shape, _ Limits) error {
	if !metalTiled(c) {
		return nil
	}
	bm, bn, bk, sgm, sgn := c.Int(KnobBM), c.Int(KnobBN), c.Int(KnobBK), c.Int(KnobSGM), c.Int(KnobSGN)
	switch {
	case sgm < 1 || sgn < 1 || sgm*sgn > 32:
		return fmt.Errorf("1 to 32 simdgroups, not %dx%d", sgm, sgn)
	case bm%(8*sgm) != 0 || bn%(8*sgn) != 0:
		return fmt.Errorf("bm=%d must be a multiple of 8*sgm and bn=%d of 8*sgn", bm, bn)
	case bm/(8*sgm) > 4 || bn/(8*sgn) > 4:
		return fmt.Errorf("%dx%d 8x8 tiles per simdgroup, at most 4x4", bm/(8*sgm), bn/(8*sgn))
	case bm > 64:
		return fmt.Errorf("bm=%d, at most 64", bm)
	case bk != 8 && bk != 16 && bk != 32:
		return fmt.Errorf("bk=%d is not 8, 16 or 32", bk)
	}
	return nil
}}

// metalTileFits prunes tiles taller than the rows (rows(s), rounded up to
// a power of two) or wider than the outputs: their simdgroups would idle.
func metalTileFits(rows, cols func(Shape) int) Constraint {
	return Constraint{Name: "tile fits", Check: func(c Config, s Shape, _ Limits) error {
		if !metalTiled(c) {
			return nil
		}
		if bm := c.Int(KnobBM); bm > max(8, ceilPow2(rows(s))) {
			return fmt.Errorf("bm=%d is taller than %d rows", bm, rows(s))
		}
		if bn := c.Int(KnobBN); bn > max(16, ceilPow2(cols(s))) {
			return fmt.Errorf("bn=%d is wider than %d outputs", bn, cols(s))
		}
		return nil
	}}
}

// metalMVFits prunes matvec threadgroups with a simdgroup that has no row.
func metalMVFits(cols func(Shape) int) Constraint {
	return Constraint{Name: "matvec fits", Check: func(c Config, s Shape, _ Limits) error {
		if metalTiled(c) {
			return nil
		}
		if r, g := c.Int(KnobRows), c.Int(KnobSimdgroups); (g-1)*r >= cols(s) {
			return fmt.Errorf("%d simdgroups of %d rows over %d outputs leave some idle", g, r, cols(s))
		}
		return nil
	}}
}

func ceilPow2(v int) int {
	p := 1
	for p < v {
		p *= 2
	}
	return p
}

// metalPath folds c to the path it runs at n rows: the matvec up to mv_max
// rows, else the tiles. The other path's knobs are dropped, missing ones of
// this path filled from def, and mv_max becomes the nearest listed
// threshold with the same outcome (the smallest taking n rows; the largest
// leaving them to the tiles).
func metalPath(c Config, n int, thresholds []string, def Config) Config {
	keep, drop := metalTileNames, metalMVNames
	if metalMVTaken(c, n) {
		keep, drop = metalMVNames, metalTileNames
		for _, v := range thresholds {
			if t, _ := strconv.Atoi(v); t >= n {
				c[KnobMVMax] = v
				break
			}
		}
	} else {
		c[KnobMVMax] = "0"
		for _, v := range thresholds {
			if t, _ := strconv.Atoi(v); t < n {
				c[KnobMVMax] = v
			}
		}
	}
	for _, k := range drop {
		delete(c, k)
	}
	for _, k := range keep {
		if _, ok := c[k]; !ok {
			c[k] = def[k]
		}
	}
	return c
}

func metalPathFormat(c Config, unit string) string {
	if metalTiled(c) {
		return fmt.Sprintf("tiles>%s%s/%sx%sx%s/%sx%s", c[KnobMVMax], unit, c[KnobBM], c[KnobBN], c[KnobBK], c[KnobSGM], c[KnobSGN])
	}
	return fmt.Sprintf("mv<=%s%s/r%s/%ssg", c[KnobMVMax], unit, c[KnobRows], c[KnobSimdgroups])
}

func metalPathThreads(c Config, _ Shape) int {
	if metalTiled(c) {
		return metalTileThreads(c)
	}
	return 32 * c.Int(KnobSimdgroups)
}

func merge(cs ...Config) Config {
	out := Config{}
	for _, c := range cs {
		for k, v := range c {
			out[k] = v
		}
	}
	return out
}

var (
	metalMatMulMV  = []string{"0", "1", "2", "4", "8"}
	metalMatMulDef = merge(Config{KnobMVMax: "8", KnobRows: "4", KnobSimdgroups: "4"}, metalDefTile)
)

// metalMatMul is matmul (bridge/metal ops.go): the simd_sum matvec up to
// mv_max rows, else simdgroup_matrix tiles.
var metalMatMul = &Space{
	Doc:   "matmul: the simd_sum matvec up to mv_max rows (rows per simdgroup, simdgroups), else simdgroup_matrix tiles (bm x bn x bk over sgm x sgn simdgroups)",
	Dims:  matmulDims,
	DType: "bf16",
	Params: append([]Knob{
		{Name: KnobMVMax, Doc: "the matvec takes up to this many rows (0: never; at most 8)", Values: Enum(metalMatMulMV...)},
	}, metalPathKnobs(func(s Shape) int { return s[M] }, 32)...),
	Constraints: []Constraint{
		metalSIMD,
		metalThreads(metalPathThreads),
		metalTileRules,
		metalTileMemory(1),
		metalTileFits(func(s Shape) int { return s[M] }, func(s Shape) int { return s[N] }),
		metalMVFits(func(s Shape) int { return s[N] }),
	},
	Canonical: func(c Config, s Shape, _ Limits) Config { return metalPath(c, s[M], metalMatMulMV, metalMatMulDef) },
	Default:   func(Shape, Limits) Config { return metalMatMulDef.Clone() },
	Format:    func(c Config) string { return metalPathFormat(c, "m") },
}

// MetalQTileMemory is a packed tile's threadgroup memory and staging
// buffers as bridge/metal sizes them (kernels/metal/quant.metal
// qmm_accumulate): per stage, one k step of bm activation rows and mats
// weight matrices of bn rows, all as floats, each row one 32-value unit
// plus 16 bytes of padding; two stages (double buffered) when they fit in
// most bytes, else one, as MetalTileMemory.
func MetalQTileMemory(bm, bn, mats, most int) (bytes, stages int) {
	per := (bm + mats*bn) * (32 + 4) * 4
	if 2*per <= most {
		return 2 * per, 2
	}
	return per, 1
}

// metalQMVKnobs are a packed GEMV's knobs (quant.metal qmatvec, qmoe_mv),
// applying where when says: its weight rows per simdgroup and simdgroups
// per threadgroup, which share one staging of the activation rows.
func metalQMVKnobs(what string, when func(Config, Shape) bool) []Knob {
	return []Knob{
		{Name: KnobRows, Doc: what + ": weight rows per simdgroup, 1..4", Values: Enum("1", "2", "3", "4"), When: when},
		{Name: KnobSimdgroups, Doc: what + ": simdgroups per threadgroup, each staging of the activation rows shared by all", Values: Pow2(1, 32), When: when},
	}
}

// metalQTileKnobs are a packed tile's knobs (quant.metal qmm_accumulate),
// each applying where when says (nil: always).
func metalQTileKnobs(when func(Config, Shape) bool) []Knob {
	return []Knob{
		{Name: KnobBM, Doc: "tile rows, a multiple of 8*sgm up to 64", Values: Pow2(8, 64), When: when},
		{Name: KnobBN, Doc: "tile columns, a multiple of 8*sgn", Values: Pow2(16, 128), When: when},
		{Name: KnobBK, Doc: "k per staged step: one 32-value unit of every packed format", Values: Enum("32"), When: when},
		{Name: KnobSGM, Doc: "simdgroups down the tile", Values: Pow2(1, 4), When: when},
		{Name: KnobSGN, Doc: "simdgroups across the tile", Values: Pow2(1, 4), When: when},
	}
}

// metalQTileMemory caps a packed tile of mats weight matrices
// (MetalQTileMemory, double buffered where that fits) at the device's
// threadgroup memory less the slack.
func metalQTileMemory(mats int) Constraint {
	return Constraint{Name: "threadgroup memory", Check: func(c Config, _ Shape, lim Limits) error {
		if !metalTiled(c) {
			return nil
		}
		most := lim.ThreadgroupMemory
		if most <= 0 {
			most = 32 << 10
		}
		if n, _ := MetalQTileMemory(c.Int(KnobBM), c.Int(KnobBN), mats, most-metalTileSlack); n > most-metalTileSlack {
			return fmt.Errorf("%d bytes exceed the %d available", n, most-metalTileSlack)
		}
		return nil
	}}
}

// metalQMatMulTile is the packed matmul's untuned tile (bridge/metal
// qmmTile): wide, because the f32 activations, read again for each column
// tile, are most of a packed tile's traffic.
var metalQMatMulTile = Config{KnobBM: "64", KnobBN: "128", KnobBK: "32", KnobSGM: "2", KnobSGN: "4"}

// metalQMatVec is the packed GEMV's untuned launch (bridge/metal qmvRows,
// qmvSimdgroups): every threadgroup stages its activation rows once, so
// packed GEMVs take large threadgroups, of 2 rows a simdgroup for twice the
// simdgroups of 4 at the same staging (docs/metal-kernels.md).
var metalQMatVec = Config{KnobRows: "2", KnobSimdgroups: "32"}

// metalQMoEMatVec is the packed expert GEMVs' untuned launch (bridge/metal
// qRows, qSimdgroups): qmoe_mv_sum splits a threadgroup's simdgroups
// between the top-k pairs, so it keeps 4 rows in 16.
var metalQMoEMatVec = Config{KnobRows: "4", KnobSimdgroups: "16"}

// metalQMV reports whether a packed matmul of s's rows runs the GEMV: up to
// the matmul's untuned mv_max rows (bridge/metal qmatvec).
func metalQMV(s Shape) bool { return s[M] <= metalMatMulDef.Int(KnobMVMax) }

// metalQMatMul is qmatmul (bridge/metal quant.go): up to the matmul's
// matvec rows the packed GEMV (qmatvec: weight rows per simdgroup,
// simdgroups per threadgroup), the decode step's kernel; more rows run
// simdgroup_matrix tiles that dequantize each weight row's 32 values as
// they stage them (qmm). A launch of several matrices (q, k and v; gate and
// up) looks up its first matrix's shape.
var metalQMatMul = &Space{
	Doc:   "packed matmul: the GEMV up to the matvec's rows (rows per simdgroup, simdgroups per threadgroup), else simdgroup_matrix tiles (bm x bn over sgm x sgn simdgroups, k steps of one 32-value unit) dequantizing the weights as they stage them",
	Dims:  matmulDims,
	DType: "q4",
	Params: append(metalQMVKnobs("GEMV", func(_ Config, s Shape) bool { return metalQMV(s) }),
		metalQTileKnobs(func(_ Config, s Shape) bool { return !metalQMV(s) })...),
	Constraints: []Constraint{
		metalSIMD,
		metalThreads(metalPathThreads),
		metalTileRules,
		metalQTileMemory(1),
		metalTileFits(func(s Shape) int { return s[M] }, func(s Shape) int { return s[N] }),
	},
	Canonical: func(c Config, s Shape, _ Limits) Config {
		keep, drop, def := metalTileNames, metalMVNames, metalQMatMulTile
		if metalQMV(s) {
			keep, drop, def = metalMVNames, metalTileNames, metalQMatVec
		}
		for _, k := range drop {
			delete(c, k)
		}
		for _, k := range keep {
			if _, ok := c[k]; !ok {
				c[k] = def[k]
			}
		}
		return c
	},
	Default: func(s Shape, _ Limits) Config {
		if metalQMV(s) {
			return metalQMatVec.Clone()
		}
		return metalQMatMulTile.Clone()
	},
	Format: func(c Config) string {
		if !metalTiled(c) {
			return fmt.Sprintf("mv/r%s/%ssg", c[KnobRows], c[KnobSimdgroups])
		}
		return fmt.Sprintf("%sx%s/%sx%s", c[KnobBM], c[KnobBN], c[KnobSGM], c[KnobSGN])
	},
}

// metalQMoETile is the packed MoE's untuned tile (bridge/metal qmoeTile):
// 32 pairs of one expert by 64 outputs over 2x2 simdgroups, whose gate and
// up rows stage together.
var metalQMoETile = Config{KnobBM: "32", KnobBN: "64", KnobBK: "32", KnobSGM: "2", KnobSGN: "2"}

// metalQMoE is qmoe (bridge/metal quant.go): packed experts run the packed
// expert GEMVs up to mv_max rows per routed expert, else grouped by expert
// on simdgroup_matrix tiles that dequantize as they stage (qmoe_mm_gate_up
// with gate and up together, qmoe_mm_down).
var metalQMoE = &Space{
	Doc:   "packed experts: the expert GEMVs up to mv_max rows per routed expert (rows per simdgroup, simdgroups), else tiles (bm x bn over sgm x sgn simdgroups, k steps of one 32-value unit) dequantizing as they stage",
	Dims:  moeDims,
	DType: "q4",
	Params: append([]Knob{
		{Name: KnobMVMax, Doc: "the expert GEMVs run up to this many rows per routed expert (0: never)", Values: Enum(metalMoEMV...)},
	}, append(metalQMVKnobs("expert GEMVs", func(c Config, s Shape) bool { return !metalQMoETiled(c, s) }),
		metalQTileKnobs(metalQMoETiled)...)...),
	Constraints: []Constraint{
		metalSIMD,
		metalThreads(metalPathThreads),
		metalTileRules,
		metalQTileMemory(2), // gate and up stage together
		metalTileFits(func(s Shape) int { return s[Tokens] }, func(s Shape) int { return max(s[Hidden], s[Intermediate]) }),
	},
	Canonical: func(c Config, s Shape, _ Limits) Config {
		rows := metalMoERows(s)
		if metalMVTaken(c, rows) {
			for _, v := range metalMoEMV {
				if t, _ := strconv.Atoi(v); t >= rows {
					mv := Config{KnobMVMax: v}
					for _, k := range metalMVNames {
						if mv[k] = c[k]; mv[k] == "" {
							mv[k] = metalQMoEMatVec[k]
						}
					}
					return mv
				}
			}
		}
		for _, k := range metalMVNames {
			delete(c, k)
		}
		c[KnobMVMax] = "0"
		for _, v := range metalMoEMV {
			if t, _ := strconv.Atoi(v); t < rows {
				c[KnobMVMax] = v
			}
		}
		for _, k := range metalTileNames {
			if _, ok := c[k]; !ok {
				c[k] = metalQMoETile[k]
			}
		}
		return c
	},
	Default: func(Shape, Limits) Config {
		return merge(Config{KnobMVMax: strconv.Itoa(MetalMoEMatVecMaxRows)}, metalQMoEMatVec, metalQMoETile)
	},
	Format: func(c Config) string {
		if !metalTiled(c) {
			return fmt.Sprintf("mv<=%srows/r%s/%ssg", c[KnobMVMax], c[KnobRows], c[KnobSimdgroups])
		}
		return fmt.Sprintf("tiles>%srows/%sx%s/%sx%s", c[KnobMVMax], c[KnobBM], c[KnobBN], c[KnobSGM], c[KnobSGN])
	},
}

// metalQMoETiled: the packed experts run tiles under c's mv_max.
func metalQMoETiled(c Config, s Shape) bool { return !metalMVTaken(c, metalMoERows(s)) }

// MetalAttnGroupHeads is the query heads one attention threadgroup of
// bridge/metal serves: the largest of 8, 4, 2, 1 within the cap that
// divides the GQA group.
func MetalAttnGroupHeads(group, limit int) int {
	for _, qh := range []int{8, 4, 2, 1} {
		if qh <= limit && group%qh == 0 {
			return qh
		}
	}
	return 1
}

// metalAttention is decode attention (bridge/metal ops.go attention): one
// query token per sequence; the launch shape's context is the longest
// sequence's cached positions.
var metalAttention = &Space{
	Doc:   "decode attention: simdgroups per threadgroup, query heads per threadgroup, context positions per split-K partition (single: one pass)",
	Dims:  decodeAttentionDims,
	DType: "bf16",
	Params: []Knob{
		{Name: KnobSimdgroups, Doc: "simdgroups per threadgroup (at most: each walks at least 4 keys), each an online softmax over a run of consecutive keys", Values: Pow2(1, 32)},
		{Name: KnobHeads, Doc: "query heads per threadgroup (at most; the largest dividing the GQA group)", Values: Enum("1", "2", "4", "8")},
		{Name: KnobPart, Doc: "the most context positions a split-K partition takes (spread evenly over as many as need), or single", Values: func(s Shape, l Limits) []string {
			return append([]string{"single"}, Pow2(32, 4096)(s, l)...)
		}},
	},
	Constraints: []Constraint{
		metalSIMD,
		metalThreads(func(c Config, _ Shape) int { return 32 * c.Int(KnobSimdgroups) }),
		// The simdgroups' (o, m, l) meet in rounds of the slots that fit.
		metalMemory(0, func(c Config, s Shape) int {
			n, _ := MetalAttnMemory(c.Int(KnobSimdgroups), c.Int(KnobHeads), s[HeadSize], 32<<10)
			return n
		}),
		{Name: "partitions", Check: func(c Config, s Shape, _ Limits) error {
			// The reduce walks a (token, head)'s partitions one by one.
			if p := c.Int(KnobPart); p > 0 {
				if n := (s[Context] + p) / p; n > 64 {
					return fmt.Errorf("%d partitions exceed 64", n)
				}
			}
			return nil
		}},
	},
	Canonical: func(c Config, s Shape, _ Limits) Config {
		if s[NumKVHeads] > 0 {
			c[KnobHeads] = strconv.Itoa(MetalAttnGroupHeads(s[NumHeads]/s[NumKVHeads], c.Int(KnobHeads)))
		}
		// A partition holding the whole context is one pass.
		keys := s[Context] + 1
		if p := c.Int(KnobPart); p > 0 && keys <= p {
			c[KnobPart] = "single"
		} else if p > 0 {
			keys = p
		}
		// Simdgroups past a few keys each are not launched.
		if n := c.Int(KnobSimdgroups); n > 0 {
			c[KnobSimdgroups] = strconv.Itoa(MetalAttnSimdgroups(n, keys))
		}
		return c
	},
	Default: func(Shape, Limits) Config { return Config{KnobSimdgroups: "32", KnobHeads: "8", KnobPart: "512"} },
	Format: func(c Config) string {
		p := "p" + c[KnobPart]
		if c[KnobPart] == "single" {
			p = "single"
		}
		return c[KnobSimdgroups] + "sg/q" + c[KnobHeads] + "/" + p
	},
}

var metalPrefillMinQuery = []string{"2", "4", "8", "16", "32", "64", "128"}

// metalPrefill is prefill attention (bridge/metal ops.go prefill): the
// tiled flash-attention kernel from min_query tokens on (query tiles of 8,
// 16 or 32 tokens; a threadgroup per tile and slice of a KV head's query
// heads, a simdgroup per 8 queries and head, all sharing its staged K and
// V), else the per-token kernel with the decode launch.
var metalPrefill = &Space{
	Doc: "prefill attention: the tiled kernel (query heads and query tokens sharing a KV head's staged keys per threadgroup, keys per staged step) from min_query tokens on, else the per-token kernel",
	Dims: []Dim{
		{Name: Seqs, Default: 1, Match: Log},
		{Name: Tokens, Default: 256, Match: Log},
		{Name: NumHeads, Default: 32, Match: Exact},
		{Name: NumKVHeads, Default: 8, Match: Exact},
		{Name: HeadSize, Default: 128, Match: Exact},
		{Name: BlockSize, Default: 16, Match: Exact},
	},
	DType: "bf16",
	Params: []Knob{
		{Name: KnobHeads, Doc: "tiled: query heads per threadgroup (at most; the largest dividing the GQA group), one simdgroup each", Values: Enum("1", "2", "4", "8")},
		{Name: KnobKeys, Doc: "tiled: keys staged per step", Values: Enum("8", "16", "32")},
		{Name: KnobQueries, Doc: "tiled: query tokens per threadgroup, a simdgroup per 8 of them and query head", Values: Enum("8", "16", "32")},
		{Name: KnobMinQuery, Doc: "the tiled kernel runs from this many query tokens on (never: always per token)",
			Values: Enum(append([]string{"never"}, metalPrefillMinQuery...)...)},
	},
	Constraints: []Constraint{
		metalSIMD,
		metalThreads(func(c Config, _ Shape) int { return 32 * c.Int(KnobHeads) * max(c.Int(KnobQueries)/8, 1) }),
		// One stage of K and V (bf16, the spaces' dtype); two when they fit.
		metalMemory(0, func(c Config, s Shape) int {
			if _, ok := c[KnobKeys]; !ok {
				return 0
			}
			n, _ := MetalPrefillMemory(c.Int(KnobKeys), s[HeadSize], 2, 32<<10)
			return n
		}),
	},
	Canonical: func(c Config, s Shape, _ Limits) Config {
		t := s[Tokens]
		if s[NumKVHeads] > 0 {
			c[KnobHeads] = strconv.Itoa(MetalAttnGroupHeads(s[NumHeads]/s[NumKVHeads], c.Int(KnobHeads)))
		}
		// A query tile past the longest query adds only idle simdgroups.
		if q := c.Int(KnobQueries); q > 8 {
			for n := 8; n < q; n *= 2 {
				if n >= t {
					c[KnobQueries] = strconv.Itoa(n)
					break
				}
			}
		}
		// The tiles need blocks of whole tiles.
		if mq := c.Int(KnobMinQuery); mq > 0 && t >= mq && s[BlockSize]%8 == 0 {
			for _, v := range metalPrefillMinQuery {
				if n, _ := strconv.Atoi(v); n <= t {
					c[KnobMinQuery] = v
				}
			}
			return c
		}
		delete(c, KnobHeads)
		delete(c, KnobKeys)
		delete(c, KnobQueries)
		c[KnobMinQuery] = "never"
		if s[BlockSize]%8 == 0 {
			for _, v := range metalPrefillMinQuery {
				if n, _ := strconv.Atoi(v); n > t {
					c[KnobMinQuery] = v
					break
				}
			}
		}
		return c
	},
	Default: func(Shape, Limits) Config {
		return Config{KnobHeads: "8", KnobKeys: "16", KnobQueries: "16", KnobMinQuery: "8"}
	},
	Format: func(c Config) string {
		if _, ok := c[KnobKeys]; ok {
			return "tiled>=" + c[KnobMinQuery] + "/q" + c[KnobHeads] + "/k" + c[KnobKeys] + "/t" + c[KnobQueries]
		}
		if c[KnobMinQuery] == "never" {
			return "per-token"
		}
		return "per-token<" + c[KnobMinQuery]
	},
}

// MetalNormThreads is the row norms' threadgroup bridge/metal sizes
// untuned: a thread per four elements, in whole simdgroups, at most 1024.
// A thread then holds one float4 (or four floats) of a row of up to 4096,
// and at most four float4s up to 16384, which the kernels keep in registers
// instead of reading the row again (kernels/metal/norm.h, NORM_KEEP).
func MetalNormThreads(width int) int { return min(1024, max(32, ((width+3)/4+31)/32*32)) }

// MetalNormVec reports whether bridge/metal's norms read a row of width as
// float4s (norm_vec), given rows that start on 16 bytes.
func MetalNormVec(width int) bool { return width%4 == 0 }

// metalNormUnits is the loads a row of width takes: float4s where the norms
// read them, else floats. A thread past them has nothing to read.
func metalNormUnits(width int) int {
	if MetalNormVec(width) {
		return width / 4
	}
	return width
}

// The argmax bridge/metal runs untuned: partitions of about
// MetalArgmaxPart values, a threadgroup of MetalArgmaxThreads each, at most
// MetalArgmaxMaxParts a row (argmax_merge reads them four a lane).
const (
	MetalArgmaxThreads  = 256
	MetalArgmaxPart     = 4096
	MetalArgmaxMaxParts = 64
)

// MetalArgmaxParts is how bridge/metal splits a row of n values for argmax:
// parts partitions of size values (a multiple of 4, for float4 loads), as
// even as they come and at most MetalArgmaxMaxParts; part <= 0, or a row
// of at most part values, is one partition of the whole row.
func MetalArgmaxParts(n, part int) (size, parts int) {
	if part <= 0 || n <= part {
		return n, 1
	}
	parts = min((n+part-1)/part, MetalArgmaxMaxParts)
	size = ((n+parts-1)/parts + 3) / 4 * 4
	return size, (n + size - 1) / size
}

// metalArgmax is argmax (bridge/metal ops.go Argmax): each row's partitions
// a threadgroup each (argmax_part), their maxima merged by a simdgroup a
// row (argmax_merge); a single partition is one threadgroup a row.
var metalArgmax = &Space{
	Doc: "threads per threadgroup, values of a row per threadgroup (partitions of a row merged by a second dispatch; single: a threadgroup a row)",
	Dims: []Dim{
		{Name: Tokens, Default: 1, Match: Log},
		{Name: Width, Default: 32000, Match: Exact},
	},
	DType:      "f32",
	FixedDType: true,
	Params: []Knob{
		{Name: KnobThreads, Doc: "threads per threadgroup, in whole simdgroups, each reading float4 at a time", Values: Pow2(32, 1024)},
		{Name: KnobPart, Doc: "values of a row per threadgroup, or single", Values: func(s Shape, l Limits) []string {
			return append([]string{"single"}, Pow2(1024, 65536)(s, l)...)
		}},
	},
	Constraints: []Constraint{
		metalSIMD,
		metalThreads(func(c Config, _ Shape) int { return c.Int(KnobThreads) }),
		{Name: "partitions", Check: func(c Config, s Shape, _ Limits) error {
			if p := c.Int(KnobPart); p > 0 && (s[Width]+p-1)/p > MetalArgmaxMaxParts {
				return fmt.Errorf("%d partitions exceed %d", (s[Width]+p-1)/p, MetalArgmaxMaxParts)
			}
			return nil
		}},
		{Name: "idle simdgroups", Check: func(c Config, s Shape, _ Limits) error {
			vals, _ := MetalArgmaxParts(s[Width], c.Int(KnobPart))
			if n := c.Int(KnobThreads); 4*(n-32) >= vals {
				return fmt.Errorf("%d threads over %d values leave simdgroups idle", n, vals)
			}
			return nil
		}},
	},
	Canonical: func(c Config, s Shape, _ Limits) Config {
		if p := c.Int(KnobPart); p > 0 && p >= s[Width] {
			c[KnobPart] = "single"
		}
		return c
	},
	Default: func(Shape, Limits) Config {
		return Config{KnobThreads: strconv.Itoa(MetalArgmaxThreads), KnobPart: strconv.Itoa(MetalArgmaxPart)}
	},
	Format: func(c Config) string { return c[KnobThreads] + "t/" + c[KnobPart] },
}

// metalNorm is rms_norm, add_rms_norm, layer_norm or add_layer_norm
// (bridge/metal ops.go, layernorm.go): one threadgroup per row; width is
// the op's default row length.
func metalNorm(width int) *Space {
	return &Space{
		Doc: "threads per row (one threadgroup a row)",
		Dims: []Dim{
			{Name: Tokens, Default: 1, Match: Log},
			{Name: Width, Default: width, Match: Exact},
		},
		DType:      "f32",
		FixedDType: true,
		Params: []Knob{{Name: KnobThreads, Doc: "threads per row, in whole simdgroups", Values: func(s Shape, l Limits) []string {
			out := Pow2(32, 1024)(s, l)
			if def := strconv.Itoa(MetalNormThreads(s[Width])); !slices.Contains(out, def) {
				out = append(out, def)
				slices.SortFunc(out, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
			}
			return out
		}}},
		Constraints: []Constraint{
			metalSIMD,
			metalThreads(func(c Config, _ Shape) int { return c.Int(KnobThreads) }),
			{Name: "idle simdgroups", Check: func(c Config, s Shape, _ Limits) error {
				if n, u := c.Int(KnobThreads), metalNormUnits(s[Width]); n-32 >= u {
					return fmt.Errorf("%d threads over a row of %d (%d loads) leave simdgroups idle", n, s[Width], u)
				}
				return nil
			}},
		},
		Default: func(s Shape, _ Limits) Config { return Config{KnobThreads: strconv.Itoa(MetalNormThreads(s[Width]))} },
		Format:  func(c Config) string { return c[KnobThreads] + "t" },
	}
}

var metalMoEMV = []string{"0", "1", "2", "4", "8", "16"}

// metalMoERows is a MoE shape's rows per routed expert (MetalMoERows), what
// the Metal space's mv_max compares.
func metalMoERows(s Shape) int { return MetalMoERows(s[Tokens], s[Experts], s[TopK]) }

// metalMoEDefault is what bridge/metal runs untuned at s: grouped, the
// expert matvecs up to MetalMoEMatVecMaxRows rows per routed expert, else
// the tile of MetalMoETile.
func metalMoEDefault(s Shape) Config {
	return merge(Config{KnobStrategy: string(MoEGrouped), KnobChunk: "64", KnobMVMax: strconv.Itoa(MetalMoEMatVecMaxRows),
		KnobRows: "4", KnobSimdgroups: "4"}, MetalMoETile(metalMoERows(s)))
}

// metalMoE is the MoE block (bridge/metal moe.go): dispatch as the CPU's,
// and the expert GEMMs' kernels: simd_sum matvecs while the rows per
// routed expert (MetalMoERows) are at most mv_max, else simdgroup_matrix
// tiles (gate and up staged together).
var metalMoE = &Space{
	Doc:   "expert dispatch (loop, chunked, grouped) and the expert GEMMs: matvec up to mv_max rows per routed expert (rows per simdgroup, simdgroups), else tiles",
	Dims:  moeDims,
	DType: "bf16",
	Params: append([]Knob{
		moeDispatch[0],
		{Name: KnobChunk, Doc: moeDispatch[1].Doc, Values: moeDispatch[1].Values,
			When: func(c Config, _ Shape) bool { return c[KnobStrategy] == string(MoEChunked) }},
		{Name: KnobMVMax, Doc: "the expert matvecs run up to this many rows per routed expert (0: never)", Values: Enum(metalMoEMV...)},
	}, metalPathKnobs(metalMoERows, 16)...),
	Constraints: []Constraint{
		metalSIMD,
		metalThreads(metalPathThreads),
		metalTileRules,
		metalTileMemory(2),
		// A tile holds rows of one expert: at most one per token.
		metalTileFits(func(s Shape) int { return s[Tokens] }, func(s Shape) int { return max(s[Hidden], s[Intermediate]) }),
		metalMVFits(func(s Shape) int { return min(s[Hidden], s[Intermediate]) }),
	},
	Canonical: func(c Config, s Shape, lim Limits) Config {
		if _, ok := c[KnobChunk]; !ok {
			c[KnobChunk] = "64"
		}
		d := cpuMoE.Canonical(Config{KnobStrategy: c[KnobStrategy], KnobChunk: c[KnobChunk]}, s, lim)
		if s[Tokens] == 1 {
			// One token's pairs are distinct experts: every strategy runs
			// them one at a time (bridge/metal moePerPair).
			d = Config{KnobStrategy: string(MoEGrouped)}
		}
		delete(c, KnobChunk)
		for k, v := range d {
			c[k] = v
		}
		return metalPath(c, metalMoERows(s), metalMoEMV, metalMoEDefault(s))
	},
	Default: func(s Shape, _ Limits) Config { return metalMoEDefault(s) },
	Format:  func(c Config) string { return cpuMoE.Format(c) + "/" + metalPathFormat(c, "rows") },
}

// MetalAttnKeysPerSimdgroup is the fewest keys of a partition each
// simdgroup of Metal's decode attention walks: more simdgroups than that
// would only idle. A threadgroup of 32 simdgroups (MLX's sdpa_vector) then
// gives each 4 keys of a context of 128 (docs/metal-kernels.md, "Decode
// attention at short contexts").
const MetalAttnKeysPerSimdgroup = 4

// MetalAttnSimdgroups is the simdgroups of a decode attention threadgroup
// whose partition holds keys keys: the least power of two giving each
// simdgroup at most MetalAttnKeysPerSimdgroup keys, capped at most.
func MetalAttnSimdgroups(most, keys int) int {
	n := 1
	for n < most && n*MetalAttnKeysPerSimdgroup < keys {
		n *= 2
	}
	return max(min(n, most), 1)
}

// MetalAttnShared is the 4-byte words Metal's decode attention keeps past
// its query heads in threadgroup memory until the simdgroups have read
// them: the token's sequence, query start, query length and first new
// key, and its partition's first 32 block numbers, which one simdgroup
// reads for all (docs/metal-kernels.md, "Decode attention's lane layout").
const MetalAttnShared = 4 + 32

// MetalAttnMemory is the threadgroup memory of Metal's decode attention as
// bridge/metal sizes it for nsg simdgroups serving heads query heads of
// headSize: a slot of heads·(headSize+2) floats for each simdgroup whose
// (o, m, l) meet in one round, as many as fit in most bytes, and past
// them the query heads and MetalAttnShared words, which, with fewer slots
// than simdgroups, the running result's heads·(headSize+4) floats
// overwrite once read: the first round's slots overwrite neither, so no
// barrier parts their reads from the slots' writes. The query heads start
// 16 bytes aligned (float4 stores). slots is 0 where one slot and what
// goes past it do not fit.
func MetalAttnMemory(nsg, heads, headSize, most int) (bytes, slots int) {
	slot := 4 * heads * (headSize + 2)
	staged := 4 * (heads*headSize + MetalAttnShared)
	past := func(slots int) int { return (slots*slot + 15) &^ 15 } // the query heads' float4s start 16-byte aligned
	if past(nsg)+staged <= most {
		return past(nsg) + staged, nsg
	}
	run := 4 * heads * (headSize + 4)
	slots = min((most-run)/slot, nsg-1)
	for slots >= 1 && past(slots)+staged > most {
		slots--
	}
	if slots < 1 {
		return max(slot+run, past(1)+staged), 0
	}
	return max(slots*slot+run, past(slots)+staged), slots
}

// MetalAttnReduceChunk is the partitions of a head Metal's split-K reduce
// (paged_attention_reduce, REDUCE_CHUNK) weighs at a time, one barrier
// each: a token's partitions up to it take one barrier and are weighed by
// their overall maximum.
const MetalAttnReduceChunk = 256

// MetalAttnReduceHeads is the heads a threadgroup of Metal's split-K reduce
// serves, a simdgroup for each 32 elements of a head, over tokens of up to
// partitions partitions: as many as fill one simdgroup load of their (m,
// l) pairs, a lane a (head, partition) pair, within threads threads and
// the heads there are (docs/metal-kernels.md, "Decode attention at short
// contexts"). One head a threadgroup read 2 pairs a load at 2 partitions.
func MetalAttnReduceHeads(partitions, headSize, heads, threads int) int {
	dp := (headSize + 31) / 32 * 32
	return max(1, min(32/max(partitions, 1), threads/dp, heads))
}

// MetalAttnReduceMemory is the threadgroup memory of Metal's split-K
// reduce serving hr heads over tokens of up to partitions partitions: two
// halves (by a chunk's parity) of hr heads' pairs of a chunk, 8 bytes each.
func MetalAttnReduceMemory(hr, partitions int) int {
	return 2 * hr * min(partitions, MetalAttnReduceChunk) * 8
}

// MetalPrefillStage is one stage of Metal's tiled prefill attention: keys
// rows of K and of V, headSize values of stage bytes each (the cache's
// dtype; bf16 is 4 before MSL 3.1) plus 16 bytes of padding.
func MetalPrefillStage(keys, headSize, stage int) int {
	return 2 * keys * (headSize + 16/stage) * stage
}

// MetalPrefillMemory is the threadgroup memory of Metal's tiled prefill
// attention as bridge/metal sizes it: two stages (double buffered) when
// they fit in most bytes, else one.
func MetalPrefillMemory(keys, headSize, stage, most int) (bytes, stages int) {
	per := MetalPrefillStage(keys, headSize, stage)
	if 2*per <= most {
		return 2 * per, 2
	}
	return per, 1
}
