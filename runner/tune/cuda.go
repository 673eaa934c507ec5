package tune

import (
	"fmt"
	"strconv"

	"github.com/mtlbench/mtlbench/bridge"
)

// The CUDA backend's tunable kernels (bridge/cuda tuning_linux.go applies
// their configs). "auto" is the backend's own per-shape choice, so the
// default is what runs untuned by construction, not a copy of its rules.
// The backend's L2 weight prefetch is not in these spaces: a kernel timed
// alone gains from it, but inside a decode step it competes for bandwidth
// with the kernel it overlaps, and it measured slower there.

// cudaMatMul is the decode GEMV (up to 8 rows; larger m runs cuBLAS).
var cudaMatMul = &Kernel{
	Backend: "cuda", Name: "matmul",
	Doc: "decode GEMV: rows per warp (bf16 only above 1), warps splitting k",
	Dims: []Dim{
		{Name: "m", Default: 1, Match: Log},
		{Name: "n", Default: 2048, Match: Exact},
		{Name: "k", Default: 2048, Match: Exact},
	},
	DType: "bf16",
	Params: []Param{
		{Name: "rows", Doc: "auto | 1 | 2 | 4 rows per warp (4 only up to 4 tokens a pass)", Values: Enum("auto", "1", "2", "4")},
		{Name: "ksplit", Doc: "auto | 1..8 warps sharing a row", Values: Enum("auto", "1", "2", "4", "8")},
	},
	Applies: func(s Shape) bool { return s["m"] <= 8 },
	Constraints: []Constraint{
		{Name: "rows per warp", Check: func(c Config, s Shape, _ Limits) error {
			if c["rows"] == "4" && s["m"] > 4 {
				return fmt.Errorf("4 rows per warp exist for up to 4 tokens a pass, not m=%d", s["m"])
			}
			return nil
		}},
		{Name: "split-K", Check: func(c Config, s Shape, _ Limits) error {
			// Each warp takes 256 elements of a row at a time.
			if ks, err := strconv.Atoi(c["ksplit"]); err == nil && s["k"] < 256*ks {
				return fmt.Errorf("%d warps over k=%d would leave some idle", ks, s["k"])
			}
			return nil
		}},
	},
	Default: func(Shape, Limits) Config { return Config{"rows": "auto", "ksplit": "auto"} },
	Format:  func(c Config) string { return "r" + c["rows"] + "/k" + c["ksplit"] },
}

// cudaAttention is paged decode attention with the fused KV write: decode.cu
// (head sizes up to 128, GQA groups up to 8) or, past those, attention.cu's
// kernel with 8 warps per block.
var cudaAttention = &Kernel{
	Backend: "cuda", Name: "paged_attention_decode",
	Doc: "split-context decode attention: context positions per partition (a multiple of the 32-position chunk)",
	Dims: []Dim{
		{Name: "seqs", Default: 1, Match: Log},
		{Name: "context", Default: 1024, Match: Log},
		{Name: "num_heads", Default: 32, Match: Exact},
		{Name: "num_kv_heads", Default: 8, Match: Exact},
		{Name: "head_size", Default: 128, Match: Exact},
		{Name: "block_size", Default: 16, Match: Exact},
	},
	DType: "bf16",
	Params: []Param{
		{Name: "part", Doc: "context positions per partition", Values: Pow2(32, 1024)},
	},
	Constraints: []Constraint{
		{Name: "partitions", Check: func(c Config, s Shape, _ Limits) error {
			// The backend caps a launch at 64 partitions (one merge slot
			// each) by doubling the part: a smaller one is the same launch.
			if n := (s["context"] + c.Int("part") - 1) / c.Int("part"); n > 64 {
				return fmt.Errorf("%d partitions exceed the 64 one launch merges", n)
			}
			return nil
		}},
	},
	Default: func(Shape, Limits) Config { return Config{"part": "32"} },
	Format:  func(c Config) string { return "p" + c["part"] },
}

// cudaMoE is the MoE block: dispatch (as the CPU's) plus the expert GEMVs'
// launch shape.
var cudaMoE = &Kernel{
	Backend: "cuda", Name: "moe",
	Doc:   "expert dispatch (loop, chunked, grouped) and the expert GEMVs: rows per warp, pairs per pass; one token: down-projection rows per block",
	Dims:  moeDims,
	DType: "bf16",
	Params: append(moeDispatch[:len(moeDispatch):len(moeDispatch)],
		Param{Name: "rows", Doc: "rows per warp of the expert GEMVs (2: bf16 only)", Values: Enum("1", "2")},
		Param{Name: "pass", Doc: "pairs per pass of an expert's rows: auto (by pairs per slot) or 1..8", Values: Enum("auto", "1", "2", "4", "8")},
		Param{Name: "ds_rows", Doc: "one token: rows per block of the down projection (2, 8: bf16 only)", Values: Enum("2", "4", "8")},
	),
	Canonical: func(c Config, s Shape, lim Limits) Config {
		if s["tokens"] == 1 {
			// One token: each expert its own slot, one pair a pass, whatever
			// the strategy.
			c["strategy"] = string(bridge.MoEGrouped)
			delete(c, "chunk")
			c["pass"] = "auto"
			return c
		}
		delete(c, "ds_rows")
		rest := Config{"strategy": c["strategy"], "chunk": c["chunk"]}
		rest = cpuMoE.Canonical(rest, s, lim)
		delete(c, "chunk")
		for k, v := range rest {
			c[k] = v
		}
		return c
	},
	Default: func(Shape, Limits) Config {
		// The backend's defaults (bridge/cuda moeConfig).
		return Config{"strategy": string(bridge.MoEGrouped), "chunk": "64", "rows": "1", "pass": "auto", "ds_rows": "4"}
	},
	Format: func(c Config) string {
		s := cpuMoE.Format(c) + "/r" + c["rows"]
		if v, ok := c["ds_rows"]; ok {
			return s + "/d" + v
		}
		return s + "/p" + c["pass"]
	},
}
