package quant

import (
	"encoding/binary"
	"math"
)

// HalfToF32 converts IEEE half bits to float32.
func HalfToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		v := float32(mant) / (1 << 24) // subnormal: mant·2⁻²⁴
		if sign != 0 {
			return -v
		}
		return v
	case exp == 31:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// BF16ToF32 converts bfloat16 bits to float32.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// float reads value i of a little-endian array of f.
func float(b []byte, i int, f Float) float32 {
	switch f {
	case F16:
		return HalfToF32(binary.LittleEndian.Uint16(b[2*i:]))
	case BF16:
		return BF16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

// Scale and Bias return group g of row r's affine scale and bias.
func (m *Matrix) Scale(r, g int) float32 {
	return float(m.Scales, r*m.Spec.Groups(m.K)+g, m.Spec.Scale)
}
func (m *Matrix) Bias(r, g int) float32 { return float(m.Biases, r*m.Spec.Groups(m.K)+g, m.Spec.Scale) }

// Row dequantizes row r into dst[:K]: the reference, written for clarity
// from the formats' definitions (ggml-quants.c's dequantize_row_*, mlx's
// affine dequantize).
func (m *Matrix) Row(r int, dst []float32) {
	rb := m.Spec.RowBytes(m.K)
	row := m.Data[r*rb : (r+1)*rb]
	if IsIQ(m.Spec.Type) {
		iqRow(m.Spec.Type, row, dst[:m.K])
		return
	}
	switch m.Spec.Type {
	case Affine:
		bits := m.Spec.Bits
		mask := uint64(1)<<bits - 1
		for i := 0; i < m.K; i++ {
			bit := i * bits
			// A value may straddle bytes (3, 5, 6 bits): read 2 bytes.
			var w uint64
			for j := 0; j < 2 && bit/8+j < len(row); j++ {
				w |= uint64(row[bit/8+j]) << (8 * j)
			}
			q := (w >> (bit % 8)) & mask
			g := i / m.Spec.Group
			dst[i] = m.Scale(r, g)*float32(q) + m.Bias(r, g)
		}
	case Q8_0:
		for b := 0; b < m.K/32; b++ {
			blk := row[b*34:]
			d := HalfToF32(binary.LittleEndian.Uint16(blk))
			for j := 0; j < 32; j++ {
				dst[b*32+j] = d * float32(int8(blk[2+j]))
			}
		}
	case Q4_0:
		for b := 0; b < m.K/32; b++ {
			blk := row[b*18:]
			d := HalfToF32(binary.LittleEndian.Uint16(blk))
			for j := 0; j < 16; j++ {
				dst[b*32+j] = d * float32(int(blk[2+j]&0xf)-8)
				dst[b*32+j+16] = d * float32(int(blk[2+j]>>4)-8)
			}
		}
	case Q4_K:
		for b := 0; b < m.K/256; b++ {
			blk := row[b*144:]
			d := HalfToF32(binary.LittleEndian.Uint16(blk))
			dmin := HalfToF32(binary.LittleEndian.Uint16(blk[2:]))
			sc, qs := blk[4:16], blk[16:144]
			y := dst[b*256:]
			for j := 0; j < 4; j++ { // 64 values: two sub-blocks of 32
				s1, m1 := ScaleMinK4(2*j, sc)
				s2, m2 := ScaleMinK4(2*j+1, sc)
				q := qs[32*j:]
				for l := 0; l < 32; l++ {
					y[64*j+l] = d*float32(s1)*float32(q[l]&0xf) - dmin*float32(m1)
					y[64*j+32+l] = d*float32(s2)*float32(q[l]>>4) - dmin*float32(m2)
				}
			}
		}
	case Q5_K, Q3_K, IQ4_XS, IQ4_NL, MXFP4:
		// As each transcodes (ggml.go), block by block: the values of its
		// narrowest form, which are ggml's exactly (TestTranscodersMatchGGML).
		tc := Transcoders[m.Spec.String()]
		for b := 0; b < m.K/tc.Values; b++ {
			// Only Q5_0's decoder can fail, which is not among these.
			blk, _ := tc.Block(row[b*tc.Bytes : (b+1)*tc.Bytes])
			blk.Row(0, dst[b*tc.Values:(b+1)*tc.Values])
		}
	case NVFP4:
		sc := row[m.K/2:]
		for i := 0; i < m.K; i++ {
			dst[i] = E4M3ToF32(sc[i/16]) * E2M1Values[row[i/2]>>(4*(i%2))&0xf]
		}
	case MXFP8:
		sc := row[m.K:]
		for i := 0; i < m.K; i++ {
			dst[i] = E4M3ToF32(row[i]) * E8M0ToF32(sc[i/32])
		}
	case Q6_K:
		for b := 0; b < m.K/256; b++ {
			blk := row[b*210:]
			ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
			d := HalfToF32(binary.LittleEndian.Uint16(blk[208:]))
			y := dst[b*256:]
			for n := 0; n < 2; n++ { // halves of 128
				l0, h0, s0, y0 := ql[64*n:], qh[32*n:], sc[8*n:], y[128*n:]
				for l := 0; l < 32; l++ {
					is := l / 16
					q1 := int(l0[l]&0xf|(h0[l]>>0&3)<<4) - 32
					q2 := int(l0[l+32]&0xf|(h0[l]>>2&3)<<4) - 32
					q3 := int(l0[l]>>4|(h0[l]>>4&3)<<4) - 32
					q4 := int(l0[l+32]>>4|(h0[l]>>6&3)<<4) - 32
					y0[l] = d * float32(int8(s0[is])) * float32(q1)
					y0[l+32] = d * float32(int8(s0[is+2])) * float32(q2)
					y0[l+64] = d * float32(int8(s0[is+4])) * float32(q3)
					y0[l+96] = d * float32(int8(s0[is+6])) * float32(q4)
				}
			}
		}
	case Q2_K:
		for b := 0; b < m.K/256; b++ {
			blk := row[b*84:]
			d := HalfToF32(binary.LittleEndian.Uint16(blk[80:]))
			dmin := HalfToF32(binary.LittleEndian.Uint16(blk[82:]))
			y := dst[b*256:]
			for i := 0; i < 16; i++ { // sub-blocks of 16
				dl, ml := d*float32(blk[i]&0xf), dmin*float32(blk[i]>>4)
				q, shift := Q2KValues(blk, i)
				for l := 0; l < 16; l++ {
					y[16*i+l] = dl*float32(q[l]>>shift&3) - ml
				}
			}
		}
	}
}

// Q2KValues locates sub-block i (of 16) of a Q2_K block: its 16 values are
// bits shift, shift+1 of q's bytes (ggml's dequantize_row_q2_K: each 32
// bytes of a half hold four 2-bit planes of two sub-blocks each).
func Q2KValues(blk []byte, i int) (q []byte, shift uint) {
	off := 16 + 32*(i/8) + 16*(i%2)
	return blk[off : off+16], uint(2 * (i % 8 / 2))
}

// ScaleMinK4 unpacks sub-block j's 6-bit scale and min from a Q4_K block's
// 12 scale bytes (ggml's get_scale_min_k4).
func ScaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// Dequantize returns the whole matrix as float32: for tests and fixtures,
// never on a backend's path.
func (m *Matrix) Dequantize() []float32 {
	out := make([]float32, m.Rows*m.K)
	for r := 0; r < m.Rows; r++ {
		m.Row(r, out[r*m.K:(r+1)*m.K])
	}
	return out
}
