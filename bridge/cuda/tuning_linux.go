//go:build linux

package cuda

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/half"
	kcuda "github.com/mtlbench/mtlbench/kernels/cuda"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// The tunable kernels and the launch parameters each takes from a tuned
// config (kernels/ops/tuning.go declares their spaces):
//
//   - matmul (the GEMV of decode steps, m ≤ 8): rows per warp and split-K
//     warps;
//   - paged_attention_decode: positions per split-context partition;
//   - moe: rows per warp of the expert GEMVs, pairs per pass, rows per block
//     of the single-token down projection (the dispatch strategy and chunk
//     size come through MoEParams).
//
// The L2 weight prefetch is a backend-wide switch (Options.Prefetch), not a
// tuned parameter.
//
// A pick is called once per distinct launch shape; its answers are cached
// until the next SetLaunchConfig.

// launchKey is one launch a pick answered: its weights' dtype and shape.
type launchKey struct {
	dtype string
	shape [6]int
}

type launchTuning struct {
	picks map[string]bridge.LaunchPick
	cache map[string]map[launchKey]map[string]string
	gemv  map[[4]int]gemvConfig // gemvShape's answers: a decode step asks hundreds of times
}

// SetLaunchConfig implements bridge.LaunchTuner.
func (b *Backend) SetLaunchConfig(kernel string, pick bridge.LaunchPick) {
	t := &b.tuning
	if t.picks == nil {
		t.picks = map[string]bridge.LaunchPick{}
	}
	if pick == nil {
		delete(t.picks, kernel)
	} else {
		t.picks[kernel] = pick
	}
	t.cache, t.gemv = nil, nil
}

// tuned returns kernel's config for the launch shape (dims named by names,
// in order) of dtype weights ("" the model's: bridge.LaunchPick), or nil for
// the backend's own choice.
func (b *Backend) tuned(kernel, dtype string, names []string, vals ...int) map[string]string {
	t := &b.tuning
	pick := t.picks[kernel]
	if pick == nil {
		return nil
	}
	key := launchKey{dtype: dtype}
	copy(key.shape[:], vals)
	if c, ok := t.cache[kernel][key]; ok {
		return c
	}
	shape := make(map[string]int, len(names))
	for i, n := range names {
		shape[n] = vals[i]
	}
	c, ok := pick(dtype, shape)
	if !ok {
		c = nil
	}
	if t.cache == nil {
		t.cache = map[string]map[launchKey]map[string]string{}
	}
	if t.cache[kernel] == nil {
		t.cache[kernel] = map[launchKey]map[string]string{}
	}
	t.cache[kernel][key] = c
	return c
}

var (
	matmulDims    = dims(ops.M, ops.N, ops.K)
	attentionDims = dims(ops.Seqs, ops.Context, ops.NumHeads, ops.NumKVHeads, ops.HeadSize, ops.BlockSize)
	moeDims       = dims(ops.Tokens, ops.Experts, ops.TopK, ops.Hidden, ops.Intermediate)
)

// dims are a launch shape's dimension names, as the tuning spaces
// (kernels/ops) declare them.
func dims(ps ...ops.Param) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}

// configInt reads a numeric config value; ok false when absent or not a
// number (the caller keeps its default).
func configInt(c map[string]string, name string) (int, bool) {
	v, err := strconv.Atoi(c[name])
	return v, err == nil
}

// gemvConfig is one GEMV launch's parameters.
type gemvConfig struct {
	name        string
	M, rows, ks int // tokens per pass, rows per block, split-K warps
	flags       int // bit 0: prefetch the weight rows
}

// gemvShape picks the kernel for an m×n×k GEMV: M tokens per pass, R rows
// per warp, and ks warps splitting k. By default the grid covers every SM
// about twice: tall matrices get more rows per warp, short ones split k
// over up to 8 warps so about 4 blocks land on every SM (each warp then has
// few sequential loads, all in flight). A tuned config overrides both.
func (b *Backend) gemvShape(m, n, k int, dt bridge.DType) gemvConfig {
	key := [4]int{m, n, k, int(dt)}
	if c, ok := b.tuning.gemv[key]; ok {
		return c
	}
	c := b.pickGemv(m, n, k, dt)
	if b.tuning.gemv == nil {
		b.tuning.gemv = map[[4]int]gemvConfig{}
	}
	b.tuning.gemv[key] = c
	return c
}

