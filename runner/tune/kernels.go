package tune

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/internal/suggest"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// The tuning spaces are declared with their ops (kernels/ops); the tuner's
// types are the declarations' own.
type (
	Kernel     = ops.Space
	Dim        = ops.Dim
	Param      = ops.Knob
	Constraint = ops.Constraint
	Shape      = ops.Shape
	Config     = ops.Config
	Limits     = ops.Limits
	Match      = ops.Match
	Pruned     = ops.Pruned
	Move       = ops.Move
)

// Shape dimensions match exactly or by octaves (ops.Match).
const (
	Exact = ops.Exact
	Log   = ops.Log
)

// Values generators for declarations (tests declare fake kernels).
var (
	Enum = ops.Enum
	Pow2 = ops.Pow2
	UpTo = ops.UpTo
)

// registry is every op's declared tuning spaces, per backend in op order;
// Register adds test kernels.
var registry = func() []*Kernel {
	var out []*Kernel
	for _, b := range []ops.Backend{ops.CPU, ops.Metal, ops.CUDA} {
		out = append(out, ops.Spaces(b)...)
	}
	return out
}()

// SpaceBackend is the backend whose tuning spaces backend runs: metal-emu
// runs the Metal kernels on the CPU.
func SpaceBackend(backend string) string {
	if backend == "metal-emu" {
		return string(ops.Metal)
	}
	return backend
}

// Kernels are the tunable kernels of a backend ("cpu"), in declaration order.
func Kernels(backend string) []*Kernel {
	backend = SpaceBackend(backend)
	var out []*Kernel
	for _, k := range registry {
		if string(k.Backend) == backend {
			out = append(out, k)
		}
	}
	return out
}

// Find returns the kernel name of backend.
func Find(backend, name string) (*Kernel, error) {
	var names []string
	for _, k := range Kernels(backend) {
		if string(k.Op) == name {
			return k, nil
		}
		names = append(names, string(k.Op))
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("the %s backend declares no tunable kernels", backend)
	}
	sort.Strings(names)
	hint := ""
	if d := suggest.DidYouMean(name, names); d != "" {
		hint = "; " + d
	}
	return nil, fmt.Errorf("kernel %q has no tunables on the %s backend (tunable: %s%s)", name, backend, strings.Join(names, ", "), hint)
}

// Register adds a kernel declaration (tests declare fake ones). It replaces
// a kernel of the same backend and name and returns a function restoring
// the previous registry.
func Register(k *Kernel) (restore func()) {
	prev := registry
	next := make([]*Kernel, 0, len(prev)+1)
	for _, o := range prev {
		if o.Backend != k.Backend || o.Op != k.Op {
			next = append(next, o)
		}
	}
	registry = append(next, k)
	return func() { registry = prev }
}

// MoEParams converts a moe config to the backend's dispatch parameters.
func MoEParams(c Config) bridge.MoEParams {
	p := bridge.MoEParams{Strategy: bridge.MoEStrategy(c[ops.KnobStrategy]), ChunkSize: c.Int(ops.KnobChunk)}
	if p.ChunkSize == 0 {
		p.ChunkSize = 64
	}
	return p
}

// MatMulSplit converts a matmul config to SetMatMulSplit's piece (0: even)
// and threads.
func MatMulSplit(c Config) (piece, threads int) { return c.Int(ops.KnobPiece), c.Int(ops.KnobThreads) }

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

// Limiter is a backend that reports its device's limits (Metal: threads
// per threadgroup, threadgroup memory, SIMD width).
type Limiter interface {
	Limits() ops.Limits
}

// KernelLimiter is a backend whose kernels may allow less than its device
// (a Metal pipeline's maxTotalThreadsPerThreadgroup).
type KernelLimiter interface {
	KernelLimits(kernel string) ops.Limits
}

// DeviceNamer is a backend whose tuned configs are keyed by more than its
// device's name (an Apple GPU's family).
type DeviceNamer interface {
	TuneDevice() string
}

// DeviceName is the device name tuned configs for be are keyed by.
func DeviceName(be bridge.Backend) string {
	if d, ok := be.(DeviceNamer); ok {
		return d.TuneDevice()
	}
	return be.Info().Name
}

// Stager is a backend whose GEMM tiles stage a weight in a width of its
// own: Metal's bf16 is staged as f32 before MSL 3.1, so a tile tuned
// under 3.1 may not fit on a Mac that compiles 3.0.
type Stager interface {
	StageBytes(dtype string) int
}

// LimitsFor is LimitsOf narrowed to what kernel's pipelines allow, with
// the staged width of dtype's weights ("" or a packed format: the
// kernel's space's own).
func LimitsFor(be bridge.Backend, kernel, dtype string) Limits {
	lim := LimitsOf(be)
	if k, ok := be.(KernelLimiter); ok {
		lim = k.KernelLimits(kernel)
	}
	if s, ok := be.(Stager); ok && dtype != "" {
		lim.StageBytes = s.StageBytes(dtype)
	}
	return lim
}

// LimitsOf reads a backend's limits: for the CPU, its goroutine count; for
// CUDA, a block's threads and static shared memory; for Metal, the
// device's.
func LimitsOf(be bridge.Backend) Limits {
	if l, ok := be.(Limiter); ok {
		return l.Limits()
	}
	info := be.Info()
	if info.Backend == string(ops.CUDA) {
		return Limits{MaxThreads: 1024, ThreadgroupMemory: 48 << 10, SIMDWidth: 32}
	}
	return Limits{MaxThreads: max(info.Cores, 1)}
}

// CheckDType refuses a weight dtype kernel k is not tuned for: a packed
// format for a packed-weight kernel, its own dtype for one that reads no
// weights (FixedDType), a float dtype for the others. A tune and a tuned
// file's entry go by the one rule.
func CheckDType(k *Kernel, dtype string) error {
	if k.FixedDType && dtype != k.DType {
		return fmt.Errorf("%s: dtype %q: %s reads no weight matrix, so its configs are tuned and looked up at %s whatever the model's dtype",
			k.Op, dtype, k.Op, k.DType)
	}
	if _, packed := ops.DType(k.DType).Quant(); packed {
		if !slices.Contains(ops.QuantDTypes, ops.DType(dtype)) {
			var names []string
			for _, d := range ops.QuantDTypes {
				names = append(names, string(d))
			}
			return fmt.Errorf("%s: dtype %q: want a packed format (%s)", k.Op, dtype, strings.Join(names, ", "))
		}
		return nil
	}
	if _, err := bridge.ParseDType(dtype); err != nil {
		return fmt.Errorf("%s: %w", k.Op, err)
	}
	return nil
}
