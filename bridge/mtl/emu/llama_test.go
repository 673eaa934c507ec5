package emu_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// TestLlamaStyleMatVec runs a quantized matrix-vector kernel written the
// way llama.cpp writes them (testdata/llama_mv.metal) against Go.
func TestLlamaStyleMatVec(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "llama_mv.metal")
	const ne00, ne01, nsg, nr0 = 96, 7, 2, 2
	const nb, blockBytes = ne00 / 32, 18
	w := make([]byte, 0, ne01*nb*blockBytes)
	deq := make([]float32, ne01*ne00)
	for r := 0; r < ne01; r++ {
		for b := 0; b < nb; b++ {
			d := float32(r+b+1) * 0.125
			w = binary.LittleEndian.AppendUint16(w, f32ToF16(d))
			for j := 0; j < 16; j++ {
				lo, hi := (r*3+b*5+j)%16, (r*7+b+j*3)%16
				w = append(w, byte(lo|hi<<4))
				deq[r*ne00+b*32+j] = d * float32(lo-8)
				deq[r*ne00+b*32+16+j] = d * float32(hi-8)
			}
		}
	}
	x := make([]float32, ne00)
	for i := range x {
		x[i] = float32(i%11)*0.25 - 1
	}
	args := make([]byte, 16)
	binary.LittleEndian.PutUint32(args, ne00)
	binary.LittleEndian.PutUint32(args[4:], ne01)
	binary.LittleEndian.PutUint64(args[8:], nb*blockBytes)
	src0 := newBuf(t, dev, len(w))
	copy(src0.Contents(), w)
	dst := newBuf(t, dev, 4*ne01)
	p := pipe(t, lib, "kernel_mul_mv_q4_r2", mtl.FunctionConstants{200: int16(nsg)})
	groups := (ne01 + nsg*nr0 - 1) / (nsg * nr0)
	if err := run(t, dev, p, [3]int{groups, 1, 1}, [3]int{32 * nsg, 1, 1},
		arg{bytes: args}, arg{buf: src0}, arg{buf: f32Buf(t, dev, x)}, arg{buf: dst}); err != nil {
		t.Fatal(err)
	}
	for r, got := range f32s(dst) {
		var want float64
		for k := 0; k < ne00; k++ {
			want += float64(deq[r*ne00+k]) * float64(x[k])
		}
		if math.Abs(float64(got)-want) > 1e-4*math.Max(1, math.Abs(want)) {
			t.Errorf("dst[%d] = %v, want %v", r, got, want)
		}
	}
}

// TestLlamaStyleAlibi runs testdata/llama_alibi.metal, written as
// llama.cpp writes its ALiBi bias: pow of a float base and a short
// exponent, which Metal's float overload takes, and a store whose left
// side is a parenthesised cast as the body of an if. Both failed to build.
// Each row h has its maximum subtracted and is scaled by m0^(h+1) below
// n_head_log2 and m1^(2(h-n_head_log2)+1) above it.
func TestLlamaStyleAlibi(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "llama_alibi.metal")
	const ne00, rows, nhl2 = 70, 5, 2
	const m0, m1 = float32(0.5), float32(0.75)
	x := make([]float32, rows*ne00)
	for i := range x {
		x[i] = float32((i*7)%13)*0.25 - 1.5 // exact in half
	}
	for _, c := range []struct {
		name string
		bias bool
		half bool
	}{{"kernel_alibi_f32", true, false}, {"kernel_alibi_f16", true, true}, {"kernel_alibi_f32", false, false}} {
		esz := 4
		src := f32Buf(t, dev, x)
		if c.half {
			esz = 2
			src = f16Buf(t, dev, x)
		}
		args := make([]byte, 32)
		binary.LittleEndian.PutUint32(args, ne00)
		binary.LittleEndian.PutUint32(args[4:], nhl2)
		binary.LittleEndian.PutUint32(args[8:], math.Float32bits(m0))
		binary.LittleEndian.PutUint32(args[12:], math.Float32bits(m1))
		binary.LittleEndian.PutUint64(args[16:], uint64(ne00*esz))
		binary.LittleEndian.PutUint64(args[24:], ne00*4)
		dst := newBuf(t, dev, 4*rows*ne00)
		p := pipe(t, lib, c.name, mtl.FunctionConstants{300: c.bias})
		if err := run(t, dev, p, [3]int{rows, 1, 1}, [3]int{32, 1, 1},
			arg{bytes: args}, arg{buf: src}, arg{buf: dst}); err != nil {
			t.Fatal(err)
		}
		got := f32s(dst)
		for h := 0; h < rows; h++ {
			slope := 1.0
			if c.bias && h < nhl2 {
				slope = math.Pow(float64(m0), float64(h+1))
			} else if c.bias {
				slope = math.Pow(float64(m1), float64(2*(h-nhl2)+1))
			}
			mx := math.Inf(-1)
			for i := 0; i < ne00; i++ {
				mx = math.Max(mx, float64(x[h*ne00+i]))
			}
			for i := 0; i < ne00; i++ {
				want := slope * (float64(x[h*ne00+i]) - mx)
				if g := float64(got[h*ne00+i]); math.Abs(g-want) > 1e-5 {
					t.Fatalf("%s bias=%v: dst[%d][%d] = %v, want %v", c.name, c.bias, h, i, g, want)
				}
			}
		}
	}
}

