// Package vec holds the hot loops of the pure-Go CPU inference backend:
// matrix-vector / small-batch matrix products over bf16, f16 and f32 weights
// and over packed quantized rows (QDots, qdot.go), dot products, softmax's
// numerators (ExpSub) and rows weighted by them (AxpyRows), the SwiGLU and GELU activations (SiLUMul, GELU) and a
// read-bandwidth probe. Half-precision conversions live in bridge/half.
//
// On amd64 the loops are Go assembly (an AVX-512 path, else AVX2+FMA+F16C),
// chosen once at start-up from golang.org/x/sys/cpu; everywhere else, on older
// CPUs and with the purego build tag, a portable pure-Go path is used.
//
// Conventions: bf16 and f16 values are uint16 bit patterns; weight matrices
// are row-major [n][k] (one output feature per row, like torch Linear weights);
// activations are f32 row-major [m][k]; all accumulation is f32. Every
// function is single-threaded: callers split output rows across goroutines.
package vec

import (
	"fmt"
	"math"

	"github.com/mtlbench/mtlbench/kernels"
)

// Implementation levels, in increasing order of capability.
const (
	levelGeneric = iota
	levelAVX2    // AVX2 + FMA + F16C
	levelAVX512  // AVX-512 F/BW/VL on top of levelAVX2
	// levelVNNI adds AVX-512 VNNI: affine 4- and 8-bit, Q4_0, Q4_K and Q6_K rows are dotted in
	// integers with activations made 24-bit fixed point (QDots).
	levelVNNI
)

// level is the implementation in use. It is a variable, not a constant, so
// tests can run the generic path (and AVX2 on AVX-512 machines) too.
var level = detectLevel()

// Features reports which implementation is in use: "avx512",
// "avx2+fma+f16c" or "generic".
func Features() string {
	switch level {
	case levelVNNI:
		return "avx512+vnni"
	case levelAVX512:
		return "avx512"
	case levelAVX2:
		return "avx2+fma+f16c"
	}
	return "generic"
}

// checkGemm panics on shapes the slices cannot hold: the assembly kernels
// do no bounds checks of their own.
func checkGemm(dstLen, ldd, xLen, wLen, m, n, k int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("vec: negative gemm shape m=%d n=%d k=%d", m, n, k))
	}
	if m == 0 || n == 0 {
		return
	}
	if m > 1 && ldd < n {
		panic(fmt.Sprintf("vec: gemm ldd %d < n %d", ldd, n))
	}
	if xLen < m*k || wLen < n*k || dstLen < (m-1)*ldd+n {
		panic(fmt.Sprintf("vec: gemm slices too short for m=%d n=%d k=%d ldd=%d (len x=%d w=%d dst=%d)",
			m, n, k, ldd, xLen, wLen, dstLen))
	}
}

// gemmTrivial checks a GEMM's shapes (checkGemm) and does the empty ones
// the one way for every weight dtype: no output (m or n 0), or outputs of
// empty dot products (k 0) zeroed. It reports whether nothing is left.
func gemmTrivial(dst []float32, ldd, xLen, wLen, m, n, k int) bool {
	checkGemm(len(dst), ldd, xLen, wLen, m, n, k)
	if m == 0 || n == 0 {
		return true
	}
	if k == 0 {
		for i := 0; i < m; i++ {
			clear(dst[i*ldd : i*ldd+n])
		}
		return true
	}
	return false
}

// GemmBF16 computes dst[i*ldd+j] = sum_kk x[i*k+kk] * w[j*k+kk] for i in
// [0,m), j in [0,n), with w holding n rows of k bf16 values.
func GemmBF16(dst []float32, ldd int, x []float32, w []uint16, m, n, k int) {
	if gemmTrivial(dst, ldd, len(x), len(w), m, n, k) {
		return
	}
	if level == levelGeneric || !gemmBF16Arch(dst, ldd, x, w, m, n, k) {
		gemmBF16Generic(dst, ldd, x, w, m, n, k)
	}
}

// GemmF16 is GemmBF16 for IEEE half-precision weights.
func GemmF16(dst []float32, ldd int, x []float32, w []uint16, m, n, k int) {
	if gemmTrivial(dst, ldd, len(x), len(w), m, n, k) {
		return
	}
	if level == levelGeneric || !gemmF16Arch(dst, ldd, x, w, m, n, k) {
		gemmF16Generic(dst, ldd, x, w, m, n, k)
	}
}

// GemmF32 is GemmBF16 for f32 weights.
func GemmF32(dst []float32, ldd int, x []float32, w []float32, m, n, k int) {
	if gemmTrivial(dst, ldd, len(x), len(w), m, n, k) {
		return
	}
	if level == levelGeneric || !gemmF32Arch(dst, ldd, x, w, m, n, k) {
		gemmF32Generic(dst, ldd, x, w, m, n, k)
	}
}

