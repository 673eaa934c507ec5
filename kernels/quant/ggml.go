package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Transcoder is a ggml block format that some backend has no kernels for
// (any backend, or CUDA and the CPU for the MetalOnly formats) but whose
// every value another format holds exactly: for such a backend a GGUF
// tensor in it is rewritten once, as it is loaded, into Into or, where the
// backend runs that wider (Widenings), straight into the wider form
// (Forms), and runs as that (docs/quantization.md, "GGUF formats that are
// transcoded"). llama.cpp writes them into the files people download:
// Q4_K_M and Q5_K_M files hold Q5_0 for rows of a length that is not a
// multiple of 256, and Q5_K for some matrices; Q3_K_M files are mostly
// Q3_K, IQ4_XS files IQ4_XS, and IQ4_NL is what llama.cpp writes for such
// rows in Q3_K and IQ files.
type Transcoder struct {
	Name          string // ggml's name
	Values, Bytes int    // one block's values and bytes
	Into          Spec   // the narrowest format that holds it exactly
	// decode writes one block: for an affine Into, one code a byte
	// (Values bytes, packed at the form's width by Transcode) and its
	// groups' scales and biases; for another format, that format's block.
	decode func(blk, data, scales, biases []byte) error
}

// Forms are the formats t writes: Into, then the wider affine formats that
// hold Into's values with the same scales and biases (Widenings).
func (t Transcoder) Forms() []Spec { return append([]Spec{t.Into}, Widenings(t.Into)...) }

// Transcoders are the ggml formats read by transcoding where a backend has
// no kernels for them, by ggml name.
var Transcoders = map[string]Transcoder{
	// Q4_1: f16 d and m, 16 bytes of nibbles; w = d·q + m, q in 0..15: an
	// affine 4-bit group of 32 with f16 scale d and bias m, as many bytes.
	"Q4_1": {Name: "Q4_1", Values: 32, Bytes: 20, Into: Spec{Type: Affine, Bits: 4, Group: 32, Scale: F16}, decode: q41},
	// Q5_0: f16 d, 32 high bits, 16 bytes of nibbles; w = d·(q − 16), q in
	// 0..31: an affine 5-bit group of 32 with f16 scale d and bias −16·d
	// (24 bytes for 22), exact as −16·d is d with its exponent moved.
	"Q5_0": {Name: "Q5_0", Values: 32, Bytes: 22, Into: Spec{Type: Affine, Bits: 5, Group: 32, Scale: F16}, decode: q50},
	// Q5_1: f16 d and m, 32 high bits, 16 bytes of nibbles; w = d·q + m, q
	// in 0..31: an affine 5-bit group of 32 with f16 scale and bias, as
	// many bytes.
	"Q5_1": {Name: "Q5_1", Values: 32, Bytes: 24, Into: Spec{Type: Affine, Bits: 5, Group: 32, Scale: F16}, decode: q51},
	// Q5_K: super-blocks of 256 as Q4_K's with a fifth bit; w = d·s·q −
	// dmin·m per 32 values, with d·s and dmin·m exact in f32 (an f16 times
	// a 6-bit integer): affine 5-bit groups of 32 with f32 scales and
	// biases (224 bytes for 176).
	"Q5_K": {Name: "Q5_K", Values: 256, Bytes: 176, Into: Spec{Type: Affine, Bits: 5, Group: 32, Scale: F32}, decode: q5k},
	// Q3_K: super-blocks of 256, w = d·s·q with an f16 d, a 6-bit s − 32
	// per 16 values and q in −4..3. s·q lies in −124..128, so −s·q is an
	// int8 and each 32 values a Q8_0 block of scale −d (272 bytes for 110).
	"Q3_K": {Name: "Q3_K", Values: 256, Bytes: 110, Into: Spec{Type: Q8_0}, decode: q3k},
	// IQ4_NL: f16 d and 16 bytes of 4-bit indices into a table of 16 int8
	// levels; w = d·level: a Q8_0 block holding the levels (34 bytes for 18).
	"IQ4_NL": {Name: "IQ4_NL", Values: 32, Bytes: 18, Into: Spec{Type: Q8_0}, decode: iq4nl},
	// IQ4_XS: super-blocks of 256, IQ4_NL's levels under a scale d·(s − 32)
	// per 32 values (an f16 times a 6-bit s: at most 16 significant bits).
	// With the level + 128 as an 8-bit code, an affine group of 32 with f32
	// scale d·(s − 32) and bias −128·d·(s − 32) gives d·(s − 32)·level
	// exactly, as every product and the sum fit f32's 24 bits (320 bytes
	// for 136).
	"IQ4_XS": {Name: "IQ4_XS", Values: 256, Bytes: 136, Into: Spec{Type: Affine, Bits: 8, Group: 32, Scale: F32}, decode: iq4xs},
	// MXFP4: an E8M0 exponent e and 16 bytes of 4-bit E2M1 codes (value j
	// the low nibble of byte j, value j+16 its high one); w = 2^(e−128)·
	// level, the levels E2M1's values doubled (integers −12..12). With the
	// level + 12 as a 5-bit code, an affine group of 32 with f32 scale
	// 2^(e−128) and bias −12·2^(e−128) gives every value exactly: powers of
	// two times integers below 32 (28 bytes for 17). Only past e = 251,
	// where ggml's largest values near f32's limit too, does 24·2^(e−128)
	// overflow first.
	"MXFP4": {Name: "MXFP4", Values: 32, Bytes: 17, Into: Spec{Type: Affine, Bits: 5, Group: 32, Scale: F32}, decode: mxfp4},
	// TQ2_0: super-blocks of 256, 2-bit q in Q2_K's very order and an f16
	// d; w = d·(q − 1). A Q2_K block with every scale and min 1 and dmin
	// = d gives d·q − d, the same value (84 bytes for 66).
	"TQ2_0": {Name: "TQ2_0", Values: 256, Bytes: 66, Into: Spec{Type: Q2_K}, decode: tq20},
	// TQ1_0: super-blocks of 256 ternary values, five (four) base-3 digits
	// a byte, and an f16 d; w = d·(t − 1), t in 0..2: Q2_K as TQ2_0 (84
	// bytes for 54).
	"TQ1_0": {Name: "TQ1_0", Values: 256, Bytes: 54, Into: Spec{Type: Q2_K}, decode: tq10},
}

