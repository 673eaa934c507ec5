package emu_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// TestMLXStyleIdioms runs kernels written the way MLX writes them (see
// testdata/mlx_idioms.metal) and checks their results against Go.
func TestMLXStyleIdioms(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "mlx_idioms.metal")

	t.Run("softmax", func(t *testing.T) {
		// Rows of 200 values over 64 threads of 4 reads: the last threads
		// read past the row, padded with Limits<AccT>::min.
		const rows, n = 3, 200
		x := make([]float32, rows*n)
		for i := range x {
			x[i] = float32((i*37)%23)*0.25 - 2
		}
		want := make([]float64, len(x))
		for r := 0; r < rows; r++ {
			row := x[r*n : (r+1)*n]
			m := math.Inf(-1)
			for _, v := range row {
				m = math.Max(m, float64(v))
			}
			var s float64
			for _, v := range row {
				s += math.Exp(float64(v) - m)
			}
			for i, v := range row {
				want[r*n+i] = math.Exp(float64(v)-m) / s
			}
		}
		for _, c := range []struct {
			kernel string
			half   bool
			tol    float64
		}{{"softmax_float32", false, 1e-6}, {"softmax_float16", true, 2e-3}} {
			var in, out mtl.Buffer
			if c.half {
				in, out = f16Buf(t, dev, x), newBuf(t, dev, 2*len(x))
			} else {
				in, out = f32Buf(t, dev, x), newBuf(t, dev, 4*len(x))
			}
			if err := run(t, dev, pipe(t, lib, c.kernel, nil), [3]int{rows, 1, 1}, [3]int{64, 1, 1},
				arg{buf: in}, arg{buf: out}, arg{bytes: u32Bytes(n)}); err != nil {
				t.Fatalf("%s: %v", c.kernel, err)
			}
			got := f32s(out)
			if c.half {
				got = f16s(out)
			}
			for i, w := range want {
				if math.Abs(float64(got[i])-w) > c.tol {
					t.Errorf("%s: out[%d] = %v, want %v", c.kernel, i, got[i], w)
					break
				}
			}
		}
	})

	t.Run("binary", func(t *testing.T) {
		const w, h = 8, 4
		a, b := make([]float32, w*h), make([]float32, w*h)
		ai, bi := make([]uint32, w*h), make([]uint32, w*h)
		for i := range a {
			a[i], b[i] = float32(i), float32(100-3*i)
			ai[i], bi[i] = uint32(int32(i-10)), uint32(int32(5-i))
		}
		for _, c := range []struct {
			kernel string
			scale  bool
			ints   bool
			want   func(i int) float32
		}{
			{"add_float32", false, false, func(i int) float32 { return a[i] + b[i] }},
			{"add_float32", true, false, func(i int) float32 { return (a[i] + b[i]) * 0.5 }},
			{"max_int32_float32", false, true, func(i int) float32 { return float32(max(i-10, 5-i)) }},
		} {
			x, y := f32Buf(t, dev, a), f32Buf(t, dev, b)
			if c.ints {
				x, y = u32Buf(t, dev, ai), u32Buf(t, dev, bi)
			}
			out := newBuf(t, dev, 4*w*h)
			args := []arg{{buf: x}, {buf: y}, {buf: out}}
			if c.scale {
				args = append(args, arg{bytes: u32Bytes(math.Float32bits(0.5))})
			}
			p := pipe(t, lib, c.kernel, mtl.FunctionConstants{10: c.scale})
			if err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{w, h, 1}, args...); err != nil {
				t.Fatalf("%s: %v", c.kernel, err)
			}
			for i, v := range f32s(out) {
				if v != c.want(i) {
					t.Errorf("%s (scale %v): c[%d] = %v, want %v", c.kernel, c.scale, i, v, c.want(i))
					break
				}
			}
		}

		// Given the constant, the argument is the kernel's, and left
		// unbound fails the dispatch as Metal's validation does.
		err := run(t, dev, pipe(t, lib, "add_float32", mtl.FunctionConstants{10: true}), [3]int{1, 1, 1}, [3]int{w, h, 1},
			arg{buf: f32Buf(t, dev, a)}, arg{buf: f32Buf(t, dev, b)}, arg{buf: newBuf(t, dev, 4*w*h)})
		wantExecError(t, err, "kernel add_float32: buffer(3) 'scale' is not bound")
	})

	t.Run("copy_g", func(t *testing.T) {
		// A 3x4 view, transposed, of a 4x3 half matrix.
		const r, cols = 4, 3
		src := make([]float32, r*cols)
		for i := range src {
			src[i] = float32(i)
		}
		strides := make([]byte, 16)
		binary.LittleEndian.PutUint64(strides, 1)
		binary.LittleEndian.PutUint64(strides[8:], cols)
		out := newBuf(t, dev, 4*r*cols)
		if err := run(t, dev, pipe(t, lib, "copy_g_half_float", nil), [3]int{1, 1, 1}, [3]int{r * cols, 1, 1},
			arg{buf: f16Buf(t, dev, src)}, arg{buf: out}, arg{bytes: u32Bytes(cols, r)}, arg{bytes: strides},
			arg{bytes: u32Bytes(0)}, arg{bytes: u32Bytes(2)}); err != nil {
			t.Fatal(err)
		}
		for i, v := range f32s(out) {
			if w := src[(i%r)*cols+i/r]; v != w {
				t.Errorf("dst[%d] = %v, want %v", i, v, w)
				break
			}
		}
	})

	t.Run("packed", func(t *testing.T) {
		const n = 8
		p3, h4 := make([]float32, 3*n), make([]float32, 4*n)
		for i := range p3 {
			p3[i] = float32(i)
		}
		for i := range h4 {
			h4[i] = float32(i) * 2
		}
		out := newBuf(t, dev, 16*n)
		if err := run(t, dev, pipe(t, lib, "packed_widen", nil), [3]int{1, 1, 1}, [3]int{n, 1, 1},
			arg{buf: f32Buf(t, dev, p3)}, arg{buf: out}, arg{buf: f16Buf(t, dev, h4)}); err != nil {
			t.Fatal(err)
		}
		got := f32s(out)
		for i := 0; i < n; i++ {
			for k := 0; k < 4; k++ {
				w := float32(4*i + k) // h4 / 2
				if k < 3 {
					w += p3[3*i+k]
				} else {
					w++
				}
				if got[4*i+k] != w {
					t.Errorf("out[%d][%d] = %v, want %v", i, k, got[4*i+k], w)
				}
			}
		}
	})

	t.Run("scan", func(t *testing.T) {
		const n = 96
		in := make([]uint32, n)
		for i := range in {
			in[i] = uint32(i%7 + 1)
		}
		out := newBuf(t, dev, 4*n)
		if err := run(t, dev, pipe(t, lib, "scan_exclusive", nil), [3]int{1, 1, 1}, [3]int{n, 1, 1},
			arg{buf: u32Buf(t, dev, in)}, arg{buf: out}, arg{tg: 128}); err != nil {
			t.Fatal(err)
		}
		var sum uint32
		for i, v := range u32s(out) {
			if v != sum {
				t.Errorf("out[%d] = %d, want %d", i, v, sum)
				break
			}
			sum += in[i]
		}
	})
}

