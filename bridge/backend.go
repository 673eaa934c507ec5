package bridge

import (
	"errors"
	"slices"
	"time"

	"github.com/mtlbench/mtlbench/kernels"
)

// Tensor is a handle to memory a Backend owns. Shapes are row-major.
type Tensor interface {
	DType() DType
	Shape() []int
	// Len is the number of elements.
	Len() int
}

// StepMeta is the attention metadata of one engine step, built once on the
// host and handed to the backend before the step's ops. The field names
// follow vLLM's: SeqLens holds FULL sequence lengths (cached plus new
// tokens), never query lengths, so attention always knows how much cached KV
// each sequence has.
type StepMeta struct {
	NumTokens       int
	NumSeqs         int
	MaxQueryLen     int
	MaxSeqLen       int
	NumDecodeTokens int     // sequences with a query of exactly one token
	Positions       []int32 // [NumTokens]
	SlotMapping     []int32 // [NumTokens] cache slot of each new token
	QueryStartLoc   []int32 // [NumSeqs+1] prefix sum of query lengths
	SeqLens         []int32 // [NumSeqs]
	BlockTable      []int32 // [NumSeqs][MaxBlocks]
	MaxBlocks       int
	BlockSize       int
	// LogitRows are the token rows whose logits the step needs: the last
	// query token of each sequence that will sample.
	LogitRows []int32
}

// KVCache is one layer's paged cache: K and V of shape
// [num_blocks][kv_heads][block_size][head_dim].
type KVCache struct {
	K, V      Tensor
	BlockSize int
}

// MoEWeights are one sparse MoE block. Per-expert tensors are kept as the
// checkpoint stores them so mmap'd weights need no copy; a GPU backend may
// pack them at load.
type MoEWeights struct {
	Router         Tensor // [experts][hidden]
	Gate, Up, Down []Tensor
	TopK           int
	NormTopK       bool
	Hidden, Inter  int
}

// MoEStrategy is how expert work is dispatched: the alternatives the MoE
// chunk-size history (reports/history/data) compares.
type MoEStrategy string

const (
	// MoELoop runs each token's experts one token at a time.
	MoELoop MoEStrategy = "loop"
	// MoEChunked groups (token, expert) pairs in chunks of ChunkSize and runs
	// a batched GEMM per chunk.
	MoEChunked MoEStrategy = "chunked"
	// MoEGrouped sorts tokens by expert and runs one GEMM per active expert.
	MoEGrouped MoEStrategy = "grouped"
)

// MoEParams selects the dispatch.
type MoEParams struct {
	Strategy  MoEStrategy
	ChunkSize int
	// Unfused keeps the routing (top-k, softmax) a step of its own where a
	// backend would fold it into the router's GEMV (fusion: off).
	Unfused bool
}

// StepStats is what a backend counted during a step, valid after EndStep.
type StepStats struct {
	// ExpertsTouched is, per MoE layer run, the number of distinct experts
	// the step's tokens were routed to: the expert weights it had to read.
	ExpertsTouched []int
	// Timings are per-op times, recorded in profile mode only.
	Timings []OpTiming
	// Dispatches are the kernel launches (CUDA) or compute dispatches
	// (Metal) the step took; 0 on the CPU, which launches none.
	Dispatches int
	// CountedBytes are the device bytes the step's dispatches read and
	// wrote as a cost witness counted them (the Metal emulator:
	// docs/msl-subset.md); 0 on devices that count nothing.
	CountedBytes int64
	// FootprintBytes are the distinct bytes each dispatch read and wrote,
	// summed over the step's dispatches: the traffic if each dispatch's
	// caches held what it touched more than once; 0 where not counted.
	FootprintBytes int64
	// Loads are the device load instructions the step's dispatches issued,
	// summed over lanes, and SimdgroupLoads each simdgroup's count of its
	// busiest lane's: Loads over SimdgroupLoads is the lanes of 32 a load
	// kept busy (mtl.Cost.LanesPerLoad). CriticalLoads are the loads of
	// each dispatch's busiest simdgroup, summed (mtl.Cost.CriticalLoads):
	// the loads the step issues one after another. 0 where not counted.
	Loads, SimdgroupLoads, CriticalLoads int64
	// DeviceTime is the step's span on the device's clock, from the device
	// starting its first work to finishing its last (CUDA: events around
	// the step on its stream; Metal: the command buffers' GPU start and
	// end); 0 where the device keeps no clock of its own (the CPU). A step
	// whose DeviceTime is well under its wall time left the device idle
	// (docs/architecture.md, "The device's share of a step").
	DeviceTime time.Duration
	// GraphMisses are the step's launch lists that ran without a graph
	// held for them, launched directly or captured (CUDA); 0 elsewhere.
	GraphMisses int
	// Operands are the cost witness's bytes by kernel argument, summed
	// over the step's dispatches, the most bytes beyond their distinct ones
	// first; nil where nothing counts them (all but the Metal emulator).
	Operands []OperandBytes
}

