package metal_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/kbench"
	"github.com/mtlbench/mtlbench/runner/selftest"
	"github.com/mtlbench/mtlbench/suites"
)

// newEmu returns the backend on the emulator, or skips when no clang 16+
// is installed (the emulator says which it looked for).
func newEmu(t testing.TB, tu metal.Tuning) *metal.Backend {
	t.Helper()
	return newEmuWith(t, metal.Options{Tuning: tu})
}

func newEmuWith(t testing.TB, o metal.Options) *metal.Backend {
	t.Helper()
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	be, err := metal.New(emu.New(emu.Options{}), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

func TestSelftest(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	rs, err := selftest.Run(be, nil)
	if err != nil {
		t.Fatal(err)
	}
	worst := map[string]float64{}
	var ops []string
	for _, r := range rs {
		if !r.Passed() {
			t.Errorf("%s %s: %v", r.Case, r.Shape, r.Err)
		}
		op, _, _ := strings.Cut(r.Case, "/")
		if _, ok := worst[op]; !ok {
			ops = append(ops, op)
		}
		worst[op] = max(worst[op], r.MaxErr)
	}
	var b strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&b, " %s %.2g", op, worst[op])
	}
	t.Logf("%d checks; max abs error by op:%s", len(rs), b.String())
}

// TestSelftestLanesReversed runs the selftest's checks with each
// simdgroup's lanes run last to first between sync points: a kernel that
// relied on its lanes in lockstep passes in one order only
// (docs/msl-subset.md, "Lanes in lockstep").
func TestSelftestLanesReversed(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	be, err := metal.New(emu.New(emu.Options{ReverseLanes: true}), metal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	rs, err := selftest.Run(be, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if !r.Passed() {
			t.Errorf("%s %s: %v", r.Case, r.Shape, r.Err)
		}
	}
	t.Logf("%d checks pass with the lanes last to first", len(rs))
}

// TestSelftestVariants runs the checks of the kernels a tuning changes
// under other launch shapes and variants: split-K attention with its
// reduce (by size and by count), the two-phase KV write, narrow GQA
// groups, other GEMM tiles, simdgroup_matrix expert GEMMs for every token
// count, and small threadgroups everywhere.
func TestSelftestVariants(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	cases, err := selftest.Cases()
	if err != nil {
		t.Fatal(err)
	}
	type variant struct {
		name string
		tu   metal.Tuning
		ops  []string
		lang string
	}
	variants := []variant{
		// MSL 3.0 has no bfloat: bf16 weights and KV caches go through the
		// header's bits-and-shift fallback, whose conversions are declared
		// for each address space (the emulator checks `this`).
		{"msl-3.0", metal.Tuning{}, []string{"matmul", "moe", "embedding", "decode-attention-kv", "prefill-attention"}, "3.0"},
		{"split-k/two-phase", metal.Tuning{AttnPartitionSize: 32, AttnTwoPhase: true, AttnSimdgroups: 2, AttnHeadsPerGroup: 2, AttnPrefillMinQuery: -1},
			[]string{"decode-attention", "prefill-attention"}, ""},
		{"partitions=3", metal.Tuning{AttnPartitions: 3, AttnHeadsPerGroup: 1, AttnSimdgroups: 8}, []string{"decode-attention", "prefill-attention"}, ""},
		{"simdgroup-matrix", metal.Tuning{MatVecMaxM: 1, MoEMatVecMaxRows: -1,
			MatMulTile: metal.Tile{BM: 16, BN: 64, BK: 8, SGM: 2, SGN: 2}, MoETile: metal.Tile{BM: 16, BN: 16, BK: 32, SGM: 2, SGN: 1}},
			[]string{"matmul", "moe", "qmatmul", "qmoe"}, ""},
		{"small-groups", metal.Tuning{NormThreads: 32, EltThreads: 64, RoPEHeads: 1, ArgmaxThreads: 64, MatVecRows: 1, MatVecSimdgroups: 1,
			MoEMatVecRows: 3, MoESimdgroups: 2, MoEGroupThreads: 32, MoEMatVecMaxRows: 40},
			[]string{"rms-norm", "add-rms-norm", "rope", "silu-mul", "argmax", "embedding", "matmul", "moe"}, ""},
	}
	// The tiled prefill kernel at every head size and block size, with a
	// chunk starting mid-block.
	extra, err := suites.Parse("prefill.yaml", []byte(`name: prefill
cases:
  - name: prefill-tiled
    op: paged_attention_prefill
    params: { seqs: 2, num_heads: 4, num_kv_heads: 2, tokens: 13, context: 21 }
    matrix: { head_size: [32, 96, 128], block_size: [8, 32] }
`))
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, extra.Cases...)
	variants = append(variants, variant{"prefill-tiled", metal.Tuning{AttnPrefillHeads: 2, AttnPrefillKeys: 32}, []string{"prefill-tiled", "prefill-attention"}, ""})
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			be := newEmuWith(t, metal.Options{Tuning: v.tu, LanguageVersion: v.lang})
			worst, n := 0.0, 0
			for _, c := range cases {
				if !slices.ContainsFunc(v.ops, func(op string) bool { return strings.HasPrefix(c.Name, op+"/") }) {
					continue
				}
				b, err := kbench.Prepare(be, c.Kernel)
				if err != nil {
					t.Fatal(err)
				}
				e, err := b.Check()
				b.Close()
				if err != nil {
					t.Errorf("%s: %v", c.Name, err)
				}
				worst, n = max(worst, e), n+1
			}
			t.Logf("%s: %d checks, max error %.2g", be.Tuning(), n, worst)
		})
	}
}

