package metal_test

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/kbench"
	"github.com/mtlbench/mtlbench/runner/tune"
)

// kcase is one kernel case of the sweep: the op's parameters as a suite
// would give them and, on Metal, a launch config from the op's space.
type kcase struct {
	a   ops.Args
	cfg tune.Config
	// metalRefuses, when set, is what Metal's refusal of the case must say
	// (the CPU runs it).
	metalRefuses string
}

func (c kcase) String() string {
	s := string(c.a.Op) + "/" + c.a.Ints.Key()
	if c.a.DType != "" {
		s += "/" + string(c.a.DType)
	}
	if c.a.MoEStrategy != "" {
		s += "/" + string(c.a.MoEStrategy)
	}
	if c.cfg != nil {
		s += "/{" + c.cfg.Key() + "}"
	}
	return s
}

// runKCase prepares and checks c on be: nil when it passed, refused when
// Prepare turned it down as a case should be (a parameter, an unsupported
// op or format, too little memory), else the failure, a panic included.
func runKCase(be bridge.Backend, c kcase) (refused string, maxErr float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	var run bridge.Backend = be
	if mb, ok := be.(*metal.Backend); ok {
		run = mb
		if c.cfg != nil {
			cfg := c.cfg
			mb.SetLaunchConfig(string(c.a.Op), func(string, map[string]int) (map[string]string, bool) { return cfg, true })
			defer mb.SetLaunchConfig(string(c.a.Op), nil)
			if c.a.Op == ops.MoE {
				p := tune.MoEParams(cfg)
				run = &moeOverride{Backend: mb, p: &p}
			}
		}
	}
	b, err := kbench.Prepare(run, c.a)
	if err != nil {
		var pe *kbench.ParamError
		var me *kbench.MemoryError
		if errors.As(err, &pe) || errors.As(err, &me) || errors.Is(err, errors.ErrUnsupported) {
			return err.Error(), 0, nil
		}
		return "", 0, fmt.Errorf("prepare: %w", err)
	}
	defer b.Close()
	maxErr, err = b.Check()
	return "", maxErr, err
}