func (b *Backend) pickGemv(m, n, k int, dt bridge.DType) gemvConfig {
	if k%8 != 0 {
		return gemvConfig{name: "gemv_" + dtName(dt) + "_scalar", M: 1, rows: 8, ks: 1}
	}
	M := 16
	for _, c := range gemvMs {
		if c >= m {
			M = c
			break
		}
	}
	rs := []int{1}
	if dt == bridge.BF16 {
		rs = gemvRs(M)
	}
	target := 2 * b.sms
	R, ks := 1, 1
	for _, r := range rs {
		if n >= target*8*r {
			R = r
		}
	}
	for R == 1 && ks < 8 && cdiv(n, 8/ks) < 4*b.sms {
		ks *= 2
	}
	if c := b.tuned(string(ops.MatMul), dt.String(), matmulDims, m, n, k); c != nil {
		if r, ok := configInt(c, ops.KnobRows); ok && slices.Contains(rs, r) {
			R = r
		}
		if s, ok := configInt(c, ops.KnobKSplit); ok && s >= 1 && s <= 8 && bits.OnesCount(uint(s)) == 1 {
			ks = s
		}
	}
	g := gemvConfig{name: fmt.Sprintf("gemv_%s_m%d_r%d", dtName(dt), M, R), M: M, rows: 8 / ks * R, ks: ks}
	if b.prefetch {
		g.flags |= 1
	}
	return g
}

// attentionConfig picks the launch of attention.cu's decode kernel, for the
// shapes paged_decode does not take, over the most keys a token reads
// (its context, or at most a sliding window: attnLaunch): positions per
// partition (32 by default: one per warp-iteration of a block) and warps
// per block (8, or a config's, looked up at those keys). The partition
// count is rounded up to a power of two so a decode step keeps its graph
// while sequences grow, and capped at one merging thread per partition.
func (b *Backend) attentionConfig(seqs, keys, heads, kvHeads, headDim, blockSize int) (kernel string, part, nparts int) {
	part, warps := 32, 8
	ctx := 1
	for ctx < keys {
		ctx *= 2
	}
	if c := b.tuned(string(ops.PagedAttentionDecode), "", attentionDims, seqs, ctx, heads, kvHeads, headDim, blockSize); c != nil {
		if p, ok := configInt(c, ops.KnobPart); ok && p >= 1 {
			part = p
		}
		if w, ok := configInt(c, "warps"); ok && (w == 4 || w == 8) {
			warps = w
		}
	}
	for nparts = 1; nparts*part < keys; nparts *= 2 {
	}
	for nparts > min(256, 32*warps) {
		part *= 2
		nparts /= 2
	}
	return fmt.Sprintf("paged_attention_w%d", warps), part, nparts
}

// decodeConfig picks paged_decode's split of the keys a token reads (its
// context, or at most a sliding window: attnLaunch): positions per
// partition (whole 32-position chunks) and the partition count, over the
// keys rounded up to a power of two (their bucket, so a step's graph
// changes only when the longest context crosses one). A tuned config for
// the bucket sets the positions; by default the partition count follows
// the keys: enough blocks to fill the GPU about four times over, but
// each block at least one chunk and at most four (a block reads its chunks
// one after the other), and at most decodeMaxParts partitions. (Fewer,
// longer partitions whose blocks load the next chunk while using one were
// slower on an H100 at 4k and 16k positions: docs/cuda.md.)
func (b *Backend) decodeConfig(cache bridge.DType, seqs, keys, heads, kvHeads, headDim, blockSize int) (chunks, nparts int) {
	ctx := ops.ContextBucket(keys, decodeChunk)
	if c := b.tuned(string(ops.PagedAttentionDecode), "", attentionDims, seqs, ctx, heads, kvHeads, headDim, blockSize); c != nil {
		if p, ok := configInt(c, ops.KnobPart); ok && p >= decodeChunk && p%decodeChunk == 0 {
			part := p
			for cdiv(ctx, part) > decodeMaxParts {
				part *= 2
			}
			return part / decodeChunk, cdiv(ctx, part)
		}
	}
	whole := 0
	if b.decodeMMAFits(cache, heads/kvHeads, headDim) {
		whole = b.decodeMMAWhole()
	}
	return decodeSplit(ctx, seqs*kvHeads, b.sms, whole)
}

// decodeRule is paged_decode's default split (ops.SplitRule). In the
// whole model the split with more, shorter partitions wins: at depth 4096
// on an H100 (bucket 8192, bf16 cache) 64 partitions of 4 chunks, 8%
// faster than 128 of 2 timed alone (mtlbench tune), made the decode step
// 0.4 ms slower (docs/cuda.md).
var decodeRule = ops.SplitRule{Chunk: decodeChunk, MinChunks: 1, MaxChunks: 4, MaxParts: decodeMaxParts, BlocksPerCore: 4}

