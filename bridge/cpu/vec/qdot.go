package vec

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/mtlbench/mtlbench/kernels/quant"
)

// Dots of packed weight rows with float32 activations (docs/quantization.md):
// each block is widened and scaled in registers, never dequantized into
// memory. An activation row is first prepared once per op (QPrepare):
// sums over every 16 values turn an affine bias or a K-quant min into one
// multiply per block, and the row kernels read the per-format sums they
// need from the same buffer.

// QPrepLen is the floats QPrepare writes for one activation row of k values
// that rows of format s are dotted with.
func QPrepLen(s quant.Spec, k int) int {
	if qInt(s) {
		return qIntSums(s, k) + qIntUnits(s, k)*qIntUnitFloats(s)
	}
	n := k / 16 // sums of every 16 values
	if s.Type == quant.Affine && s.Bits == 4 {
		n += k // the row deinterleaved: even values, then odd ones
	}
	return n + qExtraLen(s, k)
}

// qExtraLen is the row kernels' own sums, after the generic ones: 8 lane
// sums per affine group or Q4_0 block, Q4_K's sums of every 32 values,
// Q6_K's sums of every 16 values times 32.
func qExtraLen(s quant.Spec, k int) int {
	switch s.Type {
	case quant.Affine:
		return 8 * k / s.Group
	case quant.Q4_0:
		return k / 4
	case quant.Q4_K:
		return k / 32
	case quant.Q6_K:
		return k / 16
	}
	return 0
}

// QPrepare writes x's (one row of k values) sums for rows of format s into
// p, which is QPrepLen(s, k) long.
func QPrepare(p, x []float32, s quant.Spec) {
	k := len(x)
	if qInt(s) {
		qPrepareInt(p[:QPrepLen(s, k)], x, s)
		return
	}
	p = p[:QPrepLen(s, k)]
	sums := p[:k/16]
	for i := range sums {
		var t float32
		for _, v := range x[16*i : 16*i+16] {
			t += v
		}
		sums[i] = t
	}
	rest := p[k/16:]
	if s.Type == quant.Affine && s.Bits == 4 {
		ev, od := rest[:k/2], rest[k/2:k]
		for j := range ev {
			ev[j], od[j] = x[2*j], x[2*j+1]
		}
		rest = rest[k:]
	}
	switch s.Type {
	case quant.Affine:
		laneSums(rest, x, s.Group)
	case quant.Q4_0:
		laneSums(rest, x, 32)
	case quant.Q4_K:
		for i := range rest {
			rest[i] = sums[2*i] + sums[2*i+1]
		}
	case quant.Q6_K:
		for i := range rest {
			rest[i] = 32 * sums[i]
		}
	}
}

// laneSums: per block of n values, 8 partial sums (lane j sums the values
// j, j+8, ...), which add up to the block's sum in a vector register.
func laneSums(dst, x []float32, n int) {
	for b := 0; b < len(x)/n; b++ {
		l := dst[8*b : 8*b+8]
		clear(l)
		for i, v := range x[b*n : (b+1)*n] {
			l[i%8] += v
		}
	}
}

// FasterWidened reports whether rows of format s dot faster widened to the
// next width of quant.Widenings: affine rows of 2, 3, 5 and 6 bits run the
// generic Go dots, 4- and 8-bit ones SIMD kernels, about ten times faster a
// value (BenchmarkQDots).
func FasterWidened(s quant.Spec) bool {
	return s.Type == quant.Affine && s.Bits != 4 && s.Bits != 8
}

// QDots sets dst[j-lo] to row j of w dotted with x, for j in [lo, hi); p is
// QPrepare's for x and w's format.
func QDots(dst []float32, w *quant.Matrix, lo, hi int, x, p []float32) {
	if hi <= lo {
		return
	}
	dst = dst[:hi-lo]
	if level != levelGeneric && qdotsArch(dst, w, lo, hi, x, p) {
		return
	}
	k := w.K
	sums := p[:k/16]
	var xd []float32
	if w.Spec.Type == quant.Affine && w.Spec.Bits == 4 {
		xd = p[k/16 : k/16+k]
	}
	for j := lo; j < hi; j++ {
		dst[j-lo] = qdotGeneric(w, j, x, sums, xd)
	}
}