// OperandBytes is what a cost witness counted one buffer argument of one
// kernel moving: every access, and the distinct bytes. Read over
// DistinctRead is how often the kernel read each byte of it.
type OperandBytes struct {
	// Kernel is the kernel's function name, Operand its parameter name.
	Kernel, Operand               string
	Read, Written                 int64
	DistinctRead, DistinctWritten int64
}

// OpTiming is the time one op took in one layer.
type OpTiming struct {
	Layer     int // -1 outside the layers (embedding, final norm, LM head)
	Component string
	Op        string
	Duration  time.Duration
	// CountedBytes and FootprintBytes are what the op's dispatches moved as
	// a cost witness counted them (StepStats has the step's), and
	// CriticalLoads the loads of each of its dispatches' busiest simdgroup,
	// summed; 0 where nothing is counted.
	CountedBytes, FootprintBytes, CriticalLoads int64
}

// Components of a layer's time, as the documented history breaks a decode
// step down (reports/history/data).
const (
	CompAttention = "attention"
	CompMoE       = "moe"
	CompMLP       = "mlp"
	CompNorm      = "norm"
	CompOther     = "other"
)

// DeviceInfo describes what a backend runs on.
type DeviceInfo struct {
	Backend string
	Name    string
	// Cores are the device's compute units (the CPU's threads, a CUDA
	// GPU's SMs, an Apple GPU's cores from the IORegistry); 0 where it does
	// not report them (a Mac whose IORegistry lacks the count; the emulator
	// unless it is given one).
	Cores       int
	MemoryBytes int64
	// AvailableBytes is what a new allocation can still get (0: unknown).
	AvailableBytes int64
	// CacheBytes is the last-level cache a kernel benchmark must outgrow to
	// time memory rather than cache (a GPU's L2; 0: unknown).
	CacheBytes int64
	Emulated   bool
	// Notes describe how the backend runs (compiler, driver, switches
	// such as graphs or fast math off): runs record them as their own.
	Notes string
	// Startup is what opening the backend took in this process (CUDA:
	// kernels compiled or read from cache). It differs between runs of one
	// setup, so it is no part of Notes, which compare sets side by side.
	Startup string
}

// Backend is the op contract the engine runs on. GPU backends only encode
// between BeginStep and EndStep; EndStep is the step's one synchronisation
// (an AsyncStepper defers even that, to a PendingStep's Wait).
// Ops do not return errors: shapes are checked when the model loads, and a
// backend that fails mid-step reports the first failure from EndStep, as a
// GPU command buffer would.
type Backend interface {
	Info() DeviceInfo
	// ActDType is the dtype of activations, and of the KV cache unless the
	// backend implements KVCacheDTypes.
	ActDType() DType

	// Alloc returns a zeroed tensor.
	Alloc(dt DType, shape ...int) (Tensor, error)
	// Weight wraps or copies host bytes (little-endian, of dtype dt). A
	// backend that shares host memory may alias data, which must then stay
	// valid (an mmap'd checkpoint).
	Weight(dt DType, shape []int, data []byte) (Tensor, error)
	// Read copies a tensor to the host as f32 (waits for pending work).
	Read(t Tensor, dst []float32) error
	// ReadI32 copies an I32 tensor to the host.
	ReadI32(t Tensor, dst []int32) error
	Free(t Tensor)

	// BeginStep uploads the step's metadata and token ids ([NumTokens]).
	BeginStep(meta *StepMeta, tokens []int32, profile bool) error
	// Mark attributes the following ops' time to (layer, component, op) in
	// profile mode; a no-op otherwise.
	Mark(layer int, component, op string)

	// Embedding gathers table rows for the step's tokens into out.
	Embedding(out, table Tensor)
	// GatherRows copies the step's LogitRows of x into out.
	GatherRows(out, x Tensor)
	RMSNorm(out, x, w Tensor, eps float32)
	// AddRMSNorm does residual += x, then out = RMSNorm(residual)·w.
	AddRMSNorm(out, residual, x, w Tensor, eps float32)
	// MatMul computes out = x·wᵀ (+ bias, which may be nil).
	MatMul(out, x, w, bias Tensor)
	// RoPE rotates q and k in place at the step's positions (neox style),
	// after normalising each head with qNorm / kNorm when they are non-nil
	// (Qwen3's QK-norm), by rot's frequencies.
	RoPE(q, k, qNorm, kNorm Tensor, heads, kvHeads, headDim int, rot kernels.Rotary, eps float32)
	// Attention writes k and v into the cache through the slot mapping, then
	// runs causal paged attention of q over each sequence's cached context,
	// or its last window positions where window > 0 (AttentionOp.Window).
	Attention(out, q, k, v Tensor, cache KVCache, heads, kvHeads, headDim int, scale float32, window int)
	SiLUMul(out, gate, up Tensor)
	Add(out, a, b Tensor)
	// MoE runs a sparse expert block: route, dispatch, combine.
	MoE(out, x Tensor, w *MoEWeights, p MoEParams)
	// Argmax writes the index of each row's largest logit into out (I32),
	// or NoToken where the row holds no number above -inf (ArgmaxOp).
	Argmax(out, logits Tensor)
	// LayerNorm is out = LayerNorm(x)·w + b over rows of w's length.
	LayerNorm(out, x, w, b Tensor, eps float32)
	// AddLayerNorm does residual += x, then out = LayerNorm(residual)·w + b.
	AddLayerNorm(out, residual, x, w, b Tensor, eps float32)
	// GELU is out = gelu(x), tanh approximation; out may be x.
	GELU(out, x Tensor)
	// PositionEmbedding adds row Positions[t] of table to row t of x, for
	// the step's tokens; a position outside the table fails the step.
	PositionEmbedding(x, table Tensor)

	// EndStep waits for the step to finish and returns its first error.
	EndStep() (StepStats, error)
	Close() error
}

