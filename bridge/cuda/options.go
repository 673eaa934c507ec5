package cuda

import (
	"os"
	"path/filepath"
)

// Options configure the backend; zero values pick the defaults. The
// backend reads no environment: the mtlbench command maps the
// MTLBENCH_CUDA_* variables (`mtlbench env`) onto these fields.
type Options struct {
	// Device is the GPU ordinal (MTLBENCH_CUDA_DEVICE).
	Device int
	// Libs are folders searched first for the driver, NVRTC and cuBLAS
	// (MTLBENCH_CUDA_LIBS).
	Libs []string
	// NoGraphs replays no CUDA graphs (MTLBENCH_CUDA_GRAPHS=0).
	NoGraphs bool
	// NoCuBLAS runs every matmul on the backend's own kernels
	// (MTLBENCH_CUDA_CUBLAS=0).
	NoCuBLAS bool
	// NoPDL launches kernels without programmatic dependent launch
	// (MTLBENCH_CUDA_PDL=0).
	NoPDL bool
	// CacheDir holds compiled kernels (MTLBENCH_CUDA_CACHE; default the
	// user cache directory's mtlbench/cuda).
	CacheDir string
	// Prefetch has the GEMVs and the single-token MoE down projection
	// prefetch their weight rows into L2 before waiting on the previous
	// kernel (MTLBENCH_CUDA_PREFETCH=1). Off by default: on an H100 it cost
	// 5-8% of batch-1 decode, competing for bandwidth with that kernel.
	Prefetch bool
	// NoPDLEarly compiles the short kernels (norms, RoPE, attention) to
	// wait on the previous kernel before letting the next one in, as the
	// others do (MTLBENCH_CUDA_PDL_EARLY=0). Letting it in first was 1-4%
	// faster at batch-1 decode on an H100 and an H200.
	NoPDLEarly bool
	// NoDecodeMMA runs decode attention over a half cache on CUDA cores
	// (paged_decode) instead of tensor cores (paged_decode_mma)
	// (MTLBENCH_CUDA_DECODE_MMA=0).
	NoDecodeMMA bool
	// NoFuse keeps RoPE and decode attention, the single-token MoE router
	// and routing, and a single-token GEMV and the RMSNorm before it (and
	// the residual add after it) as separate launches (MTLBENCH_CUDA_FUSE=0).
	NoFuse bool
	// ExactPrefill keeps steps of many tokens at f32 accuracy on models with
	// half-precision weights (MTLBENCH_CUDA_EXACT_PREFILL=1): each matmul
	// as two half GEMMs (hi and lo parts of the activations), attention and
	// the MoE experts on the f32 kernels. By default such steps run on
	// tensor cores with activations rounded to bf16, as bf16 engines do
	// (docs/cuda.md, "Prefill").
	ExactPrefill bool
	// NoPackedMMA runs the packed matmuls and experts of steps of many
	// tokens on the f32-activation GEMVs instead of tensor cores
	// (MTLBENCH_CUDA_PACKED_MMA=0). By default they are GEMMs whose weight
	// tiles are dequantized to bf16 as they are staged, activations rounded
	// to bf16 (kernels/cuda/quant_mma.cu, docs/quantization.md).
	NoPackedMMA bool
	// GemvMMA runs the matmuls of 9 to 16 tokens over half weights (the
	// batched decode steps) on gemv_mma.cu's tensor-core kernels instead of
	// cuBLAS (MTLBENCH_CUDA_GEMV_MMA=1). Off by default: on an H200 they
	// were slower (docs/cuda.md, "Where batch-16 bf16 decode time goes").
	GemvMMA bool
	// Notice receives one line before kernels compile: a first run on a
	// GPU compiles for a minute or more (docs/cuda.md); nil: not told.
	Notice func(string)
	// NoStepKernels moves a step's metadata, token ids and results with
	// copies and a memset around its graph, instead of the step_begin and
	// step_end kernels inside it (MTLBENCH_CUDA_STEP_KERNELS=0).
	NoStepKernels bool
	// NoStream runs a step only once it is wholly recorded, instead of
	// starting its first kernels while the rest is recorded
	// (MTLBENCH_CUDA_STREAM=0).
	NoStream bool
	// Chains joins runs of single-token affine GEMVs into one persistent
	// launch each (qachain, MTLBENCH_CUDA_CHAINS=1). Off by default: on an
	// H200 TinyLlama's 4-bit decode was slower (docs/cuda.md, "Persistent
	// GEMV chains").
	Chains bool
	// Timeline compiles the kernels to note when each launch was let go by
	// the one before it, so TimelineStart and Timeline give what each
	// kernel costs in place, graphs and overlapped launches as they run
	// (MTLBENCH_CUDA_TIMELINE=1; docs/cuda.md, "The in-place timeline").
	Timeline bool
	// ProfileDetail splits profiled ops into their kernels: moe into
	// moe:router, moe:route, moe:gate_up, moe:down, and attention
	// (MTLBENCH_CUDA_PROFILE_DETAIL=1).
	ProfileDetail bool
}

// DefaultCacheDir is where compiled kernels are kept when Options.CacheDir
// is empty: the user cache directory's mtlbench/cuda.
func DefaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "mtlbench", "cuda")
	}
	return filepath.Join(os.TempDir(), "mtlbench-cuda")
}
