// Package half converts between float32 and the two 16-bit float formats
// weights and activations come in: IEEE half (f16) and bfloat16 (bf16),
// both as uint16 bit patterns. Every conversion rounds to nearest even and
// keeps NaNs NaN; on amd64 with AVX2 and F16C the slice conversions run in
// assembly, elsewhere (and with the purego tag) in Go.
package half

import "math"

// accel is whether the slice conversions use the assembly kernels. It is a
// variable so tests can run the Go path too.
var accel = hasAccel()

// BF16ToF32 converts len(src) bf16 values into dst.
func BF16ToF32(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	i := 0
	if accel {
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
	if accel {
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
	if accel {
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
	if accel {
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