// ErrNonFinite is what a step's error wraps when its kernels met NaN where
// they cannot go on without one, e.g. a MoE router's probabilities, whose
// top-k picks no expert: the backend keeps every index in bounds and fails
// the step, and the engine names the weight at fault (runner/engine
// NonFiniteError).
var ErrNonFinite = errors.New("non-finite values")

// MappedWeighter is implemented by backends that can alias weights which
// live in memory mapped outside the Go heap (an mmap'd checkpoint, the
// off-heap synthetic weights) instead of copying them: Metal's
// newBufferWithBytesNoCopy over the pages that hold the tensor. The memory
// must stay mapped until the tensor is freed with no step in flight (a
// kernel case gives its own back then), or else until the backend is
// closed.
type MappedWeighter interface {
	WeightMapped(dt DType, shape []int, data []byte) (Tensor, error)
}

// Trimmer is implemented by backends that keep freed memory for reuse (a
// buffer pool, which serves a benchmark's repetitions): Trim gives it back.
// A runner trims between cases that run one after another, so one case's
// leftovers are neither held through the next nor counted in its peak.
type Trimmer interface {
	Trim()
}

// CopyDropper is implemented by backends that copy some weights out of the
// host bytes they are handed: a GPU with memory of its own, or Metal where a
// tensor cannot be wrapped in place (unaligned, or gathered with others).
// DropCopied gives the backend a function to call on bytes it has copied and
// will not read again; the loader's gives back the pages those bytes hold in
// a mapped checkpoint and leaves any other memory alone, so a copied weight
// is resident once rather than also as its file's pages.
type CopyDropper interface {
	DropCopied(drop func(b []byte))
}

// LaunchTuner is implemented by backends whose kernels take tuned launch
// parameters (runner/tune declares each kernel's space). pick maps one
// launch's shape, in the kernel's tuning dimensions, to its config; ok
// false keeps the backend's own choice. A nil pick restores the defaults.
type LaunchTuner interface {
	SetLaunchConfig(kernel string, pick LaunchPick)
}

// LaunchPick answers one launch: dtype is its float weights' (a matrix kept
// in f32 beside bf16 ones is tuned, and its tile sized, as f32), or "" for
// the model's own (a launch of no weights, or of packed ones).
type LaunchPick func(dtype string, shape map[string]int) (config map[string]string, ok bool)

// AsyncStepper is implemented by backends that can queue a step and return
// before it has run, so the host records the next step while the device
// runs this one: the host's time between steps (reading the tokens back,
// scheduling, recording) is otherwise time the device stands idle. At most
// two steps are in flight; BeginStep refuses a third.
// Threader is a backend whose ops run on a number of goroutines that may
// change between steps (the CPU): a case's `threads` parameter.
type Threader interface {
	// SetThreads sets the goroutines ops run on; 0 restores the count the
	// backend was opened with.
	SetThreads(n int)
}

type AsyncStepper interface {
	// BeginStepFrom is BeginStep for a step whose token ids are still being
	// computed: the device reads them from src (I32, at least NumTokens
	// values, in order) when the step starts, after the steps before it.
	BeginStepFrom(meta *StepMeta, src Tensor) error
	// SubmitStep ends the step as EndStep does but returns once its work is
	// queued. ids, an I32 tensor or nil, is copied back as the step leaves
	// it, for Wait to return. A profiled step is waited for here.
	SubmitStep(ids Tensor) (PendingStep, error)
}

