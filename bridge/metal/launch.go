package metal

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// Tuned launch configs (bridge.LaunchTuner). Each dispatch site asks its
// kernel's pick at its launch shape, in the dimensions kernels/ops declares
// for the kernel's Metal space, and overlays the answer on the backend's
// Tuning for that dispatch only (docs/tuning.md lists the knobs). Answers
// are cached per shape until the next SetLaunchConfig or SetTuning.

type launchKey struct {
	kernel ops.ID
	dtype  string
	shape  [6]int
}

// launchAnswer is one shape's tuning: nil keeps the backend's own; err is
// a config the kernels cannot run, which fails every step that asks.
type launchAnswer struct {
	tu  *Tuning
	cfg string
	err error
}

type launchState struct {
	picks map[ops.ID]bridge.LaunchPick
	cache map[launchKey]launchAnswer
}

// The launch shapes' dimensions, in the order dispatch sites pass them.
var (
	matmulDims  = []ops.Param{ops.M, ops.N, ops.K}
	decodeDims  = []ops.Param{ops.Seqs, ops.Context, ops.NumHeads, ops.NumKVHeads, ops.HeadSize, ops.BlockSize}
	prefillDims = []ops.Param{ops.Seqs, ops.Tokens, ops.NumHeads, ops.NumKVHeads, ops.HeadSize, ops.BlockSize}
	rowDims     = []ops.Param{ops.Tokens, ops.Width} // norms and argmax: rows of a width
	moeDims     = []ops.Param{ops.Tokens, ops.Experts, ops.TopK, ops.Hidden, ops.Intermediate}
)

// SetLaunchConfig implements bridge.LaunchTuner. kernel is an op's name
// (matmul, moe, paged_attention_decode, paged_attention_prefill, rms_norm,
// add_rms_norm, layer_norm, add_layer_norm, argmax).
func (b *Backend) SetLaunchConfig(kernel string, pick bridge.LaunchPick) {
	l := &b.launch
	if l.picks == nil {
		l.picks = map[ops.ID]bridge.LaunchPick{}
	}
	if pick == nil {
		delete(l.picks, ops.ID(kernel))
	} else {
		l.picks[ops.ID(kernel)] = pick
	}
	l.cache = nil
}

// tuned is the tuning of one dispatch of kernel at a launch shape (vals in
// dims order) for weights of dtype ("" the model's: bridge.LaunchPick): the
// backend's own, or a copy with the kernel's picked config overlaid. A
// config the kernels cannot run fails the step.
func (b *Backend) tuned(kernel ops.ID, dtype string, dims []ops.Param, vals ...int) *Tuning {
	l := &b.launch
	pick := l.picks[kernel]
	if pick == nil {
		return &b.tuning
	}
	k := launchKey{kernel: kernel, dtype: dtype}
	copy(k.shape[:], vals)
	a, ok := l.cache[k]
	if !ok {
		shape := make(map[string]int, len(dims))
		for i, d := range dims {
			shape[string(d)] = vals[i]
		}
		if c, ok := pick(dtype, shape); ok && len(c) > 0 {
			a.cfg = ops.Config(c).Key()
			t, err := overlay(b.tuning, kernel, c)
			if err != nil {
				a.err = fmt.Errorf("%s config {%s} refused: %w", kernel, a.cfg, err)
			} else {
				a.tu = &t
			}
		}
		if l.cache == nil {
			l.cache = map[launchKey]launchAnswer{}
		}
		l.cache[k] = a
	}
	if a.err != nil {
		b.fail("%v", a.err)
	}
	if a.tu == nil {
		return &b.tuning
	}
	return a.tu
}

