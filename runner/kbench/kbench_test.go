package kbench

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/applegpu"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/suites"
)

// kcase builds a kernel case by hand, as a runner may: name=value pairs,
// ints as numbers and strings as written.
func kcase(op ops.ID, kv ...any) ops.Args {
	a := ops.Args{Op: op, Ints: ops.Shape{}}
	for i := 0; i < len(kv); i += 2 {
		name := ops.Param(kv[i].(string))
		switch v := kv[i+1].(type) {
		case int:
			a.Ints[name] = v
		case string:
			switch name {
			case ops.DTypeParam:
				a.DType = ops.DType(v)
			case ops.MoEStrategyParam:
				a.MoEStrategy = ops.MoEStrategy(v)
			}
		}
	}
	return a
}

func newCPU() *cpu.Backend { return cpu.New(cpu.Options{Threads: 2}) }

// Every op on small shapes: checks against the reference before and after
// timing (timing runs in-place ops thousands of times), and times.
func TestOpsOnCPU(t *testing.T) {
	attn := []any{"num_heads", 4, "num_kv_heads", 2, "head_size", 32, "block_size", 8}
	cases := []ops.Args{
		kcase("paged_attention_decode", append([]any{"seqs", 3, "context", 37}, attn...)...),
		kcase("paged_attention_decode", "seqs", 2, "context", 20, "num_heads", 8, "num_kv_heads", 1, "head_size", 64, "block_size", 32),
		kcase("paged_attention_prefill", append([]any{"seqs", 2, "tokens", 9, "context", 13}, attn...)...),
		kcase("paged_attention_prefill", append([]any{"seqs", 1, "tokens", 40}, attn...)...), // fresh prompt, head+tail check
		kcase("rms_norm", "tokens", 3, "width", 96),
		kcase("rms_norm", "tokens", 2, "hidden", 64), // hidden spells width
		kcase("add_rms_norm", "tokens", 3, "width", 96),
		kcase("rope", "tokens", 3, "num_heads", 4, "num_kv_heads", 2, "head_size", 96),
		kcase("silu_mul", "tokens", 2, "intermediate", 100),
		kcase("matmul", "m", 3, "n", 17, "k", 33, "dtype", "f32"),
		kcase("matmul", "m", 20, "n", 8, "k", 16, "dtype", "f16"),
		kcase("matmul", "tokens", 2, "n", 16, "hidden", 64), // bf16 default
		kcase("moe", "tokens", 5, "experts", 8, "top_k", 2, "hidden", 32, "intermediate", 24, "dtype", "f32", "moe_strategy", "loop"),
		kcase("moe", "tokens", 40, "experts", 8, "top_k", 3, "hidden", 32, "intermediate", 16, "moe_strategy", "chunked", "moe_chunk", 7),
		kcase("moe", "tokens", 4, "experts", 4, "top_k", 4, "hidden", 16, "intermediate", 8, "dtype", "f16"),
		kcase("argmax", "tokens", 3, "width", 1000),
		kcase("embedding", "tokens", 4, "width", 48, "n", 100, "dtype", "f16"),
		kcase("embedding", "tokens", 1, "hidden", 16, "n", 10, "dtype", "f32"),
	}
	for _, c := range cases {
		t.Run(string(c.Op), func(t *testing.T) {
			be := newCPU()
			b, err := Prepare(be, c)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if !strings.HasPrefix(b.Describe(), string(c.Op)+" ") {
				t.Errorf("Describe() = %q", b.Describe())
			}
			if b.Bytes() <= 0 || (b.Flops() <= 0 && c.Op != "embedding") {
				t.Errorf("%s: bytes %d flops %d", b.Describe(), b.Bytes(), b.Flops())
			}
			if e, err := b.Check(); err != nil {
				t.Fatal(err)
			} else {
				t.Logf("%s: max error %.2g", b.Describe(), e)
			}
			s, err := b.Run()
			if err != nil {
				t.Fatal(err)
			}
			iters := b.Iters()
			if iters < 1 {
				t.Fatalf("iters %d after Run", iters)
			}
			if len(s) < 2 || s[0].Metric != "us_per_call" {
				t.Errorf("samples %v", s)
			}
			for _, x := range s {
				if !(x.Value > 0) || x.Unit == "" {
					t.Errorf("sample %+v", x)
				}
			}
			if _, err := b.Run(); err != nil || b.Iters() != iters {
				t.Errorf("second Run: %v, iters %d then %d", err, iters, b.Iters())
			}
			if _, err := b.Check(); err != nil {
				t.Errorf("after timing: %v", err)
			}
		})
	}
}

