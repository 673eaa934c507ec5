package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/applegpu"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// ggmlTol is the most llama.cpp's result may differ from the Go reference,
// relative to max(1, max|reference|): its kernels compute in f32 from the
// same f32, f16 and packed inputs (the attention reference rounds q to
// half first, as the vec kernel does).
const ggmlTol = 1e-4

// ggml runs llama.cpp's kernels on the emulator, encoded as llama.cpp's
// host encodes them at d99724f2b141 (ggml-metal-ops.cpp: arguments,
// function constants, threadgroup memory, grid); docs/msl-subset.md,
// "llama.cpp's kernel library".
type ggml struct {
	dev   *emu.Device
	lib   mtl.Library
	cores int
	rng   *rand.Rand
}

func openGGML(c *config, src string) (*ggml, error) {
	gpu, ok := applegpu.Lookup(c.gpu)
	if !ok {
		return nil, fmt.Errorf("-gpu: no Apple GPU %q in the table (bridge/mtl/applegpu)", c.gpu)
	}
	if _, err := emu.FindCompiler(""); err != nil {
		return nil, fmt.Errorf("metal-emu: %w", err)
	}
	// The whole library takes minutes to build the first time
	// (docs/msl-subset.md), so no build limit; later runs load it from the
	// cache.
	// Every simdgroup of the vec attention kernel stores the same query
	// into the same threadgroup words, which Metal allows and the
	// emulator's race check refuses.
	dev := emu.New(emu.Options{CacheDir: c.cache, BuildTimeout: -1, NoRaceCheck: true, ReverseLanes: c.reverseLanes})
	lib, err := dev.NewLibrary(map[string]string{"ggml-metal.metal": src}, mtl.CompileOptions{
		LanguageVersion: "3.2",
		Defines:         map[string]string{"GGML_METAL_EMBED_LIBRARY": "1", "GGML_METAL_HAS_BF16": "1"},
	})
	if err != nil {
		return nil, fmt.Errorf("building ggml-metal.metal: %w", err)
	}
	return &ggml{dev: dev, lib: lib, cores: gpu.Cores, rng: rand.New(rand.NewPCG(7, 0x67676d6c))}, nil
}

// allocator makes buffers of the sizes given, which the caller releases.
type allocator func(sizes ...int) ([]mtl.Buffer, error)

// bind is one argument of a dispatch, at the index of its place.
type bind struct {
	buf   mtl.Buffer
	bytes []byte
}

type dispatch struct {
	kernel        string
	fc            mtl.FunctionConstants
	groups, tpg   [3]int
	args          []bind
	threadgroupMB int // threadgroup memory at index 0, bytes
}

// runAll encodes each dispatch in order in one command buffer and returns
// what the witness counted.
func (g *ggml) runAll(ds ...dispatch) ([]mtl.DispatchStats, error) {
	q, err := g.dev.NewCommandQueue()
	if err != nil {
		return nil, err
	}
	cb, err := q.CommandBuffer()
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		p, err := g.lib.Pipeline(d.kernel, d.fc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.kernel, err)
		}
		enc, err := cb.ComputeEncoder()
		if err != nil {
			return nil, err
		}
		enc.SetPipeline(p)
		for i, a := range d.args {
			if a.buf != nil {
				enc.SetBuffer(a.buf, 0, i)
			} else {
				enc.SetBytes(a.bytes, i)
			}
		}
		if d.threadgroupMB > 0 {
			enc.SetThreadgroupMemoryLength(d.threadgroupMB, 0)
		}
		enc.DispatchThreadgroups(d.groups, d.tpg)
		enc.End()
	}
	cb.Commit()
	if err := cb.Wait(); err != nil {
		return nil, err
	}
	w, ok := cb.(mtl.CostWitness)
	if !ok {
		return nil, fmt.Errorf("the emulator counted no cost witness")
	}
	return w.DispatchStats(), nil
}

