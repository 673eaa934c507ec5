package quant

import (
	"encoding/binary"
	"math"
)

// Packers: the quantizers tests and synthetic weights use. They follow the
// formats' reference quantizers (mlx's affine quantize, ggml's
// quantize_row_q8_0_ref and quantize_row_q4_0_ref); the K formats have no
// packer here, their synthetic weights are drawn as random blocks (Random).

// PackAffine quantizes w [rows][k] to an affine matrix: per group, the scale
// spans min..max in 2^bits-1 steps and the bias is the min.
func PackAffine(w []float32, rows, k, bits, group int, scale Float) *Matrix {
	s := Spec{Type: Affine, Bits: bits, Group: group, Scale: scale}
	m := &Matrix{Spec: s, Rows: rows, K: k, Data: make([]byte, rows*s.RowBytes(k)),
		Scales: make([]byte, rows*s.Groups(k)*scale.Size()), Biases: make([]byte, rows*s.Groups(k)*scale.Size())}
	levels := float32(int(1)<<bits - 1)
	for r := 0; r < rows; r++ {
		row := m.Data[r*s.RowBytes(k):]
		for g := 0; g < k/group; g++ {
			v := w[r*k+g*group : r*k+(g+1)*group]
			lo, hi := v[0], v[0]
			for _, x := range v {
				lo, hi = min(lo, x), max(hi, x)
			}
			sc := (hi - lo) / levels
			// Store first, then quantize against the stored (rounded) values,
			// so dequantization reproduces what was chosen.
			putFloat(m.Scales, r*k/group+g, scale, sc)
			putFloat(m.Biases, r*k/group+g, scale, lo)
			sc, lo = float(m.Scales, r*k/group+g, scale), float(m.Biases, r*k/group+g, scale)
			for j, x := range v {
				q := 0
				if sc > 0 {
					q = int(math.Round(float64((x - lo) / sc)))
				}
				q = max(0, min(int(levels), q))
				putBits(row, (g*group+j)*bits, bits, uint64(q))
			}
		}
	}
	return m
}

// putBits writes v at bit offset bit of a little-endian bit stream.
func putBits(b []byte, bit, n int, v uint64) {
	for i := 0; i < n; i++ {
		if v>>i&1 != 0 {
			b[(bit+i)/8] |= 1 << ((bit + i) % 8)
		}
	}
}