// TestMLXFragments runs an 8x8 multiply written in the style of MLX's
// steel fragments (testdata/mlx_idioms.metal): each lane places its two
// elements by MLX's get_coord, which must agree with the emulator's
// thread_elements() mapping for the product to come out right.
func TestMLXFragments(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "mlx_idioms.metal")
	a, b, c := make([]float32, 64), make([]float32, 64), make([]float32, 64)
	for i := range a {
		a[i] = float32(i%9) - 4
		b[i] = float32((i*5)%7) - 3
		c[i] = float32(i % 3)
	}
	out := f32Buf(t, dev, c)
	if err := run(t, dev, pipe(t, lib, "frag_gemm_half", nil), [3]int{1, 1, 1}, [3]int{32, 1, 1},
		arg{buf: f16Buf(t, dev, a)}, arg{buf: f16Buf(t, dev, b)}, arg{buf: out}); err != nil {
		t.Fatal(err)
	}
	got := f32s(out)
	for r := 0; r < 8; r++ {
		for col := 0; col < 8; col++ {
			w := c[r*8+col]
			for k := 0; k < 8; k++ {
				w += a[r*8+k] * b[k*8+col]
			}
			if got[r*8+col] != w {
				t.Fatalf("C[%d][%d] = %v, want %v", r, col, got[r*8+col], w)
			}
		}
	}
}

// TestMLXAttentionVector runs one query's attention written after MLX's
// sdpa_vector (testdata/mlx_idioms.metal), with and without the mask its
// function constant brings in, against Go.
func TestMLXAttentionVector(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "mlx_idioms.metal")
	const d, n = 64, 11
	q, k, v := make([]float32, d), make([]float32, n*d), make([]float32, n*d)
	for i := range q {
		q[i] = float32(i%5)*0.25 - 0.5
	}
	for i := range k {
		k[i] = float32((i*7)%13)*0.125 - 0.75
		v[i] = float32((i*3)%17)*0.25 - 2
	}
	mask := make([]byte, 2*n) // stride 2: every other byte is the key's
	for i := 0; i < n; i++ {
		if i%3 != 1 {
			mask[2*i] = 1
		}
	}
	const scale = 0.125
	for _, masked := range []bool{false, true} {
		var scores []float64
		var idx []int
		for i := 0; i < n; i++ {
			if masked && mask[2*i] == 0 {
				continue
			}
			var s float64
			for j := 0; j < d; j++ {
				s += float64(scale*q[j]) * float64(k[i*d+j])
			}
			scores, idx = append(scores, s), append(idx, i)
		}
		m := math.Inf(-1)
		for _, s := range scores {
			m = math.Max(m, s)
		}
		want := make([]float64, d)
		var total float64
		for a, s := range scores {
			e := math.Exp(s - m)
			total += e
			for j := range want {
				want[j] += e * float64(v[idx[a]*d+j])
			}
		}
		out := newBuf(t, dev, 2*d)
		args := []arg{{buf: f16Buf(t, dev, q)}, {buf: f16Buf(t, dev, k)}, {buf: f16Buf(t, dev, v)}, {buf: out},
			{bytes: u32Bytes(n)}, {bytes: u32Bytes(math.Float32bits(scale))}}
		if masked {
			mb := newBuf(t, dev, len(mask))
			copy(mb.Contents(), mask)
			args = append(args, arg{buf: mb}, arg{bytes: u32Bytes(2)})
		}
		p := pipe(t, lib, "attn_vector_float16_64", mtl.FunctionConstants{20: masked})
		if err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{4 * 32, 1, 1}, args...); err != nil {
			t.Fatalf("masked %v: %v", masked, err)
		}
		for j, got := range f16s(out) {
			if w := want[j] / total; math.Abs(float64(got)-w) > 4e-3*math.Max(1, math.Abs(w)) {
				t.Errorf("masked %v: out[%d] = %v, want %v", masked, j, got, w)
				break
			}
		}
	}
}