// Transcode rewrites rows of k values in t's blocks (src) as m.Spec, one of
// t.Forms(): packed values into m.Data, and for affine formats scales and
// biases into m.Scales and m.Biases, each sized as m.Check wants.
func (t Transcoder) Transcode(src []byte, m *Matrix) error {
	if !slices.Contains(t.Forms(), m.Spec) {
		return fmt.Errorf("%s: transcodes into %v, not %v", t.Name, formsString(t.Forms()), m.Spec)
	}
	if m.K <= 0 || m.K%t.Values != 0 {
		return fmt.Errorf("%s packs rows in blocks of %d values; a row of %d values does not divide", t.Name, t.Values, m.K)
	}
	if want := m.Rows * m.K / t.Values * t.Bytes; len(src) != want {
		return fmt.Errorf("%s: %d bytes for %d rows of %d values (want %d)", t.Name, len(src), m.Rows, m.K, want)
	}
	if err := m.Check(t.Name + " transcoded"); err != nil {
		return err
	}
	n := m.Rows * m.K / t.Values
	db, sb := m.Spec.BlockBytes()*t.Values/m.Spec.Block(), 0
	if t.Into.Type == Affine {
		sb = t.Values / t.Into.Group * t.Into.Scale.Size()
	}
	var errs firstError
	// A model's matrices are tens of megabytes: spread over the cores in
	// runs of transcodeRun blocks.
	forRuns(n, transcodeRun, func(lo, hi int) {
		var codes []byte
		if sb > 0 {
			codes = make([]byte, t.Values)
		}
		for b := lo; b < hi; b++ {
			blk, out := src[b*t.Bytes:(b+1)*t.Bytes], m.Data[b*db:(b+1)*db]
			if sb == 0 {
				errs.set(b, t.decode(blk, out, nil, nil))
				continue
			}
			errs.set(b, t.decode(blk, codes, m.Scales[b*sb:(b+1)*sb], m.Biases[b*sb:(b+1)*sb]))
			packCodes(out, codes, m.Spec.Bits)
		}
	})
	if errs.err != nil {
		return fmt.Errorf("%s: block %d: %w", t.Name, errs.at, errs.err)
	}
	return nil
}