func (g *ggml) run(c opCase, ideal int64) (row, error) {
	var (
		ds        []mtl.DispatchStats
		got, want []float32
		err       error
		release   []mtl.Buffer
		newBuf    = func(sizes ...int) ([]mtl.Buffer, error) {
			out := make([]mtl.Buffer, len(sizes))
			for i, n := range sizes {
				b, err := g.dev.NewBuffer(n)
				if err != nil {
					return nil, fmt.Errorf("a buffer of %d bytes: %w", n, err)
				}
				release = append(release, b)
				out[i] = b
			}
			return out, nil
		}
		kernelNames []string
	)
	defer func() {
		for _, b := range release {
			b.Release()
		}
	}()
	switch c.args.Op {
	case ops.RMSNorm:
		ds, got, want, err = g.rmsNorm(c.args.Ints[ops.Width], newBuf)
	case ops.QMatMul:
		ds, got, want, err = g.gemv(c.args, newBuf)
	case ops.PagedAttentionDecode:
		ds, got, want, err = g.attention(c.args.Ints, newBuf)
	default:
		err = fmt.Errorf("no llama.cpp encoding of %s", c.args.Op)
	}
	if err != nil {
		return row{}, fmt.Errorf("llama.cpp %s %s: %w", c.name, c.shape, err)
	}
	maxErr, scale := 0.0, 1.0
	for i := range want {
		maxErr = max(maxErr, math.Abs(float64(got[i])-float64(want[i])))
		scale = max(scale, math.Abs(float64(want[i])))
	}
	if !(maxErr <= ggmlTol*scale) {
		return row{}, fmt.Errorf("llama.cpp %s %s: max abs error %.3g exceeds %.3g (%.0e relative to %.3g)", c.name, c.shape, maxErr, ggmlTol*scale, ggmlTol, scale)
	}
	for _, k := range mtl.SumByKernel(ds) {
		kernelNames = append(kernelNames, k.Kernel)
	}
	st := mtl.Sum(ds)
	return row{Op: c.name, Shape: c.shape, Impl: "llama.cpp", Kernels: strings.Join(kernelNames, "+"), MaxErr: maxErr,
		Ideal: ideal, Stats: st, SimdgroupsPerCore: st.SimdgroupsPerCore(g.cores)}, nil
}

func (g *ggml) randn(n int, mean, sd float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(mean + sd*g.rng.NormFloat64())
	}
	return v
}

func putF32(b mtl.Buffer, v []float32) mtl.Buffer {
	for i, x := range v {
		binary.LittleEndian.PutUint32(b.Contents()[4*i:], math.Float32bits(x))
	}
	return b
}

func putF16(b mtl.Buffer, v []float32) mtl.Buffer {
	for i, x := range v {
		binary.LittleEndian.PutUint16(b.Contents()[2*i:], quant.ToF16(x))
	}
	return b
}

func f32s(b mtl.Buffer, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b.Contents()[4*i:]))
	}
	return out
}

// rmsNorm is ggml_metal_op_norm on one row with its weight fused
// (kernel_rms_norm_mul_f32_4: the row is a multiple of 4).
func (g *ggml) rmsNorm(w int, newBuf allocator) ([]mtl.DispatchStats, []float32, []float32, error) {
	const eps = 1e-6
	x, wt := g.randn(w, 0, 1), g.randn(w, 1, 0.1)
	want := make([]float32, w)
	kernels.RMSNorm(want, x, wt, w, eps)
	ne00t := w / 4
	nth := 32
	for nth < ne00t && nth < 1024 {
		nth *= 2
	}
	nth = min(nth, (ne00t+31)/32*32)
	a := (&kargs{}).i32(w, ne00t).u64(w*4, w*4, w*4).f32(eps).
		i32(1, 1, 1, 1, 1, 1, 1, 1, 1).u64(w*4, 0, 0, w*4, 0, 0, w*4, 0, 0).done()
	bs, err := newBuf(4*w, 4*w, 4*w)
	if err != nil {
		return nil, nil, nil, err
	}
	xb, wb, dst := putF32(bs[0], x), putF32(bs[1], wt), bs[2]
	ds, err := g.runAll(dispatch{kernel: "kernel_rms_norm_mul_f32_4", groups: [3]int{1, 1, 1}, tpg: [3]int{nth, 1, 1},
		args: []bind{{bytes: a}, {buf: xb}, {buf: wb}, {buf: wb}, {buf: dst}}, threadgroupMB: 32 * 4})
	if err != nil {
		return nil, nil, nil, err
	}
	return ds, f32s(dst, w), want, nil
}