// TestLlamaStyleBF16Rows runs testdata/llama_bf16.metal: rows of bfloat16
// weights gathered by index into half and float rows through a matrix cast
// of a bfloat4x4, which Metal converts element by element and which failed
// to build for half, clang refusing __bf16 to _Float16 directly.
func TestLlamaStyleBF16Rows(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "llama_bf16.metal")
	const ne00, nrows = 48, 4
	idx := []uint32{2, 0, 3, 2, 1}
	w := make([]byte, 0, 2*ne00*nrows)
	vals := make([]float32, ne00*nrows)
	for i := range vals {
		// Whole quarters below 32: exact in bfloat16 and in half.
		vals[i] = float32((i*5)%96-48) * 0.25
		w = binary.LittleEndian.AppendUint16(w, toBF16(vals[i]))
	}
	src0 := newBuf(t, dev, len(w))
	copy(src0.Contents(), w)
	for _, c := range []struct {
		name string
		esz  int
	}{{"kernel_get_rows_bf16_f16", 2}, {"kernel_get_rows_bf16_f32", 4}} {
		args := make([]byte, 24)
		binary.LittleEndian.PutUint32(args, ne00)
		binary.LittleEndian.PutUint64(args[8:], 2*ne00)
		binary.LittleEndian.PutUint64(args[16:], uint64(c.esz*ne00))
		dst := newBuf(t, dev, c.esz*ne00*len(idx))
		if err := run(t, dev, pipe(t, lib, c.name, nil), [3]int{len(idx), 1, 1}, [3]int{2, 1, 1},
			arg{bytes: args}, arg{buf: src0}, arg{buf: u32Buf(t, dev, idx)}, arg{buf: dst}); err != nil {
			t.Fatal(err)
		}
		got := f32s(dst)
		if c.esz == 2 {
			got = f16s(dst)
		}
		for i, r := range idx {
			for k := 0; k < ne00; k++ {
				if want := vals[int(r)*ne00+k]; got[i*ne00+k] != want {
					t.Fatalf("%s: dst[%d][%d] = %v, want %v", c.name, i, k, got[i*ne00+k], want)
				}
			}
		}
	}
}

// TestLlamaStyleUnary runs testdata/llama_unary.metal, whose float4
// instantiation calls fmax(0, x) and fmin(1, x/6 + 0.5) with a scalar
// first and a vector second, as llama.cpp's unary kernels do; that did not
// build. Each operation is checked against Go for the scalar and the
// vector kernel.
func TestLlamaStyleUnary(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "llama_unary.metal")
	const n = 64
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i-32) * 0.375
	}
	hardsigmoid := func(v float64) float64 { return math.Max(0, math.Min(1, v/6+0.5)) }
	for _, op := range []struct {
		code int16
		name string
		f    func(float64) float64
	}{
		{1, "relu", func(v float64) float64 { return math.Max(0, v) }},
		{2, "hardsigmoid", hardsigmoid},
		{3, "hardswish", func(v float64) float64 { return v * hardsigmoid(v) }},
	} {
		for _, k := range []struct {
			name  string
			width int
		}{{"kernel_unary_f32", 1}, {"kernel_unary_f32_4", 4}} {
			args := make([]byte, 4)
			binary.LittleEndian.PutUint32(args, n/uint32(k.width))
			dst := newBuf(t, dev, 4*n)
			p := pipe(t, lib, k.name, mtl.FunctionConstants{400: op.code})
			if err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{n / k.width, 1, 1},
				arg{bytes: args}, arg{buf: f32Buf(t, dev, x)}, arg{buf: dst}); err != nil {
				t.Fatal(err)
			}
			for i, got := range f32s(dst) {
				if want := op.f(float64(x[i])); math.Abs(float64(got)-want) > 1e-6 {
					t.Errorf("%s %s: y[%d] = %v, want %v", k.name, op.name, i, got, want)
				}
			}
		}
	}
}

// TestLlamaStyleUnrollHints runs testdata/llama_unroll.metal, whose loop
// hints take macros in their arguments (`#pragma unroll (MIN(NW, 4*NC))`,
// as llama.cpp's flash attention writes it, and `#pragma clang loop
// unroll_count(UNROLL_BY)`): Metal expands them, and the emulator, whose
// preprocessor printed them unexpanded, failed to build ("use of
// undeclared identifier 'MIN'").
func TestLlamaStyleUnrollHints(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "llama_unroll.metal")
	const ne00, rows = 16, 5
	x := make([]float32, rows*ne00)
	for i := range x {
		x[i] = float32((i*5)%17) - 8
	}
	for _, c := range []struct {
		name   string
		nc, nw int
	}{{"kernel_chunk_sums_4_3", 4, 3}, {"kernel_chunk_sums_2_8", 2, 8}} {
		args := make([]byte, 4)
		binary.LittleEndian.PutUint32(args, ne00)
		dst := newBuf(t, dev, 4*rows)
		if err := run(t, dev, pipe(t, lib, c.name, nil), [3]int{1, 1, 1}, [3]int{rows, 1, 1},
			arg{bytes: args}, arg{buf: f32Buf(t, dev, x)}, arg{buf: dst}); err != nil {
			t.Fatal(err)
		}
		for r, got := range f32s(dst) {
			var want float32
			for ch := 0; ch < c.nw; ch++ {
				var s float32
				for k := 0; k < c.nc; k++ {
					s += x[r*ne00+ch*c.nc+k]
				}
				want += float32(ch+1) * s
			}
			if got != want {
				t.Errorf("%s: dst[%d] = %v, want %v", c.name, r, got, want)
			}
		}
	}
	// Within a macro's arguments a pragma is refused, as clang refuses it.
	checkBuild(t, dev, "a loop hint within a macro's arguments",
		"#define F(x) x\nkernel void k(device float* x [[buffer(0)]]) {\n  x[0] = F(1 +\n#pragma unroll\n  2);\n}\n",
		mtl.CompileOptions{}, false, 3, "embedding a #pragma directive within macro arguments is not supported")
}