// decodeSplit is decodeConfig's default for a context bucket ctx, groups
// (sequence, KV head) pairs and sms multiprocessors. A context of at most
// whole positions (the longest the step's kernel holds in one block,
// decodeMMAWhole; 0 for paged_decode) is one partition: the merge of a
// split costs a short context more than its blocks' parallelism saves
// (docs/cuda.md, "Short contexts in one block").
func decodeSplit(ctx, groups, sms, whole int) (chunks, nparts int) {
	r := decodeRule
	r.Whole = whole
	return r.Split(ctx, groups, sms)
}

// decode.cu's DEC_CHUNK and DEC_MAXPARTS.
const (
	decodeChunk    = 32
	decodeMaxParts = 256
)

// decodeMergeGroup is the partitions paged_decode merges in one block: with
// more, the last block of each group of this many merges it, and the last
// of those merges the groups (two levels), so no block reads more than 16
// partitions' sums from L2 (docs/cuda.md).
var decodeMergeGroup = 16

// moeConfig is one MoE call's launch parameters.
type moeConfig struct {
	rows     int    // rows per warp of the expert GEMVs
	pass     string // pairs per pass: "" picks by pairs per slot
	dsRows   int    // single-token down projection: rows per block
	prefetch bool
}

func (b *Backend) moeConfig(T, E, K, H, I int, dt bridge.DType) moeConfig {
	mc := moeConfig{rows: 1, dsRows: 4, prefetch: b.prefetch}
	c := b.tuned(string(ops.MoE), "", moeDims, T, E, K, H, I)
	if c == nil {
		return mc
	}
	bf16 := dt == bridge.BF16 // the other dtypes have only the default kernels
	if r, ok := configInt(c, ops.KnobRows); ok && (r == 1 || (r == 2 && bf16)) {
		mc.rows = r
	}
	if d, ok := configInt(c, ops.KnobDSRows); ok && (d == 4 || (bf16 && (d == 2 || d == 8))) {
		mc.dsRows = d
	}
	if p := c[ops.KnobPass]; p == "1" || p == "2" || p == "4" || p == "8" {
		mc.pass = p
	}
	return mc
}

// KernelSourceHash implements runner/tune's SourceHasher: the kernels'
// shared header and the files that hold kernel, so a tuned config is
// dropped when either changes.
func (b *Backend) KernelSourceHash(kernel string) string {
	return kernelSourceHash(kernel)
}