// sweepCases are edge values of every op's parameters.
func sweepCases() []kcase {
	var cs []kcase
	add := func(op ops.ID, dt ops.DType, kv ...any) {
		s := ops.Shape{}
		for i := 0; i < len(kv); i += 2 {
			s[kv[i].(ops.Param)] = kv[i+1].(int)
		}
		cs = append(cs, kcase{a: ops.Args{Op: op, Ints: s, DType: dt}})
	}
	odd := []int{1, 2, 3, 17, 31, 33, 97, 127, 129, 1025, 4097}
	for _, op := range []ops.ID{ops.RMSNorm, ops.AddRMSNorm, ops.LayerNorm, ops.AddLayerNorm} {
		for _, w := range odd {
			add(op, "", ops.Tokens, 3, ops.Width, w)
		}
		// Widths of float4s (kernels/metal/norm.h): one, a simdgroup's and
		// one past, and rows kept in registers or past them.
		for _, w := range []int{4, 128, 132, 4096, 16388} {
			add(op, "", ops.Tokens, 2, ops.Width, w)
		}
	}
	for _, op := range []ops.ID{ops.SiLUMul, ops.GELU} {
		for _, w := range odd {
			add(op, "", ops.Tokens, 3, ops.Intermediate, w)
		}
	}
	for _, w := range []int{1, 2, 3, 4, 5, 17, 1025, 4095, 4097, 4099, 8193, 262145} {
		add(ops.Argmax, "", ops.Tokens, 2, ops.Width, w)
	}
	for _, hd := range []int{2, 4, 6, 18, 32, 64, 80, 96, 112, 128, 130, 192, 250, 256} {
		add(ops.RoPE, "", ops.NumHeads, 3, ops.NumKVHeads, 1, ops.HeadSize, hd, ops.Tokens, 3, ops.Context, 17)
	}
	add(ops.RoPE, "", ops.NumHeads, 1, ops.NumKVHeads, 1, ops.HeadSize, 64, ops.Tokens, 1, ops.Context, 1)
	add(ops.RoPE, "", ops.NumHeads, 7, ops.NumKVHeads, 7, ops.HeadSize, 64, ops.Tokens, 2, ops.Context, 4097)
	for _, dt := range []ops.DType{ops.F32, ops.F16, ops.BF16} {
		for _, mnk := range [][3]int{{1, 1, 1}, {1, 3, 17}, {2, 17, 3}, {3, 31, 33}, {8, 33, 97}, {9, 129, 31},
			{17, 1, 129}, {33, 127, 1}, {65, 17, 33}, {129, 33, 17}, {1, 4097, 31}, {1, 5, 4097}} {
			add(ops.MatMul, dt, ops.M, mnk[0], ops.N, mnk[1], ops.K, mnk[2])
		}
		for _, tnw := range [][3]int{{1, 1, 1}, {3, 3, 17}, {17, 129, 2}, {5, 31, 97}} {
			add(ops.Embedding, dt, ops.Tokens, tnw[0], ops.Width, tnw[2], ops.N, tnw[1])
			add(ops.PositionEmbedding, dt, ops.Tokens, tnw[0], ops.Width, tnw[2], ops.N, tnw[1])
		}
	}
	for _, dt := range ops.QuantDTypes {
		for _, mnk := range [][3]int{{1, 1, 256}, {3, 17, 512}, {9, 3, 256}, {1, 3, 32}, {2, 5, 17}, {1, 2, 96}} {
			add(ops.QMatMul, dt, ops.M, mnk[0], ops.N, mnk[1], ops.K, mnk[2])
		}
		for _, tw := range [][3]int{{1, 1, 256}, {3, 5, 512}, {2, 3, 32}, {2, 3, 17}} {
			add(ops.QEmbedding, dt, ops.Tokens, tw[0], ops.N, tw[1], ops.Width, tw[2])
		}
	}
	moe := func(op ops.ID, dt ops.DType, st ops.MoEStrategy, t, e, k, h, i, chunk int) {
		s := ops.Shape{ops.Tokens: t, ops.Experts: e, ops.TopK: k, ops.Hidden: h, ops.Intermediate: i}
		if chunk > 0 {
			s[ops.MoEChunk] = chunk
		}
		cs = append(cs, kcase{a: ops.Args{Op: op, Ints: s, DType: dt, MoEStrategy: st}})
	}
	for _, st := range []ops.MoEStrategy{ops.MoELoop, ops.MoEChunked, ops.MoEGrouped} {
		dts := []ops.DType{ops.BF16}
		if st == ops.MoEGrouped {
			dts = []ops.DType{ops.F32, ops.F16, ops.BF16}
		}
		for _, dt := range dts {
			for _, v := range [][5]int{{1, 1, 1, 1, 1}, {3, 1, 1, 17, 3}, {2, 3, 3, 3, 17}, {17, 5, 2, 33, 31},
				{5, 17, 17, 31, 33}, {9, 33, 32, 8, 8}, {9, 2047, 2, 8, 8}} {
				for _, chunk := range []int{0, 1, 3, ops.MaxMoEChunk} {
					if chunk > 0 && st != ops.MoEChunked {
						continue
					}
					moe(ops.MoE, dt, st, v[0], v[1], v[2], v[3], v[4], chunk)
				}
			}
		}
		moe(ops.QMoE, ops.Q4, st, 17, 5, 2, 128, 64, 0)
	}
	for _, dt := range ops.QuantDTypes {
		moe(ops.QMoE, dt, "", 3, 3, 3, 256, 256, 0)
	}
	// Refused by name, not by the wrong one: qmoe's down rows are
	// intermediate wide.
	moe(ops.QMoE, ops.Q4, "", 2, 3, 2, 128, 17, 0)
	moe(ops.QMoE, ops.Q4, "", 2, 3, 2, 17, 128, 0)
	// Past Metal's routing (32 a token) and grouping (2047 experts in 32
	// KiB): refused before allocating, where they failed their step.
	for _, v := range []struct {
		op         ops.ID
		dt         ops.DType
		e, k, h, i int
		want       string
	}{
		{ops.MoE, ops.BF16, 40, 33, 8, 8, "top_k=33: metal: top-33 of 40 experts: the routing takes at most 32"},
		{ops.QMoE, ops.Q4, 40, 33, 64, 64, "top_k=33: metal: top-33 of 40 experts: the routing takes at most 32"},
		{ops.MoE, ops.F32, 2048, 2, 8, 8, "experts=2048: metal: 2048 experts: the grouping takes at most 2047"},
		{ops.QMoE, ops.Q4, 2048, 2, 64, 64, "experts=2048: metal: 2048 experts: the grouping takes at most 2047"},
	} {
		moe(v.op, v.dt, "", 3, v.e, v.k, v.h, v.i, 0)
		cs[len(cs)-1].metalRefuses = v.want
	}
	attn := func(op ops.ID, dt ops.DType, seqs, tokens, ctx, h, kvh, d, bs int) {
		s := ops.Shape{ops.Seqs: seqs, ops.Context: ctx, ops.NumHeads: h, ops.NumKVHeads: kvh, ops.HeadSize: d, ops.BlockSize: bs}
		if op == ops.PagedAttentionPrefill {
			s[ops.Tokens] = tokens
		}
		cs = append(cs, kcase{a: ops.Args{Op: op, Ints: s, DType: dt}})
	}
	for _, dt := range []ops.DType{ops.F32, ops.F16, ops.BF16} {
		for _, d := range []int{2, 4, 6, 18, 32, 34, 64, 80, 96, 112, 128, 130, 192, 250, 256} {
			attn(ops.PagedAttentionDecode, dt, 2, 1, 17, 4, 2, d, 16)
			attn(ops.PagedAttentionPrefill, dt, 2, 9, 3, 4, 2, d, 16)
		}
		for _, bs := range []int{8, 16, 32} {
			for _, ctx := range []int{1, bs - 1, bs, bs + 1, 2*bs + 1} {
				attn(ops.PagedAttentionDecode, dt, 3, 1, ctx, 8, 8, 64, bs)
				attn(ops.PagedAttentionPrefill, dt, 3, 3, ctx, 8, 8, 64, bs)
				attn(ops.PagedAttentionPrefill, dt, 1, bs+1, ctx, 8, 8, 64, bs)
			}
			attn(ops.PagedAttentionPrefill, dt, 2, 1, 0, 2, 1, 64, bs)
			attn(ops.PagedAttentionPrefill, dt, 1, 33, 0, 2, 1, 64, bs)
		}
		for _, g := range [][2]int{{1, 1}, {3, 1}, {5, 1}, {7, 7}, {14, 2}, {16, 1}, {32, 2}, {6, 3}, {24, 3}} {
			attn(ops.PagedAttentionDecode, dt, 1, 1, 33, g[0], g[1], 32, 16)
			attn(ops.PagedAttentionPrefill, dt, 1, 17, 5, g[0], g[1], 32, 16)
		}
		attn(ops.PagedAttentionDecode, dt, 1, 1, 4097, 2, 1, 32, 32)
		attn(ops.PagedAttentionPrefill, dt, 1, 3, 4097, 2, 1, 32, 32)
	}
	return cs
}