// DotF32 returns sum a[i]*b[i] over len(a); b must be at least as long.
func DotF32(a, b []float32) float32 {
	b = b[:len(a)]
	if level != levelGeneric && len(a) > 0 {
		return dotF32Arch(a, b)
	}
	return dotF32Generic(a, b)
}

// SumBytes reads every byte of buf with the widest loads available and
// returns a checksum (the sum of its little-endian 8-byte words plus the
// trailing bytes, mod 2^64). It exists to measure memory read bandwidth.
func SumBytes(buf []byte) uint64 {
	i := 0
	var s uint64
	if level != levelGeneric {
		i, s = sumBytesArch(buf)
	}
	return s + sumBytesGeneric(buf[i:])
}

// SiLUMul writes silu(gate)·up to out (the SwiGLU activation), as
// kernels.SiLUMul does, within a few float32 rounding steps: on amd64 e^x
// is a polynomial in registers, 8 values at a time, where math.Exp took
// most of the 50 µs of a 5632-wide row. out may alias gate or up.
func SiLUMul(out, gate, up []float32) {
	gate, up = gate[:len(out)], up[:len(out)]
	i := 0
	if level != levelGeneric {
		i = siluMulArch(out, gate, up)
	}
	kernels.SiLUMul(out[i:], gate[i:], up[i:])
}

// AxpyRows adds Σ_j p[j]·v[j·d:(j+1)·d] into acc[:d], row after row in j
// order (attention's probabilities times the value rows of a cache block):
// on amd64 acc stays in registers, 64 columns at a time, while the rows
// stream past.
func AxpyRows(acc, p, v []float32, d int) {
	acc, v = acc[:d], v[:len(p)*d]
	c := 0
	if level != levelGeneric {
		c = axpyRowsArch(acc, p, v, d)
	}
	for j, pj := range p {
		row := v[j*d : (j+1)*d]
		for i := c; i < d; i++ {
			acc[i] += pj * row[i]
		}
	}
}

// GELU writes GPT-2's GELU (the tanh approximation) of x to out, as
// kernels.GELU does: on amd64 as x / (1 + e^-2u), e^x SiLUMul's
// polynomial. out may alias x.
func GELU(out, x []float32) {
	x = x[:len(out)]
	i := 0
	if level != levelGeneric {
		i = geluArch(out, x)
	}
	kernels.GELU(out[i:], x[i:])
}

// ExpSub sets x[i] = e^(x[i]-m) and returns their sum: a softmax's
// numerators, for m the largest x (a NaN m makes every value and the sum
// NaN or 0). On amd64 e^x is SiLUMul's polynomial, within 2·2^-24 of
// math.Exp's value.
func ExpSub(x []float32, m float32) float32 {
	i, s := 0, float32(0)
	if level != levelGeneric {
		i, s = expSubArch(x, m)
	}
	for j := i; j < len(x); j++ {
		x[j] = float32(math.Exp(float64(x[j] - m)))
		s += x[j]
	}
	return s
}

// DotU8F32 returns sum x[i]*float(q[i]) over len(q) unsigned bytes (packed
// 8-bit weights, widened in registers); x must be at least as long.
func DotU8F32(x []float32, q []byte) float32 {
	n := len(q) &^ 7
	var s float32
	if level != levelGeneric && n > 0 {
		s = dotU8Arch(x[:n], q[:n])
	} else {
		s = dotU8Generic(x[:n], q[:n])
	}
	return s + dotU8Generic(x[n:len(q)], q[n:])
}

// DotI8F32 is DotU8F32 for signed bytes.
func DotI8F32(x []float32, q []byte) float32 {
	n := len(q) &^ 7
	var s float32
	if level != levelGeneric && n > 0 {
		s = dotI8Arch(x[:n], q[:n])
	} else {
		s = dotI8Generic(x[:n], q[:n])
	}
	return s + dotI8Generic(x[n:len(q)], q[n:])
}

func dotU8Generic(x []float32, q []byte) float32 {
	var s float32
	for i, v := range q {
		s += x[i] * float32(v)
	}
	return s
}

func dotI8Generic(x []float32, q []byte) float32 {
	var s float32
	for i, v := range q {
		s += x[i] * float32(int8(v))
	}
	return s
}

// DotNibF32 returns sum lo[i]*float(q[i]&15) + hi[i]*float(q[i]>>4) over
// len(q) bytes of packed 4-bit weights; lo and hi must be at least as long.
func DotNibF32(lo, hi []float32, q []byte) float32 {
	n := len(q) &^ 7
	var s float32
	if level != levelGeneric && n > 0 {
		s = dotNibArch(lo[:n], hi[:n], q[:n])
	} else {
		s = dotNibGeneric(lo[:n], hi[:n], q[:n])
	}
	return s + dotNibGeneric(lo[n:len(q)], hi[n:len(q)], q[n:])
}

func dotNibGeneric(lo, hi []float32, q []byte) float32 {
	var s float32
	for i, v := range q {
		s += lo[i]*float32(v&15) + hi[i]*float32(v>>4)
	}
	return s
}
