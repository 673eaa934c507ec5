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

// The tables IQUnit builds its codes with, derived from the grids once.
var (
	// signMask[s] has byte j all ones where bit j of s is set.
	signMask [256]uint64
	// iq1Codes[neg][i] is IQ1 grid row i as codes 8·g + 1 (neg 0) or
	// 8·g − 1 (neg 1).
	iq1Codes [2][2048]uint64
)

func init() {
	for s := range signMask {
		for j := 0; j < 8; j++ {
			if s>>j&1 != 0 {
				signMask[s] |= 0xff << (8 * j)
			}
		}
	}
	for i, row := range iq1sGrid {
		for j := 0; j < 8; j++ {
			v := 8 * int8(row>>(8*j))
			iq1Codes[0][i] |= uint64(uint8(v+1)) << (8 * j)
			iq1Codes[1][i] |= uint64(uint8(v-1)) << (8 * j)
		}
	}
}

// signed negates the bytes of grid row g (every value 1..127) that mask m
// marks: (v ^ 0xff) + 1 per byte, which never carries into the next.
func signed(g, m uint64) uint64 { return (g ^ m) + (m & 0x0101010101010101) }

// IQUnit decodes unit u (values 32u..32u+31) of super-block blk of IQ
// format t into 32 int8 codes, eight to a word of c (value 8l+j in byte j
// of c[l]), and the scales of its halves: w = s0·code for values 0..15,
// s1·code above. Every product is exact in f32 and equal to ggml's
// dequantize_row_iq*. The codes are built a grid row at a time, its signs
// applied to every byte at once, so the CPU's dots use them as they are.
func IQUnit(t Type, blk []byte, u int, c *[4]uint64) (s0, s1 float32) {
	d := func() float32 { return HalfToF32(binary.LittleEndian.Uint16(blk)) }
	switch t {
	case IQ2_XXS:
		// 8 bytes a unit: four grid indices, four 7-bit sign masks under
		// a 4-bit scale.
		idx, aux := binary.LittleEndian.Uint32(blk[2+8*u:]), binary.LittleEndian.Uint32(blk[6+8*u:])
		for l := 0; l < 4; l++ {
			c[l] = signed(iq2xxsGrid[idx>>(8*l)&255], signMask[KSign(aux>>(7*l))])
		}
		s0 = d() * (0.5 + float32(aux>>28)) * 0.25
		return s0, s0
	case IQ2_XS:
		// four u16 a unit (9-bit index, 7-bit signs), a scale nibble a half
		for l := 0; l < 4; l++ {
			q := uint32(binary.LittleEndian.Uint16(blk[2+2*(4*u+l):]))
			c[l] = signed(iq2xsGrid[q&511], signMask[KSign(q>>9)])
		}
		return iq2Halves(d(), blk[66+u])
	case IQ2_S:
		// index bytes, sign bytes, two high index bits a row, scale nibbles
		qh := uint32(blk[66+u])
		for l := 0; l < 4; l++ {
			c[l] = signed(iq2sGrid[uint32(blk[2+4*u+l])|(qh>>(2*l)&3)<<8], signMask[blk[34+4*u+l]])
		}
		return iq2Halves(d(), blk[74+u])
	case IQ3_XXS:
		// eight 4-value rows a unit, then a word of four sign masks and
		// the scale
		aux := binary.LittleEndian.Uint32(blk[66+4*u:])
		q := blk[2+8*u:]
		for l := 0; l < 4; l++ {
			row := uint64(iq3xxsGrid[q[2*l]]) | uint64(iq3xxsGrid[q[2*l+1]])<<32
			c[l] = signed(row, signMask[KSign(aux>>(7*l))])
		}
		s0 = d() * (0.5 + float32(aux>>28)) * 0.5
		return s0, s0
	case IQ3_S:
		// eight 4-value rows with a ninth index bit each, a sign byte an
		// 8 values, a scale nibble a unit
		qh := uint32(blk[66+u])
		q := blk[2+8*u:]
		for l := 0; l < 4; l++ {
			lo := iq3sGrid[uint32(q[2*l])|(qh>>(2*l)&1)<<8]
			hi := iq3sGrid[uint32(q[2*l+1])|(qh>>(2*l+1)&1)<<8]
			c[l] = signed(uint64(lo)|uint64(hi)<<32, signMask[blk[74+4*u+l]])
		}
		s0 = d() * float32(1+2*(blk[106+u/2]>>(4*(u%2))&15))
		return s0, s0
	case IQ1_S:
		// four index bytes and a u16: 3 high bits a row, the scale, the
		// offset's sign
		qh := uint32(binary.LittleEndian.Uint16(blk[34+2*u:]))
		for l := 0; l < 4; l++ {
			c[l] = iq1Codes[qh>>15][uint32(blk[2+4*u+l])|(qh>>(3*l)&7)<<8]
		}
		s0 = d() * float32(2*(qh>>12&7)+1) * IQ1Delta
		return s0, s0
	case IQ1_M:
		// no d at the front: its 16 bits are the top nibbles of the four
		// scale words; a nibble a row (3 high index bits, the offset's
		// sign), a 3-bit scale a half
		var sc [4]uint32
		for i := range sc {
			sc[i] = uint32(binary.LittleEndian.Uint16(blk[48+2*i:]))
		}
		db := HalfToF32(uint16(sc[0]>>12 | sc[1]>>8&0x00f0 | sc[2]>>4&0x0f00 | sc[3]&0xf000))
		for l := 0; l < 4; l++ {
			nib := uint32(blk[32+2*u+l/2]) >> (4 * (l % 2)) & 15
			c[l] = iq1Codes[nib>>3][uint32(blk[4*u+l])|(nib&7)<<8]
		}
		s := sc[u/2] >> (6 * (u % 2))
		return db * float32(2*(s&7)+1) * IQ1Delta, db * float32(2*(s>>3&7)+1) * IQ1Delta
	}
	panic("quant: IQUnit of " + Spec{Type: t}.String())
}

// iq2Halves are the scales of an IQ2_XS or IQ2_S unit's halves: d·(0.5 +
// s)/4 for the low and high nibble of its scale byte.
func iq2Halves(d float32, sc byte) (s0, s1 float32) {
	return d * (0.5 + float32(sc&15)) * 0.25, d * (0.5 + float32(sc>>4)) * 0.25
}

// iqRow dequantizes a row of IQ super-blocks into dst.
func iqRow(t Type, row []byte, dst []float32) {
	nb := iqBytes[t]
	var c [4]uint64
	for b := 0; b < len(row)/nb; b++ {
		blk := row[b*nb : (b+1)*nb]
		for u := 0; u < 8; u++ {
			s0, s1 := IQUnit(t, blk, u, &c)
			y := dst[256*b+32*u:]
			for i := 0; i < 32; i++ {
				s := s0
				if i >= 16 {
					s = s1
				}
				y[i] = s * float32(int8(c[i/8]>>(8*(i%8))))
			}
		}
	}
}