// Every op at edge values of every parameter (1, odd and prime sizes,
// sizes just past a tile or a threadgroup, every head size class, block
// size, GQA ratio, dtype and dispatch strategy) on metal-emu and the CPU:
// each case passes its check or is refused before it allocates, by a
// parameter error or a skip naming the parameter; never a wrong result, a
// panic or a fault the emulator catches.
func TestKernelCaseSweep(t *testing.T) {
	mb := newEmu(t, metal.Tuning{})
	cb := cpu.New(cpu.Options{})
	start := time.Now()
	cases := sweepCases()
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			refused := map[string]string{}
			for _, be := range []bridge.Backend{mb, cb} {
				name := be.Info().Backend
				r, e, err := runKCase(be, c)
				switch {
				case err != nil:
					t.Errorf("%s: %v", name, err)
				case r != "":
					refused[name] = r
					t.Logf("%s refused: %s", name, r)
				default:
					t.Logf("%s: max abs error %.3g", name, e)
				}
			}
			if c.metalRefuses != "" {
				if r := refused["metal-emu"]; !strings.Contains(r, c.metalRefuses) {
					t.Errorf("metal-emu: refused %q, want %q", r, c.metalRefuses)
				}
				if r, ok := refused["cpu"]; ok {
					t.Errorf("cpu refused %q: it runs the case", r)
				}
			}
			// A refusal that names its parameter names one the op takes.
			for name, r := range refused {
				param, _, _ := strings.Cut(r, "=")
				op, _ := ops.Lookup(c.a.Op)
				if _, ok := op.Use(ops.Param(param)); !ok && param != "op" {
					t.Errorf("%s refused under %q, which %s does not take: %s", name, param, c.a.Op, r)
				}
			}
		})
	}
	t.Logf("%d cases in %v", len(cases), time.Since(start).Round(time.Millisecond))
}

