package tune

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/bridge"
)

// The declared kernels, per backend. A GPU backend adds its own (threadgroup
// size, tile sizes, split-K partitions, with threadgroup-memory and
// max-threads constraints) next to the CPU's.
var registry = []*Kernel{cpuMoE, cpuMatMul, cudaMatMul, cudaAttention, cudaMoE}

// Kernels are the tunable kernels of a backend ("cpu"), in declaration order.
func Kernels(backend string) []*Kernel {
	var out []*Kernel
	for _, k := range registry {
		if k.Backend == backend {
			out = append(out, k)
		}
	}
	return out
}

// Find returns the kernel name of backend.
func Find(backend, name string) (*Kernel, error) {
	var names []string
	for _, k := range Kernels(backend) {
		if k.Name == name {
			return k, nil
		}
		names = append(names, k.Name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("the %s backend declares no tunable kernels", backend)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("kernel %q has no tunables on the %s backend (tunable: %s)", name, backend, strings.Join(names, ", "))
}

// Register adds a kernel declaration (tests declare fake ones). It replaces
// a kernel of the same backend and name and returns a function restoring
// the previous registry.
func Register(k *Kernel) (restore func()) {
	prev := registry
	next := make([]*Kernel, 0, len(prev)+1)
	for _, o := range prev {
		if o.Backend != k.Backend || o.Name != k.Name {
			next = append(next, o)
		}
	}
	registry = append(next, k)
	return func() { registry = prev }
}

// moeDims is the shape of an MoE block, and moeDispatch the dispatch
// choices (bridge.MoEStrategy), shared by every backend's moe kernel.
var (
	moeDims = []Dim{
		{Name: "tokens", Default: 1, Match: Log},
		{Name: "experts", Default: 128, Match: Exact},
		{Name: "top_k", Default: 8, Match: Exact},
		{Name: "hidden", Default: 2048, Match: Exact},
		{Name: "intermediate", Default: 768, Match: Exact},
	}
	moeDispatch = []Param{
		{Name: "strategy", Doc: "loop | chunked | grouped", Values: Enum("loop", "chunked", "grouped")},
		{Name: "chunk", Doc: "(token, expert) pairs per chunk, chunked only", Values: Pow2(1, 256)},
	}
)

// cpuMoE is the CPU MoE dispatch (bridge/cpu/moe.go): the loop, chunked
// and grouped strategies, and the chunk size of chunked.
var cpuMoE = &Kernel{
	Backend: "cpu", Name: "moe",
	Doc:    "expert dispatch: loop (one token at a time), chunked (GEMM per expert per chunk of pairs), grouped (one GEMM per expert)",
	Dims:   append(moeDims[:len(moeDims):len(moeDims)], Dim{Name: "threads", Match: Exact, Device: true}),
	DType:  "bf16",
	Params: moeDispatch,
	Canonical: func(c Config, s Shape, _ Limits) Config {
		if c["strategy"] != string(bridge.MoEChunked) {
			delete(c, "chunk")
			return c
		}
		// Chunks of one pair are the loop, a chunk holding every pair is
		// grouped: the same groups, in the same order.
		switch pairs, chunk := s["tokens"]*s["top_k"], c.Int("chunk"); {
		case chunk == 1:
			return Config{"strategy": string(bridge.MoELoop)}
		case chunk >= pairs:
			return Config{"strategy": string(bridge.MoEGrouped)}
		}
		return c
	},
	Default: func(Shape, Limits) Config { return Config{"strategy": string(bridge.MoEGrouped), "chunk": "64"} },
	Format: func(c Config) string {
		if c["strategy"] == string(bridge.MoEChunked) {
			return "chunked/" + c["chunk"]
		}
		return c["strategy"]
	},
}

// cpuMatMul is the CPU matmul's work split (bridge/cpu tunables.go): even
// (today's: one contiguous range per thread) or pieces of piece output rows
// handed out dynamically to threads goroutines.
var cpuMatMul = &Kernel{
	Backend: "cpu", Name: "matmul",
	Doc: "work split: output rows in pieces (even: one range per thread) over threads goroutines",
	Dims: []Dim{
		{Name: "m", Default: 1, Match: Log},
		{Name: "n", Default: 2048, Match: Exact},
		{Name: "k", Default: 2048, Match: Exact},
		{Name: "threads", Match: Exact, Device: true},
	},
	DType: "bf16",
	Params: []Param{
		{Name: "piece", Doc: "rows per piece: even, or 16..512", Values: func(s Shape, l Limits) []string {
			return append([]string{"even"}, Pow2(16, 512)(s, l)...)
		}},
		{Name: "threads", Doc: "goroutines, 1..GOMAXPROCS", Values: UpTo(func(l Limits) int { return max(l.MaxThreads, 1) })},
	},
	Constraints: []Constraint{
		{Name: "piece <= n", Check: func(c Config, s Shape, _ Limits) error {
			if p := c.Int("piece"); p > s["n"] {
				return fmt.Errorf("a piece of %d rows exceeds n=%d", p, s["n"])
			}
			return nil
		}},
		{Name: "coverage", Check: func(c Config, s Shape, _ Limits) error {
			// Fewer pieces than threads leaves goroutines idle: the same
			// work as a config with fewer threads.
			p, t := c.Int("piece"), c.Int("threads")
			if p > 0 && (s["n"]+p-1)/p < t {
				return fmt.Errorf("%d pieces of %d rows cannot keep %d threads busy", (s["n"]+p-1)/p, p, t)
			}
			return nil
		}},
	},
	Canonical: func(c Config, s Shape, _ Limits) Config {
		if c["piece"] == "even" {
			// The even split never runs more ranges than 16-row blocks.
			c["threads"] = strconv.Itoa(min(c.Int("threads"), (s["n"]+15)/16))
		}
		return c
	},
	Default: func(_ Shape, l Limits) Config {
		return Config{"piece": "even", "threads": strconv.Itoa(max(l.MaxThreads, 1))}
	},
	Format: func(c Config) string { return c["piece"] + "/" + c["threads"] + "t" },
}

// MoEParams converts a moe config to the backend's dispatch parameters.
func MoEParams(c Config) bridge.MoEParams {
	p := bridge.MoEParams{Strategy: bridge.MoEStrategy(c["strategy"]), ChunkSize: c.Int("chunk")}
	if p.ChunkSize == 0 {
		p.ChunkSize = 64
	}
	return p
}

// MatMulSplit converts a matmul config to SetMatMulSplit's piece (0: even)
// and threads.
func MatMulSplit(c Config) (piece, threads int) { return c.Int("piece"), c.Int("threads") }

// SourceHasher is a backend that can name the source of its kernels, so a
// tuned config is dropped when the kernel changes.
type SourceHasher interface {
	KernelSourceHash(kernel string) string
}

// MatMulSplitter is a backend whose matmul work split can be set.
type MatMulSplitter interface {
	SetMatMulSplit(func(m, n, k int, dt bridge.DType) (piece, threads int))
}

// SourceHash is the backend's hash of kernel's source, "" when it cannot
// tell (then entries are not checked for staleness).
func SourceHash(be bridge.Backend, kernel string) string {
	if h, ok := be.(SourceHasher); ok {
		return h.KernelSourceHash(kernel)
	}
	return ""
}

// LimitsOf reads a backend's limits: for the CPU, its goroutine count; for
// CUDA, a block's threads and static shared memory.
func LimitsOf(be bridge.Backend) Limits {
	info := be.Info()
	if info.Backend == "cuda" {
		return Limits{MaxThreads: 1024, ThreadgroupMemory: 48 << 10, SIMDWidth: 32}
	}
	return Limits{MaxThreads: max(info.Cores, 1)}
}
