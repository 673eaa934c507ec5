// Package vec holds the hot loops of the pure-Go CPU inference backend:
// matrix-vector / small-batch matrix products over bf16, f16 and f32 weights,
// attention dot/axpy, dtype conversions and a read-bandwidth probe.
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
)

// Implementation levels, in increasing order of capability.
const (
	levelGeneric = iota
	levelAVX2    // AVX2 + FMA + F16C
	levelAVX512  // AVX-512 F/BW/VL on top of levelAVX2
)

// level is the implementation in use. It is a variable, not a constant, so
// tests can run the generic path (and AVX2 on AVX-512 machines) too.
var level = detectLevel()

// Features reports which implementation is in use: "avx512",
// "avx2+fma+f16c" or "generic".
func Features() string {
	switch level {
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

// zeroDst handles k == 0, where every dot product is empty.
func zeroDst(dst []float32, ldd, m, n int) {
	for i := 0; i < m; i++ {
		clear(dst[i*ldd : i*ldd+n])
	}
}

// GemmBF16 computes dst[i*ldd+j] = sum_kk x[i*k+kk] * w[j*k+kk] for i in
// [0,m), j in [0,n), with w holding n rows of k bf16 values.
func GemmBF16(dst []float32, ldd int, x []float32, w []uint16, m, n, k int) {
	checkGemm(len(dst), ldd, len(x), len(w), m, n, k)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		zeroDst(dst, ldd, m, n)
		return
	}
	if level == levelGeneric || !gemmBF16Arch(dst, ldd, x, w, m, n, k) {
		gemmBF16Generic(dst, ldd, x, w, m, n, k)
	}
}

// GemmF16 is GemmBF16 for IEEE half-precision weights.
func GemmF16(dst []float32, ldd int, x []float32, w []uint16, m, n, k int) {
	checkGemm(len(dst), ldd, len(x), len(w), m, n, k)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		zeroDst(dst, ldd, m, n)
		return
	}
	if level == levelGeneric || !gemmF16Arch(dst, ldd, x, w, m, n, k) {
		gemmF16Generic(dst, ldd, x, w, m, n, k)
	}
}

// GemmF32 is GemmBF16 for f32 weights.
func GemmF32(dst []float32, ldd int, x []float32, w []float32, m, n, k int) {
	checkGemm(len(dst), ldd, len(x), len(w), m, n, k)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		zeroDst(dst, ldd, m, n)
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

// AxpyF32 computes y[i] += alpha*x[i] over len(x); y must be at least as long.
func AxpyF32(alpha float32, x, y []float32) {
	y = y[:len(x)]
	if level != levelGeneric && len(x) > 0 {
		axpyF32Arch(alpha, x, y)
		return
	}
	axpyF32Generic(alpha, x, y)
}

// BF16ToF32 converts len(src) bf16 values into dst.
func BF16ToF32(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	i := 0
	if level != levelGeneric {
		i = bf16ToF32Arch(dst, src)
	}
	for ; i < len(src); i++ {
		dst[i] = BF16ToFloat(src[i])
	}
}

// F16ToF32 converts len(src) f16 values into dst. NaNs keep sign and payload
// and come out quiet, as the F16C instruction does.
func F16ToF32(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	i := 0
	if level != levelGeneric {
		i = f16ToF32Arch(dst, src)
	}
	for ; i < len(src); i++ {
		dst[i] = F16ToFloat(src[i])
	}
}

// F32ToBF16 converts len(src) values to bf16, rounding to nearest even; NaNs
// stay NaN (made quiet so truncation cannot turn them into infinities).
func F32ToBF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	i := 0
	if level != levelGeneric {
		i = f32ToBF16Arch(dst, src)
	}
	for ; i < len(src); i++ {
		dst[i] = BF16(src[i])
	}
}

// F32ToF16 converts len(src) values to f16, rounding to nearest even, with
// gradual underflow to subnormals, overflow to infinity and quiet NaNs.
func F32ToF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	i := 0
	if level != levelGeneric {
		i = f32ToF16Arch(dst, src)
	}
	for ; i < len(src); i++ {
		dst[i] = F16(src[i])
	}
}

// BF16 rounds f to the nearest bf16 (ties to even); NaN stays a quiet NaN.
func BF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	// Adding 0x7fff plus the kept LSB rounds ties to even; a carry out of
	// the mantissa correctly bumps the exponent (up to infinity).
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// BF16ToFloat widens a bf16 value; it is exact.
func BF16ToFloat(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F16 rounds f to the nearest IEEE half (ties to even), producing subnormals,
// ±Inf on overflow and a quiet NaN (sign and top payload bits kept) for NaN.
func F16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // half exponent field
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Half subnormal: value = M * 2^(e-14-10) with M the 24-bit significand.
		if e < -10 {
			return sign // below half the smallest subnormal: rounds to zero
		}
		m := mant | 0x800000
		shift := uint(14 - e)
		h := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && h&1 == 1 {
			h++ // may carry into the smallest normal, which is the right encoding
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // a carry into the exponent is correct, up to 0x7c00 = Inf
	}
	return sign | uint16(h)
}

// F16ToFloat widens an IEEE half; it is exact, and NaNs come out quiet.
func F16ToFloat(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		if mant != 0 {
			return math.Float32frombits(sign | 0x7fc00000 | mant<<13)
		}
		return math.Float32frombits(sign | 0x7f800000)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: normalise the mantissa into an f32 normal.
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
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