// gemv is ggml_metal_op_mul_mat's matrix-vector path for one token
// (kernel_mul_mv_<type>_f32, N_R0_* rows per simdgroup, N_SG_* simdgroups).
func (g *ggml) gemv(args ops.Args, newBuf allocator) ([]mtl.DispatchStats, []float32, []float32, error) {
	n, k := args.Ints[ops.N], args.Ints[ops.K]
	spec, ok := args.DType.Quant()
	if !ok {
		return nil, nil, nil, fmt.Errorf("dtype %s is not a packed format", args.DType)
	}
	var kernel string
	// The host binds no threadgroup memory where the kernel does not use
	// its shmem argument; the emulator wants some for a declared one.
	nr0, nsg, smem := 0, 0, 16
	perGroup := func() int { return nr0 * nsg }
	switch spec.Type {
	case quant.Q4_0:
		kernel, nr0, nsg = "kernel_mul_mv_q4_0_f32", 4, 2
	case quant.Q8_0:
		// Its simdgroups split a row: a threadgroup takes nr0 rows.
		kernel, nr0, nsg, smem = "kernel_mul_mv_q8_0_f32", 2, 4, 32*4*2
		perGroup = func() int { return nr0 }
	case quant.Q4_K:
		kernel, nr0, nsg = "kernel_mul_mv_q4_K_f32", 2, 2
	default:
		return nil, nil, nil, fmt.Errorf("no llama.cpp encoding of %s", args.DType)
	}
	rowBytes := spec.RowBytes(k)
	m := quant.Random(spec, n, k, float32(math.Sqrt(3/float64(k))), g.rng, make([]byte, n*rowBytes), nil, nil)
	x := g.randn(k, 0, 1)
	want := make([]float32, n)
	quant.MatMul(want, x, nil, m, 1)
	a := (&kargs{}).i32(k, n, 1).u64(0, rowBytes, n*rowBytes, n*rowBytes).i32(k, 1, 1).
		u64(4, k*4, k*4, k*4).i32(n, 1, nr0).i16(1, 1).done()
	bs, err := newBuf(len(m.Data), 4*k, 4*n)
	if err != nil {
		return nil, nil, nil, err
	}
	w, xb, dst := bs[0], putF32(bs[1], x), bs[2]
	copy(w.Contents(), m.Data)
	ds, err := g.runAll(dispatch{kernel: kernel,
		fc:     mtl.FunctionConstants{600: int16(nsg), 601: int16(0), 602: int16(1), 603: int16(1), 604: int16(1)},
		groups: [3]int{(n + perGroup() - 1) / perGroup(), 1, 1}, tpg: [3]int{32, nsg, 1},
		args: []bind{{bytes: a}, {buf: w}, {buf: xb}, {buf: dst}}, threadgroupMB: smem})
	if err != nil {
		return nil, nil, nil, err
	}
	return ds, f32s(dst, n), want, nil
}