// Suite cases straight from the parser work, defaults filling the rest.
func TestFromSuite(t *testing.T) {
	src := `name: k
backend: cpu
params: { dtype: f32, tokens: 2, head_size: 32, num_heads: 4, num_kv_heads: 2, width: 64, intermediate: 32, context: 10 }
cases:
  - name: small
    kind: kernel
    matrix:
      op: [rms_norm, silu_mul, rope, argmax, paged_attention_decode]
`
	s, err := suites.Parse("k.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range s.Cases {
		b, err := Prepare(newCPU(), c.Kernel)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if _, err := b.Check(); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
}

func TestBadParams(t *testing.T) {
	for _, tc := range []struct {
		c     ops.Args
		param string
		want  string
	}{
		{kcase("paged_attention_decode", "head_size", 81), "head_size", "head_size=81: must be a multiple of 2"},
		{kcase("rope", "head_size", 512), "head_size", "head_size=512: must be at most 256"},
		{kcase("paged_attention_prefill", "block_size", 12), "block_size", "block_size=12: supported block sizes are 8, 16, 32"},
		{kcase("paged_attention_decode", "num_heads", 6, "num_kv_heads", 4), "num_heads", "num_heads=6: must be a multiple of num_kv_heads=4"},
		{kcase("moe", "experts", 4, "top_k", 8), "top_k", "top_k=8: must be at most experts=4"},
		{kcase("matmul", "m", 0), "m", "m=0: must be positive"},
		{kcase("rms_norm", "width", -3), "width", "width=-3: must be positive"},
		{kcase("matmul", "bias", 2), "bias", "bias=2: must be 0 or 1"},
		{kcase("qmatmul", "bias", -1), "bias", "bias=-1: must be 0 or 1"},
		{kcase("matmul", "m", 4, "tokens", 8), "tokens", "tokens=8: is m by another name, given too (m=4): give one"},
		{kcase("rms_norm", "width", 256, "hidden", 128), "hidden", "hidden=128: is width by another name, given too (width=256)"},
		{kcase("matmul", "dtype", "fp8"), "dtype", "dtype=fp8: supported dtypes are f32, f16, bf16"},
		{kcase("matmul", "dtype", "q4"), "dtype", "dtype=q4: supported dtypes are f32, f16, bf16 (packed weights: op qmatmul)"},
		{kcase("moe", "dtype", "q4_k"), "dtype", "dtype=q4_k: supported dtypes are f32, f16, bf16 (packed weights: op qmoe)"},
		{kcase("moe", "moe_strategy", "sorted"), "moe_strategy", "moe_strategy=sorted: supported strategies are loop, chunked, grouped"},
		// A row a packed format cannot hold is refused under the parameter
		// that sets it: qmoe's down rows are intermediate wide, qembedding's
		// rows width (both were named hidden or k, which they do not take).
		{kcase("qmoe", "experts", 3, "top_k", 2, "hidden", 128, "intermediate", 17), "intermediate", "intermediate=17: affine 4-bit, group 64"},
		{kcase("qmoe", "experts", 3, "top_k", 2, "hidden", 17, "intermediate", 128), "hidden", "hidden=17: affine 4-bit, group 64"},
		{kcase("qembedding", "n", 3, "width", 17), "width", "width=17: affine 4-bit, group 64"},
		{kcase("qmatmul", "n", 3, "k", 17), "k", "k=17: affine 4-bit, group 64"},
		{kcase("softmax"), "op", `op=softmax: unknown op (want one of paged_attention_decode,`},
		{kcase(""), "op", "op: a kernel case needs an op"},
	} {
		_, err := Prepare(newCPU(), tc.c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: got %v, want %q", tc.c.Op, tc.c.Ints, err, tc.want)
			continue
		}
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != tc.param {
			t.Errorf("%v: not a *ParamError for %s", err, tc.param)
		}
	}

	// Every problem of a case is reported at once.
	_, err := Prepare(newCPU(), kcase("paged_attention_decode", "head_size", 81, "block_size", 12))
	if err == nil || !strings.Contains(err.Error(), "head_size=81") || !strings.Contains(err.Error(), "block_size=12") {
		t.Errorf("both problems: %v", err)
	}

	_, err = Prepare(newCPU(), kcase("kv_write", "tokens", 4))
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "kv_write is fused into attention") {
		t.Errorf("kv_write: %v", err)
	}
}