// StreamPieces is when a GPU backend hands a step it is still recording to
// the device, piece by piece, where the device would otherwise wait for the
// whole step (no step of its own in flight ahead of it): a first piece of
// StreamFirst kernels, then each piece twice as long as the one before, so
// the device starts after a few kernels are recorded and a step of hundreds
// is a handful of pieces (docs/architecture.md, "Streamed steps"). The zero
// value is a step's start.
type StreamPieces struct {
	next, taken int
}

// StreamFirst is the kernels of a streamed step's first piece.
const StreamFirst = 24

// Take reports whether pending kernels, recorded since the last piece was
// handed off, make the next piece, and counts it if so.
func (p *StreamPieces) Take(pending int) bool {
	if p.next == 0 {
		p.next = StreamFirst
	}
	if pending < p.next {
		return false
	}
	p.next *= 2
	p.taken++
	return true
}

// Pieces is how many pieces the step runs in: those taken, and the rest.
func (p *StreamPieces) Pieces() int { return p.taken + 1 }

// PendingStep is a step SubmitStep queued.
type PendingStep interface {
	// Wait waits for the step and returns its stats, its first error and
	// the values of its ids tensor. It may be called once.
	Wait() (StepStats, []int32, error)
}

// MatmulPeakProber is implemented by backends that can measure their
// device's matrix-multiply rate, in FLOP/s: the roofline of prefill. dt is
// the weights' dtype (the product runs as that dtype's prefill would: bf16
// tensor cores for a bf16 model on CUDA, the SIMD GEMM on the CPU, a
// simdgroup_matrix GEMM on Metal).
type MatmulPeakProber interface {
	MeasureMatmulPeak(dt DType) (float64, error)
}

// BandwidthProber is implemented by backends that can measure their
// device's memory read bandwidth, in bytes/s: the roofline of decode.
type BandwidthProber interface {
	MeasureBandwidth() (float64, error)
}

// WindowRunner is implemented by backends whose attention runs a sliding
// window (AttentionOp.Window) past its length. The engine refuses a
// request longer than a model's window on any other backend, which would
// attend to positions the model does not (docs/architecture.md, "Sliding
// windows").
type WindowRunner interface {
	RunsWindows() bool
}

// KVCacheDTypes is a backend whose attention reads a KV cache in other
// dtypes than ActDType: the engine keeps a model's cache in the model's
// dtype when it is listed (AutoKVDType, runner/engine.KVDType).
type KVCacheDTypes interface {
	KVDTypes() []DType
}

// ExactKVByDefault is a KVCacheDTypes backend that keeps a cache nobody
// chose a dtype for in ActDType all the same, the others only when asked:
// the CPU, the reference every backend is checked against, whose default
// stays f32 (docs/architecture.md, "The KV cache").
type ExactKVByDefault interface {
	ExactKVByDefault() bool
}

// AutoKVDType is the dtype be keeps the KV cache of a model of dtype model
// in when none is asked for (kv_dtype auto): the model's where be reads a
// cache in it and does not keep its default exact, else ActDType.
func AutoKVDType(be Backend, model DType) DType {
	if k, ok := be.(KVCacheDTypes); ok && slices.Contains(k.KVDTypes(), model) {
		if x, ok := be.(ExactKVByDefault); !ok || !x.ExactKVByDefault() {
			return model
		}
	}
	return be.ActDType()
}

// ModelShape is what of a model a backend's kernels must take: its
// attention heads and, for a model with MoE layers, its experts. A kernel
// case of one op gives only what the op reads (zero heads: no attention).
type ModelShape struct {
	Heads, KVHeads, HeadDim int
	Experts, TopK           int // 0 and 0 without MoE layers
}

// ShapeChecker is a backend whose kernels take only some model shapes (a
// largest head, a largest top-k). The engine asks before it loads a weight,
// so a model the backend cannot run fails at once with the reason, not at
// its first step.
type ShapeChecker interface {
	CheckShape(s ModelShape) error
}

// PipelineLimits is a backend that says what each of its tunable kernels
// allows on this device: on Metal a pipeline's maxTotalThreadsPerThreadgroup,
// which the kernel's register use may put below the device's limit.
type PipelineLimits interface {
	PipelineLimits() []KernelLimit
}

// KernelLimit is one compiled kernel's limits.
type KernelLimit struct {
	Op, Kernel              string
	MaxThreads, SIMDWidth   int
	StaticThreadgroupMemory int // bytes the kernel declares itself
	Err                     error
}