// Block is one block of t's (blk) in t.Into, a matrix of one row.
func (t Transcoder) Block(blk []byte) (*Matrix, error) {
	m := &Matrix{Spec: t.Into, Rows: 1, K: t.Values, Data: make([]byte, t.Into.RowBytes(t.Values))}
	if t.Into.Type == Affine {
		n := t.Into.Groups(t.Values) * t.Into.Scale.Size()
		m.Scales, m.Biases = make([]byte, n), make([]byte, n)
	}
	return m, t.Transcode(blk, m)
}

// formsString names a transcoder's forms for a message.
func formsString(forms []Spec) string {
	s := make([]string, len(forms))
	for i, f := range forms {
		s[i] = f.String()
	}
	return strings.Join(s, " or ")
}

// firstError keeps the error of the lowest block that had one, from many
// goroutines.
type firstError struct {
	mu  sync.Mutex
	at  int
	err error
}

func (f *firstError) set(at int, err error) {
	if err == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil || at < f.at {
		f.at, f.err = at, err
	}
}

// packCodes writes codes (one a byte, each below 2^bits) at bits each into
// dst, code i at bit i·bits of its little-endian stream (mlx's affine
// packing); len(codes) is a multiple of 8, so every 8 codes are bits bytes.
func packCodes(dst, codes []byte, bits int) {
	if bits == 8 {
		copy(dst, codes)
		return
	}
	for i := 0; i < len(codes); i += 8 {
		var v uint64
		for j, c := range codes[i : i+8] {
			v |= uint64(c) << (j * bits)
		}
		o := dst[i*bits/8 : (i+8)*bits/8]
		for j := range o {
			o[j] = byte(v >> (8 * j))
		}
	}
}

// transcodeRun is the blocks one goroutine transcodes: about 100 KB to 1 MB
// of output.
const transcodeRun = 4096