// sweepConfigShapes are edge shapes of every Metal tuning space, each
// checked under every candidate of the space there.
var sweepConfigShapes = map[ops.ID][]ops.Shape{
	ops.MatMul: {{ops.M: 1, ops.N: 1, ops.K: 1}, {ops.M: 1, ops.N: 3, ops.K: 17}, {ops.M: 9, ops.N: 17, ops.K: 3},
		{ops.M: 65, ops.N: 33, ops.K: 97}, {ops.M: 8, ops.N: 1, ops.K: 129}, {ops.M: 17, ops.N: 129, ops.K: 1}},
	ops.QMatMul: {{ops.M: 1, ops.N: 1, ops.K: 256}, {ops.M: 3, ops.N: 17, ops.K: 512}, {ops.M: 9, ops.N: 3, ops.K: 256},
		{ops.M: 65, ops.N: 33, ops.K: 256}},
	ops.MoE: {{ops.Tokens: 1, ops.Experts: 1, ops.TopK: 1, ops.Hidden: 1, ops.Intermediate: 1},
		{ops.Tokens: 3, ops.Experts: 3, ops.TopK: 3, ops.Hidden: 17, ops.Intermediate: 3}},
	ops.QMoE: {{ops.Tokens: 1, ops.Experts: 1, ops.TopK: 1, ops.Hidden: 256, ops.Intermediate: 256},
		{ops.Tokens: 17, ops.Experts: 2, ops.TopK: 1, ops.Hidden: 64, ops.Intermediate: 32}},
	ops.PagedAttentionDecode: {
		{ops.Seqs: 1, ops.Context: 1, ops.NumHeads: 1, ops.NumKVHeads: 1, ops.HeadSize: 2, ops.BlockSize: 8},
		{ops.Seqs: 3, ops.Context: 9, ops.NumHeads: 5, ops.NumKVHeads: 1, ops.HeadSize: 80, ops.BlockSize: 8},
		{ops.Seqs: 2, ops.Context: 33, ops.NumHeads: 16, ops.NumKVHeads: 2, ops.HeadSize: 256, ops.BlockSize: 32},
		{ops.Seqs: 1, ops.Context: 1025, ops.NumHeads: 2, ops.NumKVHeads: 1, ops.HeadSize: 96, ops.BlockSize: 16}},
	ops.PagedAttentionPrefill: {
		{ops.Seqs: 1, ops.Tokens: 2, ops.NumHeads: 1, ops.NumKVHeads: 1, ops.HeadSize: 2, ops.BlockSize: 8},
		{ops.Seqs: 2, ops.Tokens: 9, ops.NumHeads: 5, ops.NumKVHeads: 1, ops.HeadSize: 80, ops.BlockSize: 8},
		{ops.Seqs: 1, ops.Tokens: 33, ops.NumHeads: 16, ops.NumKVHeads: 2, ops.HeadSize: 256, ops.BlockSize: 32},
		{ops.Seqs: 1, ops.Tokens: 17, ops.NumHeads: 6, ops.NumKVHeads: 3, ops.HeadSize: 112, ops.BlockSize: 16}},
	ops.RMSNorm: {{ops.Tokens: 1, ops.Width: 1}, {ops.Tokens: 3, ops.Width: 33}, {ops.Tokens: 2, ops.Width: 4097},
		{ops.Tokens: 2, ops.Width: 4096}},
	ops.AddRMSNorm: {{ops.Tokens: 1, ops.Width: 1}, {ops.Tokens: 2, ops.Width: 1025}, {ops.Tokens: 2, ops.Width: 1028}},
	ops.LayerNorm: {{ops.Tokens: 1, ops.Width: 1}, {ops.Tokens: 3, ops.Width: 33}, {ops.Tokens: 2, ops.Width: 4097},
		{ops.Tokens: 3, ops.Width: 768}},
	ops.AddLayerNorm: {{ops.Tokens: 1, ops.Width: 1}, {ops.Tokens: 2, ops.Width: 1025}, {ops.Tokens: 2, ops.Width: 1028}},
	ops.Argmax:       {{ops.Tokens: 1, ops.Width: 1}, {ops.Tokens: 2, ops.Width: 5}, {ops.Tokens: 2, ops.Width: 1025}, {ops.Tokens: 1, ops.Width: 65537}},
}