// noNarrow is the CPU backend refusing affine widths other than 4 and 8,
// as the CUDA backend does.
type noNarrow struct{ *cpu.Backend }

func (b noNarrow) SupportsQuant(s quant.Spec) error {
	if s.Type == quant.Affine && s.Bits != 4 && s.Bits != 8 {
		return fmt.Errorf("no %d-bit kernels", s.Bits)
	}
	return nil
}

// A packed-weight case of a format the backend refuses is unsupported (a
// skip), for every packed op: the experts were refused as they uploaded,
// which failed the case.
func TestPackedFormatRefused(t *testing.T) {
	for _, a := range []ops.Args{
		kcase("qmatmul", "m", 1, "n", 64, "k", 128, "dtype", "q3"),
		kcase("qmoe", "tokens", 1, "experts", 4, "top_k", 2, "hidden", 128, "intermediate", 64, "dtype", "q6"),
		kcase("qembedding", "tokens", 2, "n", 50, "width", 128, "dtype", "q5"),
	} {
		_, err := Prepare(noNarrow{newCPU()}, a)
		if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "-bit kernels") {
			t.Errorf("%s %s: %v, want unsupported", a.Op, a.DType, err)
		}
		b, err := Prepare(newCPU(), a)
		if err != nil {
			t.Fatalf("%s %s on the CPU: %v", a.Op, a.DType, err)
		}
		b.Close()
	}
}

// fewExperts is the CPU backend with Metal's limits on a MoE block's
// shape (bridge.ShapeChecker).
type fewExperts struct{ *cpu.Backend }

func (b fewExperts) CheckShape(s bridge.ModelShape) error {
	if s.Experts > 2047 || s.TopK > 32 {
		return fmt.Errorf("at most 2047 experts, top-32")
	}
	return nil
}

// A MoE case past the backend's expert limits is skipped before anything
// is allocated, naming the parameter: it was prepared in full, then
// failed its step (top_k=33 of 40 experts, experts=4097 on Metal).
func TestExpertLimitsRefused(t *testing.T) {
	for _, tc := range []struct {
		a    ops.Args
		want string
	}{
		{kcase("moe", "tokens", 3, "experts", 40, "top_k", 33, "hidden", 8, "intermediate", 8), "top_k=33: at most"},
		{kcase("qmoe", "tokens", 3, "experts", 40, "top_k", 33, "hidden", 64, "intermediate", 64), "top_k=33: at most"},
		{kcase("moe", "tokens", 1, "experts", 4097, "top_k", 2, "hidden", 8, "intermediate", 8), "experts=4097: at most"},
	} {
		for name, run := range map[string]func(bridge.Backend, ops.Args) error{
			"need": func(be bridge.Backend, a ops.Args) error { _, err := Need(be, a); return err },
			"prepare": func(be bridge.Backend, a ops.Args) error {
				b, err := Prepare(be, a)
				if err == nil {
					b.Close()
				}
				return err
			},
		} {
			err := run(fewExperts{newCPU()}, tc.a)
			if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Errorf("%s %s %v: %v, want unsupported %q", name, tc.a.Op, tc.a.Ints, err, tc.want)
			}
		}
	}
}