// forRuns calls f over [0, n) in runs of run items, on every core.
func forRuns(n, run int, f func(lo, hi int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for lo := 0; lo < n; lo += run {
		wg.Add(1)
		sem <- struct{}{}
		go func(lo, hi int) {
			defer wg.Done()
			f(lo, hi)
			<-sem
		}(lo, min(n, lo+run))
	}
	wg.Wait()
}

// fifth returns value j's fifth bit (of 32) from a Q5 block's 4 high-bit
// bytes, as 16 or 0 (ggml's qh: bit j for value j).
func fifth(qh uint32, j int) uint8 { return uint8(qh>>j&1) << 4 }

func q41(blk, codes, scales, biases []byte) error {
	copy(scales, blk[0:2])
	copy(biases, blk[2:4])
	for i := range 32 {
		codes[i] = nibble(blk[4:20], i)
	}
	return nil
}

// nibble is value i (of 32) of a Q4_0/Q4_1 block's 16 bytes: value j is
// byte j's low nibble and value j+16 its high one.
func nibble(qs []byte, i int) uint8 {
	if i < 16 {
		return qs[i] & 0xf
	}
	return qs[i-16] >> 4
}

// maxHalf is f16's largest finite value.
const maxHalf = 65504

func q50(blk, codes, scales, biases []byte) error {
	copy(scales, blk[0:2])
	d := HalfToF32(binary.LittleEndian.Uint16(blk[0:2]))
	// −16·d is d with its exponent moved, exact in f16 unless it leaves
	// f16's range, which only a block of values beyond 65504 reaches.
	if b := -16 * d; math.Abs(float64(b)) > maxHalf && !math.IsInf(float64(d), 0) {
		return fmt.Errorf("scale %g: its offset −16·scale = %g is beyond f16's range", d, b)
	}
	binary.LittleEndian.PutUint16(biases, ToF16(-16*d))
	qh := binary.LittleEndian.Uint32(blk[2:6])
	for i := range 32 {
		codes[i] = nibble(blk[6:22], i) | fifth(qh, i)
	}
	return nil
}

func q51(blk, codes, scales, biases []byte) error {
	copy(scales, blk[0:2])
	copy(biases, blk[2:4])
	qh := binary.LittleEndian.Uint32(blk[4:8])
	for i := range 32 {
		codes[i] = nibble(blk[8:24], i) | fifth(qh, i)
	}
	return nil
}

func q5k(blk, codes, scales, biases []byte) error {
	d := HalfToF32(binary.LittleEndian.Uint16(blk[0:2]))
	dmin := HalfToF32(binary.LittleEndian.Uint16(blk[2:4]))
	sc, qh, ql := blk[4:16], blk[16:48], blk[48:176]
	// Sub-block j (32 values) takes its low nibbles from ql[32·(j/2):] (low
	// halves for even j, high for odd) and its fifth bits from bit j of qh.
	for j := 0; j < 8; j++ {
		s, m := ScaleMinK4(j, sc)
		binary.LittleEndian.PutUint32(scales[4*j:], math.Float32bits(d*float32(s)))
		binary.LittleEndian.PutUint32(biases[4*j:], math.Float32bits(-(dmin * float32(m))))
		q := ql[32*(j/2):]
		for l := 0; l < 32; l++ {
			v := q[l] & 0xf
			if j%2 == 1 {
				v = q[l] >> 4
			}
			codes[32*j+l] = v | (qh[l]>>j&1)<<4
		}
	}
	return nil
}

// ScaleK3 is Q3_K's sub-block scale i (of 16) from its 12 scale bytes, as
// a 6-bit value: the low 4 bits from byte i%8 (its high nibble for i ≥ 8),
// the high 2 from byte 8+i%4 at bit 2·(i/4).
func ScaleK3(i int, sc []byte) int {
	lo := sc[i%8] >> (4 * (i / 8)) & 0xf
	hi := sc[8+i%4] >> (2 * (i / 4)) & 3
	return int(lo | hi<<4)
}

func q3k(blk, data, _, _ []byte) error {
	hm, qs, sc := blk[0:32], blk[32:96], blk[96:108]
	// −d: the f16 with its sign bit flipped, so that −s·q fits an int8.
	negD := binary.LittleEndian.Uint16(blk[108:110]) ^ 0x8000
	// Value p = 128h + 32j + l takes 2 bits from qs[32h + l%32] at bit 2j,
	// its third (set: no offset of −4) from hm[l%32] at bit 4h + j, and
	// scale 8h + 2j + l/16; each 32 values (one h, j) are a Q8_0 block.
	for h := 0; h < 2; h++ {
		for j := 0; j < 4; j++ {
			out := data[34*(4*h+j) : 34*(4*h+j+1)]
			binary.LittleEndian.PutUint16(out, negD)
			q2, bit := qs[32*h:32*h+32], uint(4*h+j)
			for half := 0; half < 32; half += 16 {
				ns := 32 - ScaleK3(8*h+2*j+half/16, sc)
				for l := half; l < half+16; l++ {
					q := int(q2[l]>>(2*j)&3) - 4 + 4*int(hm[l]>>bit&1)
					out[2+l] = byte(int8(ns * q))
				}
			}
		}
	}
	return nil
}

// IQ4NLLevels are IQ4_NL's 16 levels (ggml's kvalues_iq4nl).
var IQ4NLLevels = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func iq4nl(blk, data, _, _ []byte) error {
	copy(data[0:2], blk[0:2])
	for i := 0; i < 32; i++ {
		data[2+i] = byte(IQ4NLLevels[nibble(blk[2:18], i)])
	}
	return nil
}

func iq4xs(blk, codes, scales, biases []byte) error {
	d := HalfToF32(binary.LittleEndian.Uint16(blk[0:2]))
	sh := binary.LittleEndian.Uint16(blk[2:4])
	sl, qs := blk[4:8], blk[8:136]
	// Sub-block b (32 values): its scale's low 4 bits from sl[b/2] (the
	// high nibble for odd b), its high 2 from sh at bit 2b; values j and
	// j+16 in qs[16b+j]'s low and high nibbles.
	for b := 0; b < 8; b++ {
		ls := int(sl[b/2]>>(4*(b%2))&0xf) | int(sh>>(2*b)&3)<<4
		dl := d * float32(ls-32)
		binary.LittleEndian.PutUint32(scales[4*b:], math.Float32bits(dl))
		binary.LittleEndian.PutUint32(biases[4*b:], math.Float32bits(-128*dl))
		for i := 0; i < 32; i++ {
			codes[32*b+i] = byte(int(IQ4NLLevels[nibble(qs[16*b:16*b+16], i)]) + 128)
		}
	}
	return nil
}

// MXFP4Levels are E2M1's magnitudes (0, 0.5, 1, 1.5, 2, 3, 4, 6: the OCP
// Microscaling formats' FP4) doubled, positive codes then negative ones.
var MXFP4Levels = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

func mxfp4(blk, codes, scales, biases []byte) error {
	mxfp4Scale(blk[0], scales, biases)
	for i := 0; i < 32; i++ {
		codes[i] = byte(MXFP4Levels[nibble(blk[1:17], i)] + 12)
	}
	return nil
}

// mxfp4Scale writes an MXFP4 group's affine scale and bias from its E8M0
// exponent e: 2^(e−128), half the E8M0 scale, as it applies to the doubled
// levels, and −12 times that for the codes level + 12. e of 0 and 1 give
// f32 subnormals, exact.
func mxfp4Scale(e byte, scales, biases []byte) {
	d := float32(math.Ldexp(1, int(e)-128))
	binary.LittleEndian.PutUint32(scales, math.Float32bits(d))
	binary.LittleEndian.PutUint32(biases, math.Float32bits(-12*d))
}

// ternaryQ2K writes Q2_K's header for a ternary block of scale d (f16
// bits): every sub-block's scale and min 1, dmin = d.
func ternaryQ2K(data []byte, d uint16) {
	for i := 0; i < 16; i++ {
		data[i] = 0x11
	}
	binary.LittleEndian.PutUint16(data[80:], d)
	binary.LittleEndian.PutUint16(data[82:], d)
}

func tq20(blk, data, _, _ []byte) error {
	copy(data[16:80], blk[0:64])
	ternaryQ2K(data, binary.LittleEndian.Uint16(blk[64:]))
	return nil
}

func tq10(blk, data, _, _ []byte) error {
	clear(data[16:80])
	// Value v is digit k of byte i: bytes 0..31 hold values 32k + i (k <
	// 5), bytes 32..47 values 160 + 16k + i, bytes 48..51 values 240 + 4k
	// + i (k < 4). Digit k is the top of (b·3^k mod 256)·3, ggml's
	// fixed-point base 3. In Q2_K, v's 2 bits are at byte 32·(v/128) + v%32,
	// bit 2·(v%128/32).
	put := func(v int, b byte, k int) {
		x := b
		for ; k > 0; k-- {
			x *= 3
		}
		t := byte(uint16(x) * 3 >> 8)
		data[16+32*(v/128)+v%32] |= t << (2 * (v % 128 / 32))
	}
	for i := 0; i < 32; i++ {
		for k := 0; k < 5; k++ {
			put(32*k+i, blk[i], k)
		}
	}
	for i := 0; i < 16; i++ {
		for k := 0; k < 5; k++ {
			put(160+16*k+i, blk[32+i], k)
		}
	}
	for i := 0; i < 4; i++ {
		for k := 0; k < 4; k++ {
			put(240+4*k+i, blk[48+i], k)
		}
	}
	ternaryQ2K(data, binary.LittleEndian.Uint16(blk[52:]))
	return nil
}