func putFloat(b []byte, i int, f Float, v float32) {
	switch f {
	case F16:
		binary.LittleEndian.PutUint16(b[2*i:], ToF16(v))
	case BF16:
		binary.LittleEndian.PutUint16(b[2*i:], ToBF16(v))
	default:
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
}

// PackQ8_0 quantizes w [rows][k] to Q8_0.
func PackQ8_0(w []float32, rows, k int) *Matrix {
	m := &Matrix{Spec: Spec{Type: Q8_0}, Rows: rows, K: k, Data: make([]byte, rows*k/32*34)}
	for b := 0; b < rows*k/32; b++ {
		v, blk := w[b*32:(b+1)*32], m.Data[b*34:]
		var amax float32
		for _, x := range v {
			amax = max(amax, float32(math.Abs(float64(x))))
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(blk, ToF16(d))
		for j, x := range v {
			blk[2+j] = byte(int8(math.Round(float64(x * id))))
		}
	}
	return m
}

// PackQ4_0 quantizes w [rows][k] to Q4_0.
func PackQ4_0(w []float32, rows, k int) *Matrix {
	m := &Matrix{Spec: Spec{Type: Q4_0}, Rows: rows, K: k, Data: make([]byte, rows*k/32*18)}
	for b := 0; b < rows*k/32; b++ {
		v, blk := w[b*32:(b+1)*32], m.Data[b*18:]
		var amax, mx float32
		for _, x := range v {
			if a := float32(math.Abs(float64(x))); a > amax {
				amax, mx = a, x
			}
		}
		d := mx / -8
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(blk, ToF16(d))
		for j := 0; j < 16; j++ {
			q0 := min(15, int8(v[j]*id+8.5))
			q1 := min(15, int8(v[j+16]*id+8.5))
			blk[2+j] = byte(q0) | byte(q1)<<4
		}
	}
	return m
}

// Rand is a source of random 64-bit words.
type Rand interface{ Uint64() uint64 }

// Random fills a [rows][k] matrix of spec with random packed values whose
// dequantized weights spread over about [-amp, amp]: synthetic weights made
// packed, with no float copy in between. data, scales and biases are the
// buffers to fill (sized by the caller, who owns their memory).
func Random(s Spec, rows, k int, amp float32, rng Rand, data, scales, biases []byte) *Matrix {
	m := &Matrix{Spec: s, Rows: rows, K: k, Data: data, Scales: scales, Biases: biases}
	for i := 0; i+8 <= len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], rng.Uint64())
	}
	for i := len(data) &^ 7; i < len(data); i++ {
		data[i] = byte(rng.Uint64())
	}
	jitter := func() float32 { return 0.75 + 0.5*float32(rng.Uint64()>>40)/(1<<24) } // [0.75, 1.25)
	switch s.Type {
	case Affine:
		levels := float32(int(1)<<s.Bits - 1)
		for g := 0; g < rows*s.Groups(k); g++ {
			sc := 2 * amp / levels * jitter()
			putFloat(scales, g, s.Scale, sc)
			putFloat(biases, g, s.Scale, -sc*levels/2)
		}
	case Q8_0:
		for b := 0; b < len(data)/34; b++ {
			binary.LittleEndian.PutUint16(data[b*34:], ToF16(amp/127*jitter()))
		}
	case Q4_0:
		for b := 0; b < len(data)/18; b++ {
			binary.LittleEndian.PutUint16(data[b*18:], ToF16(amp/8*jitter()))
		}
	case Q4_K, Q5_K:
		// Q5_K is Q4_K's super-block with a fifth bit a value: codes up to
		// 15 or 31 (levels), in 144- or 176-byte blocks.
		nb, levels := 144, float32(15)
		if s.Type == Q5_K {
			nb, levels = 176, 31
		}
		for b := 0; b < len(data)/nb; b++ {
			blk := data[b*nb:]
			// Every sub-block's 6-bit scale and min is 32 (ScaleMinK4: bytes
			// 0..7 hold 32 in their low six bits and 2 in their top two, which
			// make the 32 of sub-blocks 4..7; bytes 8..11 are 0), so
			// w = 32·d·q - 32·dmin, centred when dmin = levels/2·d.
			for j := 0; j < 8; j++ {
				blk[4+j] = 2<<6 | 32
			}
			for j := 8; j < 12; j++ {
				blk[4+j] = 0
			}
			d := 2 * amp / (levels * 32) * jitter()
			binary.LittleEndian.PutUint16(blk, ToF16(d))
			binary.LittleEndian.PutUint16(blk[2:], ToF16(d*levels/2))
		}
	case Q3_K:
		// Random 6-bit scales (sc − 32 in −32..31) and q in −4..3: the
		// values average 16·3.5 in magnitude times d.
		for b := 0; b < len(data)/110; b++ {
			binary.LittleEndian.PutUint16(data[b*110+108:], ToF16(amp/(16*3.5)*jitter()))
		}
	case IQ4_XS:
		// Random 6-bit scales and levels (|level| up to 127).
		for b := 0; b < len(data)/136; b++ {
			binary.LittleEndian.PutUint16(data[b*136:], ToF16(amp/(16*64)*jitter()))
		}
	case MXFP4:
		// w = E2M1(code)·2^(e−127), |E2M1| up to 6: an exponent that keeps
		// the largest values about amp.
		e := 127 + int(math.Round(math.Log2(float64(amp)/4)))
		for b := 0; b < len(data)/17; b++ {
			data[b*17] = byte(e + int(rng.Uint64()%2))
		}
	case IQ4_NL:
		for b := 0; b < len(data)/18; b++ {
			binary.LittleEndian.PutUint16(data[b*18:], ToF16(amp/64*jitter()))
		}
	case Q6_K:
		for b := 0; b < len(data)/210; b++ {
			blk := data[b*210:]
			for j := 0; j < 16; j++ {
				blk[192+j] = 16
			}
			binary.LittleEndian.PutUint16(blk[208:], ToF16(amp/(32*16)*jitter()))
		}
	case NVFP4, MXFP8:
		// NVFP4: E4M3 scales of about amp/6 (|E2M1| up to 6), drawn among
		// the codes of amp/6 times 0.75 to 1.25 (a non-negative E4M3 code's
		// value grows with it); MXFP8: |E4M3| up to 448, an exponent that
		// keeps the largest about amp.
		rb, v, g := s.RowBytes(k), FPRowValues(s, k), fpRows[s.Type].Group
		lo, hi := uint64(E4M3Near(amp/6*0.75)), uint64(E4M3Near(amp/6*1.25))
		e := uint64(127 + int(math.Round(math.Log2(float64(amp)/448))))
		if s.Type == MXFP8 {
			lo, hi = e, e+1
		}
		for r := 0; r < rows; r++ {
			sc := data[r*rb+v : (r+1)*rb]
			for i := range sc {
				sc[i] = 0 // the row's padding
				if i < k/g {
					sc[i] = byte(lo + rng.Uint64()%(hi-lo+1))
				}
			}
		}
	case Q2_K:
		// Random 4-bit scales and mins (q in 0..3): w = d·sc·q − dmin·m,
		// centred when dmin·m = 1.5·d·sc on average (sc and m both average
		// 7.5), so dmin = 1.5·d.
		for b := 0; b < len(data)/84; b++ {
			blk := data[b*84:]
			d := amp / (1.5 * 7.5) * jitter()
			binary.LittleEndian.PutUint16(blk[80:], ToF16(d))
			binary.LittleEndian.PutUint16(blk[82:], ToF16(1.5*d))
		}
	}
	if IsIQ(s.Type) {
		// Random grid rows, signs and scales under a d that keeps the
		// largest code (43 or 62 for IQ2 and IQ3; 9/8 of IQ1's 8) at about
		// the average scale times amp. IQ1_M's d is spread over the top
		// nibbles of its scales (IQUnit).
		nb := iqBytes[s.Type]
		for b := 0; b < len(data)/nb; b++ {
			blk := data[b*nb : (b+1)*nb]
			var d float32
			switch s.Type {
			case IQ2_XXS, IQ2_XS, IQ2_S:
				d = amp / (2 * 43) * jitter()
			case IQ3_XXS:
				d = amp / (4 * 62) * jitter()
			case IQ3_S:
				d = amp / (16 * 15) * jitter()
			default:
				d = amp / 8 * jitter()
			}
			h := ToF16(d)
			if s.Type == IQ1_M {
				for i := 0; i < 4; i++ {
					o := 48 + 2*i
					w := binary.LittleEndian.Uint16(blk[o:])&0x0fff | (h>>(4*i)&15)<<12
					binary.LittleEndian.PutUint16(blk[o:], w)
				}
				continue
			}
			binary.LittleEndian.PutUint16(blk, h)
		}
	}
	return m
}

// E4M3Near is the non-negative E4M3 byte nearest v ≥ 0, at most 448 (the
// largest mlx writes).
func E4M3Near(v float32) byte {
	best := byte(0)
	for c := byte(1); c <= 0x7e; c++ {
		if math.Abs(float64(E4M3ToF32(c)-v)) < math.Abs(float64(E4M3ToF32(best)-v)) {
			best = c
		}
	}
	return best
}

// ToF16 rounds float32 to IEEE half bits (round to nearest even).
func ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff >= 0x7f800000: // inf, nan
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp >= 31:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint(14 - exp)
		h := mant >> shift
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 != 0) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 != 0) {
		h++
	}
	return sign | uint16(h)
}

// ToBF16 rounds float32 to bfloat16 bits (round to nearest even).
func ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b >> 16 & 1)) >> 16)
}
