package quant

import (
	"encoding/binary"
	"math/bits"
)

// The IQ formats (ggml's IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and
// IQ1_M) pack 256-value super-blocks as indices into grids of 8 or 4
// values (iqgrid.go), with sign bits and a scale per 32 or 16 values. Each
// 32-value unit is, exactly, two 16-value halves of int8 codes under one
// float scale each: w = scale·code. That is how every backend reads them
// (docs/quantization.md, "IQ formats").

// iqBytes are the bytes of one super-block of each IQ format.
var iqBytes = map[Type]int{IQ2_XXS: 66, IQ2_XS: 74, IQ2_S: 82, IQ3_XXS: 98, IQ3_S: 110, IQ1_S: 50, IQ1_M: 56}

// IsIQ reports whether t is one of the grid formats.
func IsIQ(t Type) bool { return iqBytes[t] != 0 }

// KSign is sign mask i of IQ2_XXS, IQ2_XS and IQ3_XXS: seven stored sign
// bits and an eighth that makes the count of minus signs even (ggml's
// ksigns_iq2xs table).
func KSign(i uint32) uint8 {
	i &= 127
	return uint8(i) | uint8(bits.OnesCount32(i)&1)<<7
}

// IQ1Delta is the offset IQ1_S and IQ1_M add to every grid value (±1/8):
// as codes in eighths, 8·g ± 1.
const IQ1Delta = 0.125

// IQUnit decodes unit u (values 32u..32u+31) of super-block blk of IQ format
// t: w[j] = s0·codes[j] for j < 16, s1·codes[j] above. Every product is
// exact in f32, and equal to ggml's dequantize_row_iq*.
func IQUnit(t Type, blk []byte, u int, codes *[32]int8) (s0, s1 float32) {
	u16 := func(o int) uint32 { return uint32(binary.LittleEndian.Uint16(blk[o:])) }
	u32 := func(o int) uint32 { return binary.LittleEndian.Uint32(blk[o:]) }
	grid8 := func(g uint64, sign uint8, dst []int8) {
		for j := 0; j < 8; j++ {
			v := int8(g >> (8 * j))
			if sign>>j&1 != 0 {
				v = -v
			}
			dst[j] = v
		}
	}
	grid4 := func(g uint32, sign uint8, dst []int8) {
		for j := 0; j < 4; j++ {
			v := int8(g >> (8 * j))
			if sign>>j&1 != 0 {
				v = -v
			}
			dst[j] = v
		}
	}
	switch t {
	case IQ2_XXS:
		d := HalfToF32(uint16(u16(0)))
		idx, aux := u32(2+8*u), u32(6+8*u)
		for l := 0; l < 4; l++ {
			grid8(iq2xxsGrid[idx>>(8*l)&255], KSign(aux>>(7*l)), codes[8*l:])
		}
		s0 = d * (0.5 + float32(aux>>28)) * 0.25
		return s0, s0
	case IQ2_XS:
		d := HalfToF32(uint16(u16(0)))
		for l := 0; l < 4; l++ {
			q := u16(2 + 2*(4*u+l))
			grid8(iq2xsGrid[q&511], KSign(q>>9), codes[8*l:])
		}
		sc := blk[66+u]
		return d * (0.5 + float32(sc&15)) * 0.25, d * (0.5 + float32(sc>>4)) * 0.25
	case IQ2_S:
		d := HalfToF32(uint16(u16(0)))
		qh := uint32(blk[66+u])
		for l := 0; l < 4; l++ {
			i := uint32(blk[2+4*u+l]) | (qh>>(2*l)&3)<<8
			grid8(iq2sGrid[i], blk[34+4*u+l], codes[8*l:])
		}
		sc := blk[74+u]
		return d * (0.5 + float32(sc&15)) * 0.25, d * (0.5 + float32(sc>>4)) * 0.25
	case IQ3_XXS:
		d := HalfToF32(uint16(u16(0)))
		aux := u32(66 + 4*u)
		for l := 0; l < 4; l++ {
			sign := KSign(aux >> (7 * l))
			grid4(iq3xxsGrid[blk[2+8*u+2*l]], sign, codes[8*l:])
			grid4(iq3xxsGrid[blk[2+8*u+2*l+1]], sign>>4, codes[8*l+4:])
		}
		s0 = d * (0.5 + float32(aux>>28)) * 0.5
		return s0, s0
	case IQ3_S:
		d := HalfToF32(uint16(u16(0)))
		qh := uint32(blk[66+u])
		for l := 0; l < 8; l++ {
			i := uint32(blk[2+8*u+l]) | (qh>>l&1)<<8
			grid4(iq3sGrid[i], blk[74+4*u+l/2]>>(4*(l%2)), codes[4*l:])
		}
		s0 = d * float32(1+2*(blk[106+u/2]>>(4*(u%2))&15))
		return s0, s0
	case IQ1_S:
		d := HalfToF32(uint16(u16(0)))
		qh := u16(34 + 2*u)
		iq1Codes(codes[:], blk[2+4*u:], func(l int) uint32 { return qh >> (3 * l) & 7 }, func(int) bool { return qh&0x8000 != 0 })
		s0 = d * float32(2*(qh>>12&7)+1) * IQ1Delta
		return s0, s0
	case IQ1_M:
		sc := [4]uint32{u16(48), u16(50), u16(52), u16(54)}
		d := HalfToF32(uint16(sc[0]>>12 | sc[1]>>8&0x00f0 | sc[2]>>4&0x0f00 | sc[3]&0xf000))
		nib := func(l int) uint32 { return uint32(blk[32+2*u+l/2]) >> (4 * (l % 2)) & 15 }
		iq1Codes(codes[:], blk[4*u:], func(l int) uint32 { return nib(l) & 7 }, func(l int) bool { return nib(l)&8 != 0 })
		s := sc[u/2] >> (6 * (u % 2))
		return d * float32(2*(s&7)+1) * IQ1Delta, d * float32(2*(s>>3&7)+1) * IQ1Delta
	}
	panic("quant: IQUnit of " + Spec{Type: t}.String())
}