func kernelSourceHash(kernel string) string {
	files := map[ops.ID][]string{ops.MatMul: {"gemv.cu"}, ops.PagedAttentionDecode: {"attention.cu", "decode.cu"},
		ops.MoE: {"moe.cu"}}[ops.ID(kernel)]
	if files == nil {
		return ""
	}
	h := sha256.New()
	for _, f := range append([]string{"common.cu"}, files...) {
		data, err := kcuda.Sources.ReadFile(f)
		if err != nil {
			return ""
		}
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// MeasureBandwidth implements bridge.BandwidthProber: the best of several
// passes of a streaming read kernel over a buffer many times the L2, timed
// with events.
func (b *Backend) MeasureBandwidth() (float64, error) {
	var best float64
	err := b.th.do(func() error {
		a := b.api
		free, err := b.freeMemory()
		if err != nil {
			return err
		}
		size := min(int64(1)<<30, int64(free)/4) &^ 4095
		if size < 64<<20 {
			return fmt.Errorf("cuda: bandwidth probe: only %s free", human(int64(free)))
		}
		buf, err := b.devAlloc(size)
		if err != nil {
			return err
		}
		defer b.freeNow(buf)
		out, err := b.devAlloc(int64(b.sms) * 8 * 4)
		if err != nil {
			return err
		}
		defer b.freeNow(out)
		if err := b.check("cuMemsetD8", call(a.cuMemsetD8, uintptr(buf.ptr), 1, uintptr(size))); err != nil {
			return err
		}
		if err := b.ensureEvents(2); err != nil {
			return err
		}
		fn := b.fns["read_bw"]
		n := size / 16
		args := []uint64{buf.ptr, uint64(n), out.ptr}
		params := []uintptr{uintptr(unsafe.Pointer(&args[0])), uintptr(unsafe.Pointer(&args[1])), uintptr(unsafe.Pointer(&args[2]))}
		for rep := 0; rep < 8; rep++ {
			if err := b.check("cuEventRecord", call(a.cuEventRecord, b.events[0], b.stream)); err != nil {
				return err
			}
			if r := call(a.cuLaunchKernel, fn, uintptr(b.sms*8), 1, 1, 256, 1, 1, 0, b.stream,
				uintptr(unsafe.Pointer(&params[0])), 0); r != 0 {
				return b.check("cuLaunchKernel read_bw", r)
			}
			if err := b.check("cuEventRecord", call(a.cuEventRecord, b.events[1], b.stream)); err != nil {
				return err
			}
			if err := b.check("bandwidth probe", call(a.cuStreamSynchronize, b.stream)); err != nil {
				return err
			}
			var ms float32
			if err := b.check("cuEventElapsedTime", call(a.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), b.events[0], b.events[1])); err != nil {
				return err
			}
			if rep >= 2 && ms > 0 { // two warm-up passes
				best = max(best, float64(size)/(float64(ms)/1e3))
			}
		}
		return nil
	})
	return best, err
}

// MeasureMatmulPeak implements bridge.MatmulPeakProber: the best of several
// cuBLAS GEMMs of 8192³, the operands random (uniform in ±1; zeros or
// constants run faster than real data), timed with events. Half dtypes run as the prefill's
// GEMMs do: half operands on tensor cores, f32 accumulation and output.
func (b *Backend) MeasureMatmulPeak(dt bridge.DType) (float64, error) {
	if b.cublas == 0 {
		return 0, fmt.Errorf("cuda: matmul peak probe: no cuBLAS")
	}
	const n = 8192
	atype, esize := uint64(cudaR32F), int64(4)
	switch dt {
	case bridge.BF16:
		atype, esize = cudaR16BF, 2
	case bridge.F16:
		atype, esize = cudaR16F, 2
	}
	// 16 MiB of random elements, copied over each operand.
	const chunk = 16 << 20
	host := make([]byte, chunk)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < chunk; i += int(esize) {
		v := float32(r.Float64()*2 - 1)
		switch dt {
		case bridge.BF16:
			binary.LittleEndian.PutUint16(host[i:], half.BF16(v))
		case bridge.F16:
			binary.LittleEndian.PutUint16(host[i:], half.F16(v))
		default:
			binary.LittleEndian.PutUint32(host[i:], math.Float32bits(v))
		}
	}
	var best float64
	err := b.th.do(func() error {
		a := b.api
		var bufs [3]*devAlloc
		for i, size := range []int64{n * n * esize, n * n * esize, n * n * 4} {
			d, err := b.devAlloc(size)
			if err != nil {
				return err
			}
			defer b.freeNow(d)
			bufs[i] = d
			for off := int64(0); i < 2 && off < size; off += chunk {
				if err := b.check("cuMemcpyHtoD", call(a.cuMemcpyHtoD, uintptr(d.ptr+uint64(off)), uintptr(unsafe.Pointer(&host[0])),
					uintptr(min(chunk, size-off)))); err != nil {
					return err
				}
			}
		}
		if err := b.ensureEvents(2); err != nil {
			return err
		}
		g := []uint64{cublasOpT, cublasOpN, n, n, n, bufs[0].ptr, atype, n, bufs[1].ptr, atype, n, bufs[2].ptr, cudaR32F, n, 0}
		for rep := 0; rep < 6; rep++ {
			if err := b.check("cuEventRecord", call(a.cuEventRecord, b.events[0], b.stream)); err != nil {
				return err
			}
			if err := b.runGemm(g); err != nil {
				return err
			}
			if err := b.check("cuEventRecord", call(a.cuEventRecord, b.events[1], b.stream)); err != nil {
				return err
			}
			if err := b.check("matmul probe", call(a.cuStreamSynchronize, b.stream)); err != nil {
				return err
			}
			var ms float32
			if err := b.check("cuEventElapsedTime", call(a.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), b.events[0], b.events[1])); err != nil {
				return err
			}
			if rep >= 2 && ms > 0 { // two warm-ups: cuBLAS picks and loads its kernel
				best = max(best, 2*float64(n)*n*n/(float64(ms)/1e3))
			}
		}
		return nil
	})
	return best, err
}

var _ bridge.MatmulPeakProber = (*Backend)(nil)
var _ bridge.LaunchTuner = (*Backend)(nil)
var _ bridge.BandwidthProber = (*Backend)(nil)