// qdotGeneric is row r of w dotted with x, block by block. sums holds x's
// sums over every 16 values and xd x deinterleaved (affine 4-bit).
func qdotGeneric(w *quant.Matrix, r int, x, sums, xd []float32) float32 {
	rb := w.Spec.RowBytes(w.K)
	row := w.Data[r*rb : (r+1)*rb]
	if quant.IsIQ(w.Spec.Type) {
		return iqDot(w.Spec.Type, row, x)
	}
	switch w.Spec.Type {
	case quant.Affine:
		return affineDot(w, r, row, x, sums, xd)
	case quant.Q8_0:
		var acc float32
		for b := 0; b < len(row)/34; b++ {
			blk := row[b*34 : b*34+34]
			xb := x[b*32 : b*32+32]
			acc += quant.HalfToF32(binary.LittleEndian.Uint16(blk)) * DotI8F32(xb, blk[2:34])
		}
		return acc
	case quant.Q4_0:
		var acc float32
		for b := 0; b < len(row)/18; b++ {
			blk := row[b*18 : b*18+18]
			xb := x[b*32 : b*32+32]
			s0 := DotNibF32(xb[:16], xb[16:], blk[2:18])
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
				lo := DotNibF32(xl, zeros[:], q)
				hi := DotNibF32(zeros[:], xh, q)
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
	case quant.NVFP4:
		// Each group's E2M1 codes doubled are int8 (0..±12), dotted in
		// SIMD under half its E4M3 scale.
		var acc float32
		var q [16]byte
		sc := row[w.K/2:]
		for g := 0; g < w.K/16; g++ {
			for j, c := range row[8*g : 8*g+8] {
				q[2*j], q[2*j+1] = byte(quant.MXFP4Levels[c&0xf]), byte(quant.MXFP4Levels[c>>4])
			}
			acc += quant.E4M3ToF32(sc[g]) / 2 * DotI8F32(x[16*g:16*g+16], q[:])
		}
		return acc
	case quant.MXFP8:
		var acc float32
		var v [32]float32
		sc := row[w.K:]
		for b := 0; b < w.K/32; b++ {
			for j, c := range row[32*b : 32*b+32] {
				v[j] = e4m3Values[c]
			}
			acc += quant.E8M0ToF32(sc[b]) * DotF32(x[b*32:b*32+32], v[:])
		}
		return acc
	case quant.Q2_K:
		// A super-block's values times their sub-block's scale, sc·q ≤ 45,
		// as int8 bytes (a 2-bit plane of 8 bytes masked and multiplied at
		// once: no product carries into the next byte), dotted with x in
		// one SIMD pass; the mins meet x's sums of every 16 values.
		var acc float32
		var e [256]byte
		for b := 0; b < len(row)/84; b++ {
			blk := row[b*84 : b*84+84]
			d := quant.HalfToF32(binary.LittleEndian.Uint16(blk[80:]))
			dmin := quant.HalfToF32(binary.LittleEndian.Uint16(blk[82:]))
			var sm float32
			for i := 0; i < 16; i++ {
				q, shift := quant.Q2KValues(blk, i)
				sc := uint64(blk[i] & 0xf)
				for h := 0; h < 16; h += 8 {
					w := binary.LittleEndian.Uint64(q[h:])
					binary.LittleEndian.PutUint64(e[16*i+h:], (w>>shift&0x0303030303030303)*sc)
				}
				sm += float32(blk[i]>>4) * sums[b*16+i]
			}
			acc += d*DotI8F32(x[b*256:b*256+256], e[:]) - dmin*sm
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
			dot = DotNibF32(xd[g*G/2:], xd[w.K/2+g*G/2:], p)
		case 8:
			p := row[g*G : g*G+G]
			dot = DotU8F32(xg, p)
		case 2:
			p := row[g*G/4 : g*G/4+G/4]
			for j, c := range p {
				xv := xg[4*j : 4*j+4]
				dot += xv[0]*float32(c&3) + xv[1]*float32(c>>2&3) + xv[2]*float32(c>>4&3) + xv[3]*float32(c>>6)
			}
		default: // 3, 5, 6 bits: codes straddle bytes; unpacked to bytes, then the SIMD dot
			var codes [128]byte
			unpackCodes(codes[:G], row[g*G*bits/8:(g+1)*G*bits/8], bits)
			dot = DotU8F32(xg, codes[:G])
		}
		var sx float32
		for _, s := range sums[g*G/16 : (g+1)*G/16] {
			sx += s
		}
		acc += scaleAt(w.Scales, so+g, w.Spec.Scale)*dot + scaleAt(w.Biases, so+g, w.Spec.Scale)*sx
	}
	return acc
}

// unpackCodes writes the len(dst) codes of bits bits (3, 5 or 6) packed
// in src, code i at bit i·bits of its little-endian stream, one a byte: 8
// codes at a time from bits bytes read as one word.
func unpackCodes(dst, src []byte, bits int) {
	mask := uint64(1)<<bits - 1
	n := len(dst) / 8
	for c := 0; c < n; c++ {
		// A chunk's bits bytes, read as 8 where the row has them.
		o := c * bits
		var w uint64
		if o+8 <= len(src) {
			w = binary.LittleEndian.Uint64(src[o:])
		} else {
			for j, b := range src[o : o+bits] {
				w |= uint64(b) << (8 * j)
			}
		}
		d := (*[8]byte)(dst[8*c:])
		d[0] = byte(w & mask)
		d[1] = byte(w >> bits & mask)
		d[2] = byte(w >> (2 * bits) & mask)
		d[3] = byte(w >> (3 * bits) & mask)
		d[4] = byte(w >> (4 * bits) & mask)
		d[5] = byte(w >> (5 * bits) & mask)
		d[6] = byte(w >> (6 * bits) & mask)
		d[7] = byte(w >> (7 * bits) & mask)
	}
}

// scaleAt reads value i of a scale or bias array.
func scaleAt(b []byte, i int, f quant.Float) float32 {
	switch f {
	case quant.BF16:
		return math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
	case quant.F16:
		return quant.HalfToF32(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

// e4m3Values are the 256 E4M3 bytes' values (quant.E4M3ToF32).
var e4m3Values = func() (v [256]float32) {
	for i := range v {
		v[i] = quant.E4M3ToF32(byte(i))
	}
	return v
}()

// zeros stands for the half of a nibble dot a Q4_K sub-block does not use.
var zeros [32]float32

// Integer dots (levelVNNI): affine 4- and 8-bit, Q4_0, Q4_K and Q6_K rows
// are dotted with x made fixed point per block of 32 values, d = max|x|/M and
// xq = round(x/d), so each value is off by at most d/2 (docs/quantization.md).
// xq is stored as three int8 planes, p2 = (xq+32896)>>16, then of the rest
// r = xq-65536·p2, p1 = (r+128)>>8 and p0 = r-256·p1: VPDPBUSD multiplies
// the unsigned weights with each, and ((Σq·p2)·256 + Σq·p1)·256 + Σq·p0 =
// Σq·xq is exact in int32 as long as a lane's |Σq·xq| stays below 2^31:
// M is 2^23 less a margin (the planes' reach) where a lane sums 8 codes
// below 16 or 4 below 64, and 2^21 less one for 4 codes below 256 (8-bit
// affine). The biases, mins and offsets meet float sums of x.
const qIntBlock = 32

// qIntMax is M for rows of format s (qdot.go's comment).
func qIntMax(s quant.Spec) float32 {
	if s.Type == quant.Affine && s.Bits == 8 {
		return 2105000 // 4·255·M < 2^31
	}
	return 8355000 // p2 ≤ 127 with room for x/d's float rounding
}

// qInt reports whether rows of format s are dotted in integers.
func qInt(s quant.Spec) bool {
	if level < levelVNNI {
		return false
	}
	switch s.Type {
	case quant.Affine:
		return s.Bits == 4 || s.Bits == 8
	case quant.Q4_K, quant.Q6_K, quant.Q4_0:
		return true
	}
	return false
}

// Layouts of the prepared x, per unit (one 64-byte load of a weight row,
// whose lanes the planes match; qgen.go): 8-bit affine, 4-bit affine
// (byte j's nibbles are values 2j and 2j+1) and Q4_K (a 32-byte chunk's
// low nibbles are one sub-block of 32, its high ones the next).
const (
	qlA8 = iota
	qlA4
	qlK4
	qlQ40 // 4 blocks' 16 bytes, byte j's nibbles values j and j+16 of its block
)

func qLayout(s quant.Spec) int {
	switch {
	case s.Type == quant.Q4_K:
		return qlK4
	case s.Type == quant.Q4_0:
		return qlQ40
	case s.Bits == 4:
		return qlA4
	}
	return qlA8
}

// qlUnit is a layout's values a unit, qlBytes its prepared bytes: the int8
// planes (three bytes a value) and 16 lanes' d for each accumulator (Q4_K
// keeps the low and high nibbles' sums apart: their sub-blocks have
// scales of their own; Q4_0 adds each lane's 2·Σx of its block, which
// takes the codes' offset of 8 off).
func qlUnit(l int) int { return [...]int{64, 128, 128, 128}[l] }
func qlBytes(l int) int {
	return [...]int{3*64 + 64, 3*128 + 64, 3*128 + 128, 3*128 + 128}[l]
}

// qlPlace is where value i of block b of a unit goes: the offset of its p2
// byte (p1 and p0 are 64 and 128 bytes on), and where the block's d goes
// in the unit (lanes of one block are consecutive floats).
func qlPlace(l, b, i int) (p2, d, lanes int) {
	switch l {
	case qlA8: // lane j holds values 4j..4j+3
		return 32*b + i, 192 + 32*b, 8
	case qlA4: // even values' planes, then odd ones'; lane j holds 8j..8j+7
		pos := 32*b + i
		return 192*(pos&1) + pos>>1, 384 + 16*b, 4
	case qlQ40: // a block's first 16 values, then its second 16
		return 192*(i/16) + 16*b + i%16, 384 + 16*b, 4
	}
	// Q4_K: blocks 0 and 2 (low nibbles) in the first plane set, 1 and 3
	// in the second; lanes 0-7 and 8-15 of each hold one block.
	return 192*(b&1) + 32*(b>>1) + i, 384 + 64*(b&1) + 32*(b>>1), 8
}

// qIntUnitFloats is a unit's prepared x in floats.
func qIntUnitFloats(s quant.Spec) int { return qlBytes(qLayout(s)) / 4 }

// qIntUnit is the values of a unit.
func qIntUnit(s quant.Spec) int { return qlUnit(qLayout(s)) }

// qIntStep is the values of a kernel's step: a unit, or a group where a
// group spans units.
func qIntStep(s quant.Spec) int { return max(qIntUnit(s), s.Block()) }

// qIntUnits is the units the kernels dot for rows of k values: whole
// steps; the groups left over (k not a multiple of a unit) are dotted in
// floats (qIntTail).
func qIntUnits(s quant.Spec, k int) int {
	return k / qIntStep(s) * qIntStep(s) / qIntUnit(s)
}

// qIntSums is the floats of sums before the units: the affine groups'
// sums of x (which meet the biases), Q4_K's sums of every 32 values (its
// mins), Q6_K's sums of every 16 values times 32 (its codes' offset).
func qIntSums(s quant.Spec, k int) int {
	switch s.Type {
	case quant.Q4_K:
		return k / qIntBlock
	case quant.Q6_K:
		return k / 16
	case quant.Q4_0:
		return 0
	}
	return k / s.Group
}

// qPrepareInt writes x's sums (qIntSums), then per unit its int8 planes
// and lanes' d (qlPlace).
func qPrepareInt(p, x []float32, s quant.Spec) {
	k := len(x)
	l := qLayout(s)
	n, U, uf := qIntUnits(s, k), qlUnit(l), qIntUnitFloats(s)
	k0 := n * U
	ns := qIntSums(s, k)
	// Block sums (of the values in units) from the quantizing pass; a
	// stack buffer for rows up to 16384 values.
	var buf [512]float32
	bs := buf[:]
	if k0/qIntBlock > len(bs) {
		bs = make([]float32, k0/qIntBlock)
	}
	bs = bs[:k0/qIntBlock]
	if l == qlK4 {
		bs = p[:k/qIntBlock] // its sums are the block sums
	}
	if n > 0 {
		units := unsafe.Slice((*byte)(unsafe.Pointer(&p[ns])), 4*n*uf)
		if !prepIntArch(l, x[:k0], units, bs, n, qIntMax(s)) {
			prepIntGeneric(l, x[:k0], units, bs, n, qIntMax(s))
		}
	}
	switch s.Type {
	case quant.Q4_K, quant.Q4_0:
		return
	case quant.Q6_K:
		for i := range k / 16 {
			var t float32
			for _, v := range x[16*i : 16*i+16] {
				t += v
			}
			p[i] = 32 * t
		}
		return
	}
	G := s.Group
	for g := range k / G {
		var t float32
		if (g+1)*G <= k0 {
			for _, v := range bs[g*G/qIntBlock : (g+1)*G/qIntBlock] {
				t += v
			}
		} else {
			for _, v := range x[g*G : (g+1)*G] {
				t += v
			}
		}
		p[g] = t
	}
}

// prepIntGeneric is qPrepInt's Go twin, for M = qm.
func prepIntGeneric(l int, x []float32, dst []byte, bs []float32, n int, qm float32) {
	U, ub := qlUnit(l), qlBytes(l)
	for u := range n {
		b := dst[u*ub : (u+1)*ub]
		for blk := range U / qIntBlock {
			xs := x[u*U+qIntBlock*blk : u*U+qIntBlock*(blk+1)]
			var m, sum float32
			for _, v := range xs {
				m = max(m, abs32(v))
				sum += v
			}
			bs[u*U/qIntBlock+blk] = sum
			inv := qm / max(m, 1e-30)
			_, do, lanes := qlPlace(l, blk, 0)
			for j := range lanes {
				binary.LittleEndian.PutUint32(b[do+4*j:], math.Float32bits(m/qm))
				if l == qlQ40 {
					binary.LittleEndian.PutUint32(b[448+16*blk+4*j:], math.Float32bits(sum+sum))
				}
			}
			for i, v := range xs {
				q := int32(math.RoundToEven(float64(v * inv))) // as VCVTPS2DQ
				p2 := (q + 32896) >> 16
				r := q - 65536*p2
				p1 := (r + 128) >> 8
				p0 := r - 256*p1
				o, _, _ := qlPlace(l, blk, i)
				b[o], b[64+o], b[128+o] = byte(int8(p2)), byte(int8(p1)), byte(int8(p0))
			}
		}
	}
}

// QBound is the most QDots' row r of w dotted with x may be off beyond
// float rounding: 0 where w's format is dotted in floats; for the integer
// dots, each x rounded to within half its block's d = max|x|/M (0.51
// allows for the float rounding of x/d) meets the part of the weight that
// multiplies the codes (scale·q), not an affine bias or Q4_K min (which
// meet float sums of x), nor Q6_K's offset of 32, so the bound is
// Σ_blocks 0.51·d·Σ|scale·q|.
func QBound(w *quant.Matrix, r int, x []float32) float64 {
	if !qInt(w.Spec) {
		return 0
	}
	row := make([]float32, w.K)
	w.Row(r, row)
	rb := w.Spec.RowBytes(w.K)
	off := func(i int) float32 { // what w_i adds to scale·q
		switch w.Spec.Type {
		case quant.Affine:
			return w.Bias(r, i/w.Spec.Group)
		case quant.Q4_0:
			return -8 * quant.HalfToF32(binary.LittleEndian.Uint16(w.Data[r*rb+i/32*18:]))
		case quant.Q6_K:
			blk := w.Data[r*rb+i/256*210:]
			d := quant.HalfToF32(binary.LittleEndian.Uint16(blk[208:]))
			return -32 * d * float32(int8(blk[192+i%256/16]))
		}
		blk := w.Data[r*rb+i/256*144:]
		dmin := quant.HalfToF32(binary.LittleEndian.Uint16(blk[2:]))
		_, m := quant.ScaleMinK4(i%256/32, blk[4:16])
		return -dmin * float32(m)
	}
	var b float64
	for blk := 0; blk < w.K/qIntBlock; blk++ {
		var m, sq float64
		for i := blk * qIntBlock; i < (blk+1)*qIntBlock; i++ {
			m = max(m, math.Abs(float64(x[i])))
			sq += math.Abs(float64(row[i] - off(i)))
		}
		b += 0.51 * m / float64(qIntMax(w.Spec)) * sq
	}
	return b
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// qIntTail is row r's scale·Σx·q over the groups from value k0 on, which
// the integer kernels leave to it (their biases they did).
func qIntTail(w *quant.Matrix, r, k0 int, x []float32) float32 {
	rb := w.Spec.RowBytes(w.K)
	row := w.Data[r*rb : (r+1)*rb]
	if w.Spec.Type == quant.Q4_0 {
		var acc float32
		for b := k0 / 32; b < w.K/32; b++ {
			blk := row[b*18 : b*18+18]
			xb := x[b*32 : b*32+32]
			var s float32
			for j, c := range blk[2:18] {
				s += xb[j]*float32(int(c&15)-8) + xb[j+16]*float32(int(c>>4)-8)
			}
			acc += quant.HalfToF32(binary.LittleEndian.Uint16(blk)) * s
		}
		return acc
	}
	G := w.Spec.Group
	var acc float32
	for g := k0 / G; g < w.K/G; g++ {
		var dot float32
		for i := g * G; i < (g+1)*G; i++ {
			var q byte
			if w.Spec.Bits == 8 {
				q = row[i]
			} else {
				q = row[i/2] >> (4 * (i & 1)) & 15
			}
			dot += x[i] * float32(q)
		}
		acc += w.Scale(r, g) * dot
	}
	return acc
}