// iq1Codes fills 32 codes from four grid rows of IQ1: row l's index is
// qs[l] with high bits hi(l), its values 8·g + 1, or 8·g − 1 where neg(l).
func iq1Codes(codes []int8, qs []byte, hi func(int) uint32, neg func(int) bool) {
	for l := 0; l < 4; l++ {
		g := iq1sGrid[uint32(qs[l])|hi(l)<<8]
		off := int8(1)
		if neg(l) {
			off = -1
		}
		for j := 0; j < 8; j++ {
			codes[8*l+j] = 8*int8(g>>(8*j)) + off
		}
	}
}

// iqRow dequantizes a row of IQ super-blocks into dst.
func iqRow(t Type, row []byte, dst []float32) {
	nb := iqBytes[t]
	var codes [32]int8
	for b := 0; b < len(row)/nb; b++ {
		blk := row[b*nb : (b+1)*nb]
		for u := 0; u < 8; u++ {
			s0, s1 := IQUnit(t, blk, u, &codes)
			y := dst[256*b+32*u:]
			for j := 0; j < 16; j++ {
				y[j] = s0 * float32(codes[j])
				y[16+j] = s1 * float32(codes[16+j])
			}
		}
	}
}

// Grid is IQ format t's grid: rows of 8 values a word (IQ2, IQ1) or of 4
// (IQ3), value j in byte j; IQ1_M shares IQ1_S's. For backends that decode
// the formats their own way; the slices must not be written.
func Grid(t Type) (rows8 []uint64, rows4 []uint32) {
	switch t {
	case IQ2_XXS:
		return iq2xxsGrid[:], nil
	case IQ2_XS:
		return iq2xsGrid[:], nil
	case IQ2_S:
		return iq2sGrid[:], nil
	case IQ3_XXS:
		return nil, iq3xxsGrid[:]
	case IQ3_S:
		return nil, iq3sGrid[:]
	case IQ1_S, IQ1_M:
		return iq1sGrid[:], nil
	}
	return nil, nil
}