// A case too large for the backend's memory fails before filling tensors.
func TestTooLarge(t *testing.T) {
	_, err := Prepare(tinyMemory{newCPU()}, kcase("matmul", "n", 4096, "k", 4096))
	if err == nil || !strings.Contains(err.Error(), "MiB") {
		t.Errorf("got %v", err)
	}
}

type tinyMemory struct{ *cpu.Backend }

func (t tinyMemory) Info() bridge.DeviceInfo {
	i := t.Backend.Info()
	i.AvailableBytes = 1 << 20
	return i
}

func TestBytesAndFlops(t *testing.T) {
	for _, tc := range []struct {
		c            ops.Args
		bytes, flops int64
		desc         string
	}{
		// weights 3*4*4 + x 2*4*4 + out 2*3*4
		{kcase("matmul", "m", 2, "n", 3, "k", 4, "dtype", "f32"), 48 + 32 + 24, 2 * 2 * 3 * 4, "matmul m=2 n=3 k=4 dtype=f32"},
		// and the f32 bias 3*4, added to each output
		{kcase("matmul", "m", 2, "n", 3, "k", 4, "dtype", "f32", "bias", 1), 48 + 32 + 24 + 12, 2*2*3*4 + 2*3, "matmul m=2 n=3 k=4 dtype=f32 bias"},
		{kcase("qmatmul", "m", 2, "n", 3, "k", 32, "dtype", "q8_0", "bias", 1), 3*34 + 2*32*4 + 2*3*4 + 12, 2*2*3*32 + 2*3, "qmatmul m=2 n=3 k=32 dtype=q8_0 bias"},
		// q 4*8*4 + out 4*8*4, k/v read+write 4*(4*4*4), context 2*2*10*4*4; keys 10+11 per seq
		{kcase("paged_attention_decode", "seqs", 2, "context", 10, "num_heads", 2, "num_kv_heads", 1, "head_size", 32, "block_size", 8),
			4 * (2*2*64 + 4*2*32 + 2*2*10*32), 2 * 11 * 4 * 64, "paged_attention_decode seqs=2 context=10 heads=2/1 head_size=32 block=8"},
		{kcase("embedding", "tokens", 3, "width", 8, "n", 50), 3*8*(2+4) + 12, 0, "embedding tokens=3 vocab=50 hidden=8 dtype=bf16"},
	} {
		b, err := Prepare(newCPU(), tc.c)
		if err != nil {
			t.Fatal(err)
		}
		if b.Bytes() != tc.bytes || b.Flops() != tc.flops || b.Describe() != tc.desc {
			t.Errorf("%s: bytes %d flops %d, want %q %d %d", b.Describe(), b.Bytes(), b.Flops(), tc.desc, tc.bytes, tc.flops)
		}
	}
}

// faulty is a CPU backend with subtly wrong ops: Check must notice.
type faulty struct{ *cpu.Backend }

func (f faulty) Attention(out, q, k, v bridge.Tensor, c bridge.KVCache, h, kvh, d int, scale float32, window int) {
	f.Backend.Attention(out, q, k, v, c, h, kvh, d, scale*1.01, window)
}

func (f faulty) MatMul(out, x, w, bias bridge.Tensor) {
	f.Backend.MatMul(out, x, w, bias)
	f.Backend.Add(out, out, out)
}

func (f faulty) RoPE(q, k, qn, kn bridge.Tensor, h, kvh, d int, rot kernels.Rotary, eps float32) {
	f.Backend.RoPE(q, k, qn, kn, h, kvh, d, kernels.Rotary{Theta: rot.Theta * 1.001}, eps)
}

// MoE forgets to renormalise the top-k routing weights.
func (f faulty) MoE(out, x bridge.Tensor, w *bridge.MoEWeights, p bridge.MoEParams) {
	bad := *w
	bad.NormTopK = !w.NormTopK
	f.Backend.MoE(out, x, &bad, p)
}