// A pipeline whose registers leave it fewer threads than the device's 1024
// (as Apple's compiler may give a heavy kernel) still runs every kernel
// that takes any number of simdgroups, with fewer of them (the norms and
// argmax tuned to 1024 threads included); the tuner sees
// the pipeline's limit; a matmul tile larger than the limit fails the step
// with the reason instead of not running.
func TestPipelineThreadLimits(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	limited := func(k string) int {
		for _, p := range []string{"paged_attention", "matvec_", "moe_mv_"} {
			if strings.HasPrefix(k, p) {
				return 64
			}
		}
		// The row reductions, tuned to the device's 1024 threads, at three
		// simdgroups: no power of two.
		for _, p := range []string{"rms_norm", "add_rms_norm", "layer_norm", "add_layer_norm", "argmax"} {
			if strings.HasPrefix(k, p) {
				return 96
			}
		}
		return 0
	}
	be, err := metal.New(emu.New(emu.Options{PipelineThreads: limited}), metal.Options{Tuning: metal.Tuning{
		AttnSimdgroups: 8, AttnPrefillHeads: 8, MatVecSimdgroups: 8, MoESimdgroups: 8, MatVecMaxM: 8,
		NormThreads: 1024, ArgmaxThreads: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if lim := be.KernelLimits(string(ops.PagedAttentionDecode)); lim.MaxThreads != 64 {
		t.Errorf("attention's limits: %d threads, want the pipeline's 64", lim.MaxThreads)
	}
	for _, l := range be.PipelineLimits() { // mtlbench devices --pipelines
		want := 1024
		switch {
		case limited(l.Kernel) > 0:
			want = limited(l.Kernel)
		case strings.HasPrefix(l.Kernel, "matmul_") || strings.HasPrefix(l.Kernel, "moe_mm_") || strings.HasPrefix(l.Kernel, "qmatmul_mm_") ||
			strings.HasPrefix(l.Kernel, "qmoe_mm_"):
			want = 512 // [[max_total_threads_per_threadgroup(MM_MAX_THREADS)]]
		}
		if l.Err != nil || l.MaxThreads != want || l.SIMDWidth != 32 {
			t.Errorf("%s %s: %d threads, simd width %d, %v; want %d, 32", l.Op, l.Kernel, l.MaxThreads, l.SIMDWidth, l.Err, want)
		}
	}
	cases, err := selftest.Cases()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cases {
		matvec := strings.HasPrefix(c.Name, "matmul/") && c.Kernel.DType == ops.BF16 && c.Kernel.Ints[ops.M] <= 8
		if !matvec && !slices.ContainsFunc([]string{"decode-attention-kv", "prefill-attention", "moe", "rms-norm", "add-rms-norm", "layer-norm", "add-layer-norm", "argmax"},
			func(op string) bool { return strings.HasPrefix(c.Name, op+"/") }) {
			continue
		}
		b, err := kbench.Prepare(be, c.Kernel)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Check(); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
		b.Close()
		n++
	}
	if n < 10 {
		t.Fatalf("only %d cases ran", n)
	}

	tiles, err := metal.New(emu.New(emu.Options{PipelineThreads: func(string) int { return 64 }}), metal.Options{Tuning: metal.Tuning{
		MatVecMaxM: 1, MatMulTile: metal.Tile{BM: 32, BN: 32, BK: 16, SGM: 2, SGN: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	defer tiles.Close()
	b, err := kbench.Prepare(tiles, ops.Args{Op: ops.MatMul, Ints: ops.Shape{ops.M: 4, ops.N: 64, ops.K: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Check(); err == nil || !strings.Contains(err.Error(), "128 threads per threadgroup exceed the pipeline's 64") {
		t.Errorf("a 128-thread tile on a 64-thread pipeline: %v", err)
	}
}
