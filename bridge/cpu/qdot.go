package cpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/mtlbench/mtlbench/bridge/cpu/vec"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// qdot is row r of w dotted with x, the row's blocks dequantized in
// registers as they are read. sums holds x's sums over every 16 values, so
// an affine bias, a K-quant min or a zero point costs one multiply per
// block instead of one per value.
func qdot(w *quant.Matrix, r int, x, sums, xd []float32) float32 {
	rb := w.Spec.RowBytes(w.K)
	row := w.Data[r*rb : (r+1)*rb]
	switch w.Spec.Type {
	case quant.Affine:
		return affineDot(w, r, row, x, sums, xd)
	case quant.Q8_0:
		var acc float32
		for b := 0; b < len(row)/34; b++ {
			blk := row[b*34 : b*34+34]
			xb := x[b*32 : b*32+32]
			acc += quant.HalfToF32(binary.LittleEndian.Uint16(blk)) * vec.DotI8F32(xb, blk[2:34])
		}
		return acc
	case quant.Q4_0:
		var acc float32
		for b := 0; b < len(row)/18; b++ {
			blk := row[b*18 : b*18+18]
			xb := x[b*32 : b*32+32]
			s0 := vec.DotNibF32(xb[:16], xb[16:], blk[2:18])
			acc += quant.HalfToF32(binary.LittleEndian.Uint16(blk)) * (s0 - 8*(sums[2*b]+sums[2*b+1]))
		}
		return acc
	case quant.Q4_K:
		var acc float32
		for b := 0; b < len(row)/144; b++ {
			blk := row[b*144 : b*144+144]
			d := quant.HalfToF32(binary.LittleEndian.Uint16(blk))
			dmin := quant.HalfToF32(binary.LittleEndian.Uint16(blk[2:]))
			sc, qs := blk[4:16], blk[16:144]
			xb, sb := x[b*256:b*256+256], sums[b*16:b*16+16]
			for j := 0; j < 4; j++ {
				s1, m1 := quant.ScaleMinK4(2*j, sc)
				s2, m2 := quant.ScaleMinK4(2*j+1, sc)
				q := qs[32*j : 32*j+32]
				xl, xh := xb[64*j:64*j+32], xb[64*j+32:64*j+64]
				lo := vec.DotNibF32(xl, zeros[:], q)
				hi := vec.DotNibF32(zeros[:], xh, q)
				acc += d*(float32(s1)*lo+float32(s2)*hi) -
					dmin*(float32(m1)*(sb[4*j]+sb[4*j+1])+float32(m2)*(sb[4*j+2]+sb[4*j+3]))
			}
		}
		return acc
	case quant.Q6_K:
		var acc float32
		for b := 0; b < len(row)/210; b++ {
			blk := row[b*210 : b*210+210]
			d := quant.HalfToF32(binary.LittleEndian.Uint16(blk[208:]))
			xb, sb := x[b*256:b*256+256], sums[b*16:b*16+16]
			var part [16]float32 // per 16 values: Σ x·q6
			for n := 0; n < 2; n++ {
				ql, qh, x0 := blk[64*n:64*n+64], blk[128+32*n:128+32*n+32], xb[128*n:128*n+128]
				p := part[8*n : 8*n+8]
				for l := 0; l < 32; l++ {
					h := qh[l]
					is := l >> 4
					p[is] += x0[l] * float32(ql[l]&15|(h&3)<<4)
					p[is+2] += x0[l+32] * float32(ql[l+32]&15|(h>>2&3)<<4)
					p[is+4] += x0[l+64] * float32(ql[l]>>4|(h>>4&3)<<4)
					p[is+6] += x0[l+96] * float32(ql[l+32]>>4|(h>>6&3)<<4)
				}
			}
			var s float32
			for i, v := range part {
				s += float32(int8(blk[192+i])) * (v - 32*sb[i])
			}
			acc += d * s
		}
		return acc
	}
	return float32(math.NaN())
}

// affineDot: per group, scale·Σx·q + bias·Σx.
func affineDot(w *quant.Matrix, r int, row []byte, x, sums, xd []float32) float32 {
	G, bits := w.Spec.Group, w.Spec.Bits
	groups := w.K / G
	so := r * groups
	var acc float32
	for g := 0; g < groups; g++ {
		xg := x[g*G : g*G+G]
		var dot float32
		switch bits {
		case 4:
			// value 2j is byte j's low nibble, 2j+1 its high one: the
			// deinterleaved row pairs them with the even and odd values.
			p := row[g*G/2 : g*G/2+G/2]
			dot = vec.DotNibF32(xd[g*G/2:], xd[w.K/2+g*G/2:], p)
		case 8:
			p := row[g*G : g*G+G]
			dot = vec.DotU8F32(xg, p)
		case 2:
			p := row[g*G/4 : g*G/4+G/4]
			for j, c := range p {
				xv := xg[4*j : 4*j+4]
				dot += xv[0]*float32(c&3) + xv[1]*float32(c>>2&3) + xv[2]*float32(c>>4&3) + xv[3]*float32(c>>6)
			}
		default: // 3, 5, 6 bits: values straddle bytes
			mask := uint32(1)<<bits - 1
			base := g * G * bits
			for i := 0; i < G; i++ {
				bit := base + i*bits
				v := uint32(row[bit/8])
				if bit/8+1 < len(row) {
					v |= uint32(row[bit/8+1]) << 8
				}
				dot += xg[i] * float32(v>>(bit%8)&mask)
			}
		}
		var sx float32
		for _, s := range sums[g*G/16 : (g+1)*G/16] {
			sx += s
		}
		acc += scaleAt(w.Scales, so+g, w.Spec.Scale)*dot + scaleAt(w.Biases, so+g, w.Spec.Scale)*sx
	}
	return acc
}

// Byte to float tables: a table load instead of an integer conversion per
// value (the conversions, not memory, bound these loops on x86).
var (
	nib [256][2]float32 // low and high nibble
	u8f [256]float32
	i8f [256]float32
)

func init() {
	for i := range 256 {
		nib[i] = [2]float32{float32(i & 15), float32(i >> 4)}
		u8f[i] = float32(i)
		i8f[i] = float32(int8(i))
	}
}

// zeros stands for the half of a nibble dot a Q4_K sub-block does not use.
var zeros [32]float32