// overlay returns t with kernel's config c applied, checked as SetTuning
// checks a tuning; the dispatch strategy and chunk of moe come through
// MoEParams instead.
func overlay(t Tuning, kernel ops.ID, c map[string]string) (Tuning, error) {
	var err error
	num := func(name string, dst *int) {
		v, ok := c[name]
		if !ok || err != nil {
			return
		}
		n, e := strconv.Atoi(v)
		if e != nil {
			err = fmt.Errorf("%s=%q is not a number", name, v)
			return
		}
		*dst = n
	}
	tile := func(dst *Tile) {
		num(ops.KnobBM, &dst.BM)
		num(ops.KnobBN, &dst.BN)
		num(ops.KnobBK, &dst.BK)
		num(ops.KnobSGM, &dst.SGM)
		num(ops.KnobSGN, &dst.SGN)
	}
	// word reads a knob that is a number or one named value (never, single).
	word := func(name, special string, as int, dst *int) {
		if c[name] == special {
			*dst = as
			return
		}
		num(name, dst)
	}
	var known []string
	switch kernel {
	case ops.MatMul:
		known = []string{ops.KnobMVMax, ops.KnobRows, ops.KnobSimdgroups, ops.KnobBM, ops.KnobBN, ops.KnobBK, ops.KnobSGM, ops.KnobSGN}
		num(ops.KnobMVMax, &t.MatVecMaxM) // 0: never the matvec
		num(ops.KnobRows, &t.MatVecRows)
		num(ops.KnobSimdgroups, &t.MatVecSimdgroups)
		tile(&t.MatMulTile)
		if err == nil && (t.MatVecMaxM < 0 || t.MatVecMaxM > 8) {
			err = fmt.Errorf("%s=%d: 0 to 8", ops.KnobMVMax, t.MatVecMaxM)
		}
	case ops.QMatMul:
		known = []string{ops.KnobRows, ops.KnobSimdgroups, ops.KnobBM, ops.KnobBN, ops.KnobBK, ops.KnobSGM, ops.KnobSGN}
		num(ops.KnobRows, &t.QMatVecRows)
		num(ops.KnobSimdgroups, &t.QMatVecSimdgroups)
		tile(&t.QMatMulTile)
	case ops.QMoE:
		known = []string{ops.KnobMVMax, ops.KnobRows, ops.KnobSimdgroups, ops.KnobBM, ops.KnobBN, ops.KnobBK, ops.KnobSGM, ops.KnobSGN}
		word(ops.KnobMVMax, "0", -1, &t.MoEMatVecMaxRows)
		num(ops.KnobRows, &t.QMoEMatVecRows)
		num(ops.KnobSimdgroups, &t.QMoESimdgroups)
		tile(&t.QMoETile)
	case ops.PagedAttentionDecode:
		known = []string{ops.KnobSimdgroups, ops.KnobHeads, ops.KnobPart}
		num(ops.KnobSimdgroups, &t.AttnSimdgroups)
		num(ops.KnobHeads, &t.AttnHeadsPerGroup)
		word(ops.KnobPart, "single", -1, &t.AttnPartitionSize)
		t.AttnPartitions = 0
		if err == nil && t.AttnPartitionSize == 0 {
			err = fmt.Errorf("%s=0", ops.KnobPart)
		}
	case ops.PagedAttentionPrefill:
		known = []string{ops.KnobHeads, ops.KnobKeys, ops.KnobQueries, ops.KnobMinQuery}
		num(ops.KnobHeads, &t.AttnPrefillHeads)
		num(ops.KnobKeys, &t.AttnPrefillKeys)
		num(ops.KnobQueries, &t.AttnPrefillQueries)
		word(ops.KnobMinQuery, "never", -1, &t.AttnPrefillMinQuery)
		if err == nil && t.AttnPrefillMinQuery == 0 {
			err = fmt.Errorf("%s=0", ops.KnobMinQuery)
		}
	case ops.RMSNorm, ops.AddRMSNorm, ops.LayerNorm, ops.AddLayerNorm:
		known = []string{ops.KnobThreads}
		num(ops.KnobThreads, &t.NormThreads)
		if err == nil && t.NormThreads%32 != 0 {
			err = fmt.Errorf("%s=%d: whole simdgroups", ops.KnobThreads, t.NormThreads)
		}
	case ops.Argmax:
		known = []string{ops.KnobThreads, ops.KnobPart}
		num(ops.KnobThreads, &t.ArgmaxThreads)
		word(ops.KnobPart, "single", -1, &t.ArgmaxPart)
		if err == nil && t.ArgmaxThreads%32 != 0 {
			err = fmt.Errorf("%s=%d: whole simdgroups", ops.KnobThreads, t.ArgmaxThreads)
		}
		if err == nil && (t.ArgmaxPart == 0 || t.ArgmaxPart > 0 && t.ArgmaxPart%4 != 0) {
			err = fmt.Errorf("%s=%d: a multiple of 4 values, or single", ops.KnobPart, t.ArgmaxPart)
		}
	case ops.MoE:
		known = []string{ops.KnobStrategy, ops.KnobChunk, ops.KnobMVMax, ops.KnobRows, ops.KnobSimdgroups,
			ops.KnobBM, ops.KnobBN, ops.KnobBK, ops.KnobSGM, ops.KnobSGN}
		word(ops.KnobMVMax, "0", -1, &t.MoEMatVecMaxRows)
		num(ops.KnobRows, &t.MoEMatVecRows)
		num(ops.KnobSimdgroups, &t.MoESimdgroups)
		tile(&t.MoETile)
	default:
		return t, fmt.Errorf("no tunable Metal kernel %q", kernel)
	}
	for name := range c {
		if !containsString(known, name) {
			return t, fmt.Errorf("unknown knob %q", name)
		}
	}
	if err != nil {
		return t, err
	}
	return t, t.Check()
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// fits fails the step when a dispatch asks for more threads per
// threadgroup than its pipeline runs (maxTotalThreadsPerThreadgroup, which
// a variant's register use may put below the device's 1024).
func (b *Backend) fits(p mtl.Pipeline, tpg [3]int) bool {
	if p == nil {
		return false
	}
	if n := tpg[0] * tpg[1] * tpg[2]; n > p.MaxTotalThreadsPerThreadgroup() {
		b.fail("kernel %s: %d threads per threadgroup exceed the pipeline's %d", p.Name(), n, p.MaxTotalThreadsPerThreadgroup())
		return false
	}
	return true
}

// simdgroupsFor is n simdgroups, halved until they fit p's
// maxTotalThreadsPerThreadgroup: a pipeline whose registers allow fewer
// threads than the device's limit still runs, with fewer simdgroups, where
// a kernel takes any number (the tiles of a matmul do not: fits refuses
// them).
func simdgroupsFor(p mtl.Pipeline, n int) int {
	if p == nil {
		return n
	}
	for n > 1 && 32*n > p.MaxTotalThreadsPerThreadgroup() {
		n /= 2
	}
	return n
}

// threadsFor is n threads a threadgroup, or the most whole simdgroups p
// takes when a kernel's register use puts its limit below n (kernels sized
// in threads stride over their work, so any whole simdgroups will do).
func threadsFor(p mtl.Pipeline, n int) int {
	if p == nil || n <= p.MaxTotalThreadsPerThreadgroup() {
		return n
	}
	return max(32, p.MaxTotalThreadsPerThreadgroup()/32*32)
}

// Limits are the device's, as the tuning spaces' constraints read them.
func (b *Backend) Limits() ops.Limits {
	return ops.Limits{MaxThreads: b.dev.MaxThreadsPerThreadgroup(), ThreadgroupMemory: b.dev.MaxThreadgroupMemoryLength(), SIMDWidth: 32}
}

// kernelPipelines are the pipelines (default variants, bf16 weights) of a
// tunable kernel, whose limits bound its space.
var kernelPipelines = map[ops.ID][]struct {
	name  string
	specs []fcSpec
	vals  []int32
}{
	ops.MatMul:                {{"matvec_bf16", fcMatVec, []int32{0, 4, 1}}, {"matmul_bf16", fcMatMul, []int32{0, 64, 64, 32, 2, 2, 2}}},
	ops.PagedAttentionDecode:  {{"paged_attention_d128_q8_bf16", fcAttn, []int32{0, 1, 0, 0, 0}}, {"paged_attention_d128_q1_bf16", fcAttn, []int32{1, 1, 0, 0, 0}}},
	ops.PagedAttentionPrefill: {{"paged_attention_prefill_d128_bf16", fcPrefill, []int32{16, 2, 2}}},
	ops.QMatMul:               {{"qmatmul_mm_affine4", fcQMatMul, []int32{0, 64, 128, 32, 2, 4, 1, 2}}},
	ops.QMoE: {{"qmoe_mm_gate_up_affine4", fcQMoEMM, []int32{32, 64, 32, 2, 2, 1, 2}},
		{"qmoe_mm_down_affine4", fcQMoEDown, []int32{32, 64, 32, 2, 2, 1, 0, 2}}},
	ops.RMSNorm:    {{"rms_norm", fcNorm, []int32{1}}},
	ops.Argmax:     {{"argmax", fcNone, nil}, {"argmax_part", fcNone, nil}},
	ops.AddRMSNorm: {{"add_rms_norm", fcNorm, []int32{1}}},
	ops.MoE: {{"moe_mv_gate_up_bf16", fcMoEMVGateUp, []int32{2, 8, 0}}, {"moe_mv_down_bf16", fcMoEMV, []int32{2, 8}},
		{"moe_mm_gate_up_bf16", fcMoEMM, []int32{32, 64, 32, 2, 2, 2}}, {"moe_mm_down_bf16", fcMoEDown, []int32{32, 64, 32, 2, 2, 2, 0}}},
}

// KernelLimits are the device's limits narrowed to what kernel's pipelines
// allow: their maxTotalThreadsPerThreadgroup and SIMD width.
func (b *Backend) KernelLimits(kernel string) ops.Limits {
	lim := b.Limits()
	for _, k := range kernelPipelines[ops.ID(kernel)] {
		p, err := b.buildPipeline(k.name, k.specs, k.vals...)
		if err != nil {
			continue // the first dispatch reports it
		}
		lim.MaxThreads = min(lim.MaxThreads, p.MaxTotalThreadsPerThreadgroup())
		if w := p.ThreadExecutionWidth(); w > 0 {
			lim.SIMDWidth = w
		}
	}
	return lim
}

// PipelineLimits builds the default variants of every tunable kernel and
// reports their limits (mtlbench devices --pipelines).
func (b *Backend) PipelineLimits() []bridge.KernelLimit {
	var ids []string
	for id := range kernelPipelines {
		ids = append(ids, string(id))
	}
	slices.Sort(ids)
	var out []bridge.KernelLimit
	for _, id := range ids {
		for _, k := range kernelPipelines[ops.ID(id)] {
			l := bridge.KernelLimit{Op: id, Kernel: k.name}
			p, err := b.buildPipeline(k.name, k.specs, k.vals...)
			if err != nil {
				l.Err = err
			} else {
				l.MaxThreads, l.SIMDWidth, l.StaticThreadgroupMemory = p.MaxTotalThreadsPerThreadgroup(), p.ThreadExecutionWidth(), p.StaticThreadgroupMemoryLength()
			}
			out = append(out, l)
		}
	}
	return out
}

// TuneDevice names the device for tuned configs: the GPU's name and, on a
// Mac, its Apple GPU family (configs tuned on one family say nothing of
// another's).
func (b *Backend) TuneDevice() string {
	if f, ok := b.dev.(interface{ AppleFamily() int }); ok && f.AppleFamily() > 0 {
		return fmt.Sprintf("%s (apple%d)", b.dev.Name(), f.AppleFamily())
	}
	return b.dev.Name()
}

var _ bridge.LaunchTuner = (*Backend)(nil)

// matmulTuning is the tuning of a matmul (or fused matvec) of m rows of k
// by n outputs of dt weights: a tile tuned for bf16 is not one an f32
// router of the same shape takes (its staging is twice as wide).
func (b *Backend) matmulTuning(dt bridge.DType, m, n, k int) *Tuning {
	return b.tuned(ops.MatMul, dt.String(), matmulDims, m, n, k)
}

// qmatvecMaxM is the most rows packed weights take on the GEMVs rather than
// qmatmul_mm's tiles: the matmul's knob at the model's own dtype.
func (b *Backend) qmatvecMaxM(m, n, k int) int {
	return b.tuned(ops.MatMul, "", matmulDims, m, n, k).MatVecMaxM
}