// attention is ggml_metal_op_flash_attn_ext's decode path: one query per
// head over an f16 cache laid out as llama.cpp's ([context][KV head][D]),
// split over 32 workgroups into a scratch buffer, then the reduction. No
// mask: every key is seen, as in mtlbench's case.
func (g *ggml) attention(s ops.Shape, newBuf allocator) ([]mtl.DispatchStats, []float32, []float32, error) {
	C, H, KVH, D := s[ops.Context], s[ops.NumHeads], s[ops.NumKVHeads], s[ops.HeadSize]
	const nwg, ncpsg = 32, 32
	nsg := 1
	for 2*nwg*nsg*ncpsg < C && nsg < 4 {
		nsg *= 2
	}
	q := g.randn(H*D, 0, 1)
	kf, vf := g.randn(C*KVH*D, 0, 1), g.randn(C*KVH*D, 0, 1)
	half := func(v float32) float32 { return quant.HalfToF32(quant.ToF16(v)) }
	for i := range kf {
		kf[i], vf[i] = half(kf[i]), half(vf[i])
	}
	scale := 1 / math.Sqrt(float64(D))
	want := make([]float32, H*D)
	sc := make([]float64, C)
	for h := range H {
		kv := h / (H / KVH)
		mx := math.Inf(-1)
		for j := range C {
			var acc float64
			for d := range D {
				acc += float64(half(q[h*D+d])) * float64(kf[(j*KVH+kv)*D+d])
			}
			sc[j] = acc * scale
			mx = max(mx, sc[j])
		}
		var sum float64
		for j := range sc {
			sc[j] = math.Exp(sc[j] - mx)
			sum += sc[j]
		}
		for d := range D {
			var acc float64
			for j := range C {
				acc += sc[j] * float64(vf[(j*KVH+kv)*D+d])
			}
			want[h*D+d] = float32(acc / sum)
		}
	}
	row := KVH * D // elements from one key to the next
	a := (&kargs{}).i32(1, H, 1).u64(H*D*4, D*4, H*D*4).
		i32(C, KVH, 1, row).u64(row*2, D*2, C*row*2).
		i32(row).u64(row*2, D*2, C*row*2).
		i32(0, 1, 1).u64(0, 0, 0).i32(H, 1, 1).f32(float32(scale), 0, 0, 0).i32(0).f32(0).done()
	pad := func(v, m int) int { return (v + m - 1) / m * m }
	smem := pad((pad(D, 128)+4*ncpsg+2*pad(D, 128))*nsg*2, 16)
	bs, err := newBuf(4*H*D, 2*len(kf), 2*len(vf), 4*(H*D*nwg+H*2*nwg), 4*H*D)
	if err != nil {
		return nil, nil, nil, err
	}
	qb, kb, vb, tmp, dst := putF32(bs[0], q), putF16(bs[1], kf), putF16(bs[2], vf), bs[3], bs[4]
	name := fmt.Sprintf("kernel_flash_attn_ext_vec_f16_dk%d_dv%d", D, D)
	ds, err := g.runAll(
		dispatch{kernel: name,
			fc: mtl.FunctionConstants{400: false, 401: false, 402: false, 403: false, 404: false,
				420: int32(row), 421: int32(row), 422: int32(nsg), 423: int32(nwg)},
			groups: [3]int{1, H, nwg}, tpg: [3]int{32, nsg, 1},
			args:          []bind{{bytes: a}, {buf: qb}, {buf: kb}, {buf: vb}, {buf: qb}, {buf: qb}, {buf: qb}, {buf: tmp}},
			threadgroupMB: smem},
		dispatch{kernel: "kernel_flash_attn_ext_vec_reduce",
			fc:     mtl.FunctionConstants{500: int32(D), 501: int32(nwg)},
			groups: [3]int{H, 1, 1}, tpg: [3]int{32 * nwg, 1, 1},
			args: []bind{{bytes: (&kargs{}).i32(H).b}, {buf: tmp}, {buf: dst}}})
	if err != nil {
		return nil, nil, nil, err
	}
	return ds, f32s(dst, H*D), want, nil
}