// sweepConfigDTypes are the weight dtypes a space's shapes run at, one
// each in turn (none: the space's own).
var sweepConfigDTypes = map[ops.ID][]ops.DType{
	ops.MatMul:                {ops.F32, ops.F16, ops.BF16},
	ops.MoE:                   {ops.F32, ops.BF16},
	ops.QMatMul:               {ops.Q4, ops.Q8_0, ops.Q4_K, ops.IQ2_XXS, ops.NVFP4},
	ops.QMoE:                  {ops.Q4_K, ops.MXFP4},
	ops.PagedAttentionDecode:  {ops.F32, ops.BF16},
	ops.PagedAttentionPrefill: {ops.F32, ops.F16},
}

// Every candidate of every Metal tuning space at edge shapes (one row,
// one output, k of 1, heads of 2 values, a context of 1, a width of 1)
// passes its check: a config the tuner may pick is never wrong there.
func TestKernelCaseSweepConfigs(t *testing.T) {
	mb := newEmu(t, metal.Tuning{})
	start := time.Now()
	n := 0
	for _, k := range tune.Kernels("metal-emu") {
		lim := tune.LimitsFor(mb, string(k.Op), k.DType)
		dts := sweepConfigDTypes[k.Op]
		if dts == nil {
			dts = []ops.DType{""}
		}
		for i, s := range sweepConfigShapes[k.Op] {
			s, err := k.Normalize(s, lim)
			if err != nil {
				t.Fatal(err)
			}
			cands, _ := k.Candidates(s, lim)
			dt, t0 := dts[i%len(dts)], time.Now()
			for _, cfg := range cands {
				c := kcase{a: ops.Args{Op: k.Op, Ints: k.OpParams(s), DType: dt}, cfg: cfg}
				n++
				refused, _, err := runKCase(mb, c)
				switch {
				case err != nil:
					t.Errorf("%s: %v", c, err)
				case refused != "":
					t.Errorf("%s refused: %s", c, refused)
				}
			}
			t.Logf("%s %s %s: %d configs in %v", k.Op, s.Key(), dt, len(cands), time.Since(t0).Round(time.Millisecond))
		}
	}
	t.Logf("%d cases in %v", n, time.Since(start).Round(time.Millisecond))
}
