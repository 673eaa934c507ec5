package vec

import (
	"encoding/binary"
	"unsafe"

	"github.com/mtlbench/mtlbench/kernels/quant"
)

// The IQ formats on the CPU: a 32-value unit's int8 codes are built eight
// at a time in a 64-bit word (a grid row with its signs applied to every
// byte at once), then dotted with x in SIMD under the unit's scales. The
// values are quant.IQUnit's, which the tests hold them to.

const ones = 0x0101010101010101

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
	g, _ := quant.Grid(quant.IQ1_S)
	for i, row := range g {
		for j := 0; j < 8; j++ {
			v := 8 * int8(row>>(8*j))
			iq1Codes[0][i] |= uint64(uint8(v+1)) << (8 * j)
			iq1Codes[1][i] |= uint64(uint8(v-1)) << (8 * j)
		}
	}
}

// signed negates the bytes of grid row g (every value 1..127) that mask m
// marks: (v ^ 0xff) + 1 per byte, which never carries into the next.
func signed(g, m uint64) uint64 { return (g ^ m) + (m & ones) }

// iqUnit writes unit u of super-block blk of format t as 32 int8 codes
// into c and returns its halves' scales, as quant.IQUnit.
func iqUnit(t quant.Type, blk []byte, u int, c *[4]uint64) (s0, s1 float32) {
	d := func() float32 { return quant.HalfToF32(binary.LittleEndian.Uint16(blk)) }
	switch t {
	case quant.IQ2_XXS:
		g, _ := quant.Grid(t)
		idx, aux := binary.LittleEndian.Uint32(blk[2+8*u:]), binary.LittleEndian.Uint32(blk[6+8*u:])
		for l := 0; l < 4; l++ {
			c[l] = signed(g[idx>>(8*l)&255], signMask[quant.KSign(aux>>(7*l))])
		}
		s0 = d() * (0.5 + float32(aux>>28)) * 0.25
		return s0, s0
	case quant.IQ2_XS:
		g, _ := quant.Grid(t)
		for l := 0; l < 4; l++ {
			q := uint32(binary.LittleEndian.Uint16(blk[2+2*(4*u+l):]))
			c[l] = signed(g[q&511], signMask[quant.KSign(q>>9)])
		}
		sc, db := blk[66+u], d()
		return db * (0.5 + float32(sc&15)) * 0.25, db * (0.5 + float32(sc>>4)) * 0.25
	case quant.IQ2_S:
		g, _ := quant.Grid(t)
		qh := uint32(blk[66+u])
		for l := 0; l < 4; l++ {
			c[l] = signed(g[uint32(blk[2+4*u+l])|(qh>>(2*l)&3)<<8], signMask[blk[34+4*u+l]])
		}
		sc, db := blk[74+u], d()
		return db * (0.5 + float32(sc&15)) * 0.25, db * (0.5 + float32(sc>>4)) * 0.25
	case quant.IQ3_XXS:
		_, g := quant.Grid(t)
		aux := binary.LittleEndian.Uint32(blk[66+4*u:])
		q := blk[2+8*u:]
		for l := 0; l < 4; l++ {
			row := uint64(g[q[2*l]]) | uint64(g[q[2*l+1]])<<32
			c[l] = signed(row, signMask[quant.KSign(aux>>(7*l))])
		}
		s0 = d() * (0.5 + float32(aux>>28)) * 0.5
		return s0, s0
	case quant.IQ3_S:
		_, g := quant.Grid(t)
		qh := uint32(blk[66+u])
		q := blk[2+8*u:]
		for l := 0; l < 4; l++ {
			lo := g[uint32(q[2*l])|(qh>>(2*l)&1)<<8]
			hi := g[uint32(q[2*l+1])|(qh>>(2*l+1)&1)<<8]
			c[l] = signed(uint64(lo)|uint64(hi)<<32, signMask[blk[74+4*u+l]])
		}
		s0 = d() * float32(1+2*(blk[106+u/2]>>(4*(u%2))&15))
		return s0, s0
	case quant.IQ1_S:
		qh := uint32(binary.LittleEndian.Uint16(blk[34+2*u:]))
		neg := qh >> 15
		for l := 0; l < 4; l++ {
			c[l] = iq1Codes[neg][uint32(blk[2+4*u+l])|(qh>>(3*l)&7)<<8]
		}
		s0 = d() * float32(2*(qh>>12&7)+1) * quant.IQ1Delta
		return s0, s0
	case quant.IQ1_M:
		sc := [4]uint32{}
		for i := range sc {
			sc[i] = uint32(binary.LittleEndian.Uint16(blk[48+2*i:]))
		}
		db := quant.HalfToF32(uint16(sc[0]>>12 | sc[1]>>8&0x00f0 | sc[2]>>4&0x0f00 | sc[3]&0xf000))
		for l := 0; l < 4; l++ {
			nib := uint32(blk[32+2*u+l/2]) >> (4 * (l % 2)) & 15
			c[l] = iq1Codes[nib>>3][uint32(blk[4*u+l])|(nib&7)<<8]
		}
		s := sc[u/2] >> (6 * (u % 2))
		return db * float32(2*(s&7)+1) * quant.IQ1Delta, db * float32(2*(s>>3&7)+1) * quant.IQ1Delta
	}
	panic("vec: iqUnit of " + quant.Spec{Type: t}.String())
}

// iqDot: an IQ row's units as int8 codes (iqUnit) dotted with x in SIMD,
// each half's sum under its scale.
func iqDot(t quant.Type, row []byte, x []float32) float32 {
	nb := quant.Spec{Type: t}.BlockBytes()
	var c [4]uint64
	q := unsafe.Slice((*byte)(unsafe.Pointer(&c[0])), 32)
	var acc float32
	for b := 0; b < len(row)/nb; b++ {
		blk := row[b*nb : (b+1)*nb]
		for u := 0; u < 8; u++ {
			s0, s1 := iqUnit(t, blk, u, &c)
			xu := x[256*b+32*u : 256*b+32*u+32]
			if s0 == s1 {
				acc += s0 * DotI8F32(xu, q)
			} else {
				acc += s0*DotI8F32(xu[:16], q[:16]) + s1*DotI8F32(xu[16:], q[16:])
			}
		}
	}
	return acc
}