func TestCheckCatchesWrongOps(t *testing.T) {
	for _, c := range []ops.Args{
		kcase("paged_attention_decode", "seqs", 2, "context", 30, "head_size", 32, "num_heads", 2, "num_kv_heads", 2, "block_size", 8),
		kcase("matmul", "m", 2, "n", 8, "k", 16, "dtype", "f32"),
		kcase("moe", "tokens", 3, "experts", 4, "top_k", 2, "hidden", 16, "intermediate", 8, "dtype", "f32"),
		kcase("rope", "tokens", 2, "num_heads", 2, "num_kv_heads", 1, "head_size", 32),
	} {
		b, err := Prepare(faulty{newCPU()}, c)
		if err != nil {
			t.Fatal(err)
		}
		if e, err := b.Check(); err == nil {
			t.Errorf("%s: wrong op passed the check (max error %g)", b.Describe(), e)
		}
	}
}

// silentWitness is a backend that could count dispatches but counts none
// (real Metal, or the tuner's wrapper over the CPU), and counts its steps.
type silentWitness struct {
	*cpu.Backend
	steps int
}

func (s *silentWitness) BeginStep(m *bridge.StepMeta, ids []int32, profile bool) error {
	s.steps++
	return s.Backend.BeginStep(m, ids, profile)
}

func (s *silentWitness) LastStepCost() ([]mtl.DispatchStats, bool) { return nil, false }

// Asking a device that counted nothing runs the op once, not at every
// repetition; Rewitness asks again.
func TestWitnessOfADeviceThatCountsNothing(t *testing.T) {
	be := &silentWitness{Backend: newCPU()}
	b, err := Prepare(be, kcase("matmul", "m", 1, "n", 8, "k", 16, "dtype", "f32"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if w, ok, err := b.Witness(); w != nil || ok || err != nil {
			t.Fatalf("Witness() = %v, %v, %v; want nothing", w, ok, err)
		}
	}
	if be.steps != 1 {
		t.Errorf("three asks ran %d steps, want 1", be.steps)
	}
	if _, ok, _ := b.Rewitness(); ok || be.steps != 2 {
		t.Errorf("Rewitness: %v after %d steps, want nothing after 2", ok, be.steps)
	}
}

// countingWitness is a backend whose device counts one fixed dispatch.
type countingWitness struct{ *cpu.Backend }

func (countingWitness) LastStepCost() ([]mtl.DispatchStats, bool) {
	return []mtl.DispatchStats{{Kernel: "k", Cost: mtl.Cost{BytesRead: 4e6, FootprintRead: 4e6, Simdgroups: 160}}}, true
}

// The witness names the GPU it read its counts against so that the name
// finds that GPU again: a bin other than the chip's largest keeps its core
// count, and its figures are that bin's.
func TestWitnessNamesTheBin(t *testing.T) {
	for _, c := range []struct {
		gpu   string
		cores int
		gbs   float64
	}{
		{"", 80, 819},
		{"M3 Ultra", 80, 819},
		{"M3 Ultra 60-core", 60, 819},
		{"M4 Max", 40, 546},
		{"M4 Max 32-core", 32, 410},
		{"M4-Max-32-core", 32, 410},
		{"Apple M3 Max (30-core GPU)", 30, 300},
		{"M1 7-core", 7, 68.25},
	} {
		b, err := Prepare(countingWitness{newCPU()}, kcase("matmul", "m", 1, "n", 8, "k", 16, "dtype", "f32"))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.SetAppleGPU(c.gpu); err != nil {
			t.Fatal(err)
		}
		w, ok, err := b.Witness()
		b.Close()
		if !ok || err != nil {
			t.Fatalf("%q: Witness() = %v, %v", c.gpu, ok, err)
		}
		g, found := applegpu.Lookup(w.GPU)
		if !found || g.Cores != c.cores || g.BandwidthGBs != c.gbs {
			t.Errorf("%q: the witness names %q, which is %+v; want the %d-core bin at %v GB/s", c.gpu, w.GPU, g, c.cores, c.gbs)
		}
		if want := 4e6 / (c.gbs * 1e9); w.FloorSeconds != want || w.SimdgroupsPerCore != 160/float64(c.cores) {
			t.Errorf("%q: floor %v s, %v simdgroups a core; want %v s, %v", c.gpu, w.FloorSeconds, w.SimdgroupsPerCore, want, 160/float64(c.cores))
		}
	}
}
