package quant

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// TestBlocksMatchGGUFPy: random blocks of each GGUF type, dequantized by
// gguf-py (tools/fixtures/make_quant_fixtures.py wrote them), against Row.
// The two compute in float32 in different orders: tolerance 1e-6 relative.
func TestBlocksMatchGGUFPy(t *testing.T) {
	raw, err := os.ReadFile("testdata/blocks.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx map[string]struct {
		Blocks string    `json:"blocks"`
		Values []float32 `json:"values"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	types := map[string]Type{}
	for t, name := range ggmlNames {
		types[name] = t
	}
	names := map[string]bool{}
	for n := range types {
		names[n] = true
	}
	for n := range Transcoders {
		names[n] = true
	}
	if len(fx) != len(names) {
		t.Fatalf("fixture has %d types, want %d", len(fx), len(names))
	}
	for name, f := range fx {
		t.Run(name, func(t *testing.T) {
			data, _ := base64.StdEncoding.DecodeString(f.Blocks)
			var ms []*Matrix
			if ty, ok := types[name]; ok {
				ms = append(ms, &Matrix{Spec: Spec{Type: ty}, Rows: 1, K: len(f.Values), Data: data})
			}
			tc, transcoded := Transcoders[name]
			if transcoded {
				for _, form := range tc.Forms() {
					ms = append(ms, transcodeMatrix(t, tc, form, data, 1, len(f.Values)))
				}
			}
			for _, m := range ms {
				if err := m.Check(name); err != nil {
					t.Fatal(err)
				}
				got := m.Dequantize()
				for i, want := range f.Values {
					d := math.Abs(float64(got[i] - want))
					// A transcoded block holds the very values (a zero's
					// sign aside) in every form: its one rounding (scale·q
					// + bias) is gguf-py's. An IQ value is a product exact
					// in f32 (IQUnit).
					if (transcoded || IsIQ(m.Spec.Type)) && got[i] != want ||
						d > 1e-6*math.Abs(float64(want))+1e-12 {
						t.Fatalf("%v value %d: %g, gguf-py %g", m.Spec, i, got[i], want)
					}
				}
			}
		})
	}
}

// transcodeMatrix rewrites rows of k values in tc's blocks as q, one of
// tc.Forms().
func transcodeMatrix(t testing.TB, tc Transcoder, q Spec, src []byte, rows, k int) *Matrix {
	t.Helper()
	m := &Matrix{Spec: q, Rows: rows, K: k, Data: make([]byte, rows*q.RowBytes(k))}
	if q.Type == Affine {
		n := rows * q.Groups(k) * q.Scale.Size()
		m.Scales, m.Biases = make([]byte, n), make([]byte, n)
	}
	if err := tc.Transcode(src, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// ggmlRef dequantizes one block of a transcoded format straight from
// ggml-quants.c's dequantize_row_q4_1, _q5_0, _q5_1, _q5_K, _q3_K,
// _iq4_nl, _iq4_xs, _tq1_0 and _tq2_0: a second reading of the formats, apart from the
// transcoders.
func ggmlRef(name string, blk []byte) []float32 {
	h := func(i int) float32 { return HalfToF32(uint16(blk[i]) | uint16(blk[i+1])<<8) }
	u32 := func(i int) uint32 {
		return uint32(blk[i]) | uint32(blk[i+1])<<8 | uint32(blk[i+2])<<16 | uint32(blk[i+3])<<24
	}
	y := make([]float32, 0, 256)
	switch name {
	case "Q4_1", "Q5_0", "Q5_1":
		d, m, qs, qh := h(0), float32(0), blk[2:], uint32(0)
		switch name {
		case "Q4_1":
			m, qs = h(2), blk[4:]
		case "Q5_0":
			qh, qs = u32(2), blk[6:]
		case "Q5_1":
			m, qh, qs = h(2), u32(4), blk[8:]
		}
		y = y[:32]
		for j := 0; j < 16; j++ {
			x0, x1 := int(qs[j]&0x0f), int(qs[j]>>4)
			if name != "Q4_1" {
				x0 |= int((qh>>j)<<4) & 0x10
				x1 |= int(qh>>(j+12)) & 0x10
			}
			if name == "Q5_0" {
				y[j], y[j+16] = float32(x0-16)*d, float32(x1-16)*d
			} else {
				y[j], y[j+16] = float32(x0)*d+m, float32(x1)*d+m
			}
		}
	case "Q5_K":
		d, dmin := h(0), h(2)
		sc, qh, ql := blk[4:16], blk[16:48], blk[48:]
		u1, u2 := uint8(1), uint8(2)
		for j, is := 0, 0; j < 256; j, is = j+64, is+2 {
			s1, m1 := ScaleMinK4(is, sc)
			s2, m2 := ScaleMinK4(is+1, sc)
			d1, mm1, d2, mm2 := d*float32(s1), dmin*float32(m1), d*float32(s2), dmin*float32(m2)
			for l := 0; l < 32; l++ {
				q := int(ql[l] & 0xf)
				if qh[l]&u1 != 0 {
					q += 16
				}
				y = append(y, d1*float32(q)-mm1)
			}
			for l := 0; l < 32; l++ {
				q := int(ql[l] >> 4)
				if qh[l]&u2 != 0 {
					q += 16
				}
				y = append(y, d2*float32(q)-mm2)
			}
			ql = ql[32:]
			u1, u2 = u1<<2, u2<<2
		}
	case "Q3_K":
		// ggml unpacks the 12 scale bytes as four words: kmask1 0x03030303,
		// kmask2 0x0f0f0f0f.
		hm, q, d := blk[0:32], blk[32:96], h(108)
		a := [4]uint32{u32(96), u32(100), u32(104)}
		tmp := a[2]
		a[2] = a[0]>>4&0x0f0f0f0f | (tmp>>4&0x03030303)<<4
		a[3] = a[1]>>4&0x0f0f0f0f | (tmp>>6&0x03030303)<<4
		a[0] = a[0]&0x0f0f0f0f | (tmp&0x03030303)<<4
		a[1] = a[1]&0x0f0f0f0f | (tmp>>2&0x03030303)<<4
		scale := func(is int) float32 { return float32(int8(a[is/4]>>(8*(is%4))) - 32) }
		m, is := uint8(1), 0
		for n := 0; n < 256; n += 128 {
			for shift := 0; shift < 8; shift += 2 {
				for half := 0; half < 32; half += 16 {
					dl := d * scale(is)
					is++
					for l := half; l < half+16; l++ {
						v := int8(q[l]>>shift&3) - 4
						if hm[l]&m != 0 {
							v += 4
						}
						y = append(y, dl*float32(v))
					}
				}
				m <<= 1
			}
			q = q[32:]
		}
	case "IQ4_NL":
		d := h(0)
		y = y[:32]
		for j := 0; j < 16; j++ {
			y[j], y[j+16] = d*kvaluesIQ4NL[blk[2+j]&0xf], d*kvaluesIQ4NL[blk[2+j]>>4]
		}
	case "IQ4_XS":
		d, sh, qs := h(0), uint16(blk[2])|uint16(blk[3])<<8, blk[8:]
		for ib := 0; ib < 8; ib++ {
			ls := int(blk[4+ib/2]>>(4*(ib%2))&0xf) | int(sh>>(2*ib)&3)<<4
			dl := d * float32(ls-32)
			y = y[:len(y)+32]
			out := y[len(y)-32:]
			for j := 0; j < 16; j++ {
				out[j], out[j+16] = dl*kvaluesIQ4NL[qs[j]&0xf], dl*kvaluesIQ4NL[qs[j]>>4]
			}
			qs = qs[16:]
		}
	case "TQ1_0":
		// dequantize_row_tq1_0: digit n of byte m is the top of
		// (q·3^n mod 256)·3, over 32 bytes, then 16, then the 4 of qh.
		d := h(52)
		pow3 := [5]uint8{1, 3, 9, 27, 81}
		for _, run := range []struct{ at, n, digits int }{{0, 32, 5}, {32, 16, 5}, {48, 4, 4}} {
			for n := 0; n < run.digits; n++ {
				for m := 0; m < run.n; m++ {
					q := blk[run.at+m] * pow3[n]
					y = append(y, float32(int16(uint16(q)*3>>8)-1)*d)
				}
			}
		}
	case "TQ2_0":
		d := h(64)
		for j := 0; j < 64; j += 32 {
			for l := 0; l < 4; l++ {
				for m := 0; m < 32; m++ {
					y = append(y, float32(int8(blk[j+m]>>(2*l)&3)-1)*d)
				}
			}
		}
	case "MXFP4":
		// ggml_e8m0_to_fp32_half: 2^(e−127)/2, built from its bits.
		e := uint32(blk[0])
		bits := (e - 1) << 23
		if e < 2 {
			bits = 0x00200000 << e
		}
		d := math.Float32frombits(bits)
		y = y[:32]
		for j := 0; j < 16; j++ {
			y[j], y[j+16] = kvaluesMXFP4[blk[1+j]&0xf]*d, kvaluesMXFP4[blk[1+j]>>4]*d
		}
	}
	return y
}

// kvaluesMXFP4 is ggml's kvalues_mxfp4, typed apart from MXFP4Levels.
var kvaluesMXFP4 = [16]float32{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// kvaluesIQ4NL is ggml's kvalues_iq4nl, typed apart from IQ4NLLevels.
var kvaluesIQ4NL = [16]float32{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// f16At are the offsets of each transcoded format's f16 scales in a block.
var f16At = map[string][]int{"Q4_1": {0, 2}, "Q5_0": {0}, "Q5_1": {0, 2}, "Q5_K": {0, 2}, "Q3_K": {108}, "IQ4_NL": {0}, "IQ4_XS": {0}, "MXFP4": {}, "TQ1_0": {52}, "TQ2_0": {64}}

// Every transcoder, on random blocks (finite scales), gives ggml's values
// exactly (bit for bit but for the sign of a zero, which no dot product
// sees); rows of several blocks keep their order.
func TestTranscodersMatchGGML(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for name, tc := range Transcoders {
		t.Run(name, func(t *testing.T) {
			const rows = 3
			k := 2 * tc.Values
			src := make([]byte, rows*k/tc.Values*tc.Bytes)
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			// Scales: f16 of magnitude about 2⁻⁸ (exponent 7), either sign.
			at, ok := f16At[name]
			if !ok {
				t.Fatalf("no scale offsets for %s", name)
			}
			for b := 0; b < len(src)/tc.Bytes; b++ {
				blk := src[b*tc.Bytes:]
				for _, i := range at {
					blk[i+1] = blk[i+1]&0x83 | 7<<2
				}
				if name == "MXFP4" {
					blk[0] %= 252 // exponents whose largest values stay finite
				}
			}
			for _, form := range tc.Forms() {
				got := transcodeMatrix(t, tc, form, src, rows, k).Dequantize()
				for b := 0; b < len(src)/tc.Bytes; b++ {
					want := ggmlRef(name, src[b*tc.Bytes:(b+1)*tc.Bytes])
					for i, w := range want {
						if g := got[b*tc.Values+i]; g != w {
							t.Fatalf("%v: block %d value %d: %g, ggml %g", form, b, i, g, w)
						}
					}
				}
			}
		})
	}
}

// Transcode refuses buffers that do not fit the shape, naming the format.
func TestTranscodeRefusesBadShapes(t *testing.T) {
	tc := Transcoders["Q5_0"]
	for _, c := range []struct {
		src  int
		m    *Matrix
		want string
	}{
		{22, &Matrix{Spec: tc.Into, Rows: 1, K: 48, Data: make([]byte, 30), Scales: make([]byte, 4), Biases: make([]byte, 4)}, "blocks of 32"},
		{21, &Matrix{Spec: tc.Into, Rows: 1, K: 32, Data: make([]byte, 20), Scales: make([]byte, 2), Biases: make([]byte, 2)}, "21 bytes"},
		{22, &Matrix{Spec: tc.Into, Rows: 1, K: 32, Data: make([]byte, 21), Scales: make([]byte, 2), Biases: make([]byte, 2)}, "21 bytes of packed"},
		{22, &Matrix{Spec: Spec{Type: Q4_0}, Rows: 1, K: 32, Data: make([]byte, 18)}, "not Q4_0"},
		{22, &Matrix{Spec: Spec{Type: Affine, Bits: 6, Group: 32, Scale: F16}, Rows: 1, K: 32, Data: make([]byte, 24), Scales: make([]byte, 2), Biases: make([]byte, 2)}, "affine"},
	} {
		err := tc.Transcode(make([]byte, c.src), c.m)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Q5_0") {
			t.Errorf("got %v, want an error naming Q5_0 and %q", err, c.want)
		}
	}
}

// A Q5_0 block whose offset −16·d leaves f16's range (values beyond 65504)
// cannot be held exactly as an f16 affine bias: refused, naming the block,
// where every finite smaller scale transcodes exactly.
func TestQ50OffsetRange(t *testing.T) {
	tc := Transcoders["Q5_0"]
	src := make([]byte, 3*22)
	for b, d := range []float32{4094, 1, 4096} {
		binary.LittleEndian.PutUint16(src[22*b:], ToF16(d))
	}
	m := transcodeMatrix(t, tc, tc.Into, src[:44], 1, 64)
	if got := m.Dequantize(); got[0] != -16*4094 || got[32] != -16 {
		t.Errorf("values %g and %g, want %g and -16", got[0], got[32], float32(-16*4094))
	}
	m = &Matrix{Spec: tc.Into, Rows: 1, K: 96, Data: make([]byte, 60), Scales: make([]byte, 6), Biases: make([]byte, 6)}
	if err := tc.Transcode(src, m); err == nil || !strings.Contains(err.Error(), "block 2") || !strings.Contains(err.Error(), "f16") {
		t.Errorf("got %v, want an error naming block 2 and f16", err)
	}
}

// TestPackRoundTrip: packers and Row agree with the values packed, within
// half a quantization step.
func TestPackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const rows, k = 4, 256
	w := normals(rng, rows*k)
	cases := []struct {
		name string
		m    *Matrix
		step float64 // largest quantization step of any value
	}{
		{"affine4", PackAffine(w, rows, k, 4, 64, BF16), 8.0 / 15},
		{"affine8", PackAffine(w, rows, k, 8, 32, F16), 8.0 / 255},
		{"affine3", PackAffine(w, rows, k, 3, 128, F32), 8.0 / 7},
		{"q8_0", PackQ8_0(w, rows, k), 4.0 / 127},
		{"q4_0", PackQ4_0(w, rows, k), 4.0 / 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.m.Check(c.name); err != nil {
				t.Fatal(err)
			}
			got := c.m.Dequantize()
			for i := range w {
				if d := math.Abs(float64(got[i] - w[i])); d > c.step/2+0.02 {
					t.Fatalf("value %d: %g packed as %g", i, w[i], got[i])
				}
			}
		})
	}
}

// TestHalf: the f16 helpers round trip every finite half.
func TestHalf(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 == 0x7c00 {
			continue
		}
		f := HalfToF32(uint16(h))
		if g := ToF16(f); g != uint16(h) && !(f == 0 && g&0x7fff == 0) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, g)
		}
	}
}

// TestValidate: unsupported bits, groups and ragged rows are errors.
func TestValidate(t *testing.T) {
	bad := []struct {
		s Spec
		k int
	}{
		{Spec{Type: Affine, Bits: 7, Group: 64}, 64},
		{Spec{Type: Affine, Bits: 4, Group: 48}, 96},
		{Spec{Type: Affine, Bits: 4, Group: 64}, 96},
		{Spec{Type: Q4_K}, 128},
		{Spec{Type: 99}, 64},
	}
	for _, b := range bad {
		if err := b.s.Validate(b.k); err == nil {
			t.Errorf("%v with k=%d: no error", b.s, b.k)
		}
	}
}

// BenchmarkTranscode: a 2048×2048 matrix of each transcoded format, in MB/s
// of its GGUF bytes.
func BenchmarkTranscode(b *testing.B) {
	for name, tc := range Transcoders {
		b.Run(name, func(b *testing.B) {
			const rows, k = 2048, 2048
			src := make([]byte, rows*k/tc.Values*tc.Bytes)
			m := transcodeMatrix(b, tc, tc.Into, src, rows, k)
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if err := tc.Transcode(src, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Widening keeps every value: a 2-, 3-, 5- or 6-bit affine matrix widened
// to each wider kernel width dequantizes to the very same floats.
func TestWidenKeepsValues(t *testing.T) {
	const rows, k = 5, 192
	w := normals(rand.New(rand.NewPCG(8, 9)), rows*k)
	for _, bits := range []int{2, 3, 4, 5, 6} {
		for _, group := range []int{32, 64} {
			m := PackAffine(w, rows, k, bits, group, BF16)
			want := m.Dequantize()
			for _, to := range Widenings(m.Spec) {
				wide := &Matrix{Spec: to, Rows: rows, K: k, Data: make([]byte, rows*to.RowBytes(k)), Scales: m.Scales, Biases: m.Biases}
				if err := m.Widen(to, wide.Data); err != nil {
					t.Fatal(err)
				}
				for i, v := range wide.Dequantize() {
					if math.Float32bits(v) != math.Float32bits(want[i]) {
						t.Fatalf("%v widened to %d bits: value %d is %g, want %g", m.Spec, to.Bits, i, v, want[i])
					}
				}
			}
		}
	}
	if n := len(Widenings(Spec{Type: Affine, Bits: 8, Group: 64})); n != 0 {
		t.Errorf("8 bits widen to %d formats, want none", n)
	}
	if n := len(Widenings(Spec{Type: Q4_K})); n != 0 {
		t.Errorf("Q4_K widens to %d formats, want none", n)
	}
	m := PackAffine(w, rows, k, 6, 64, BF16)
	for _, to := range []Spec{{Type: Affine, Bits: 4, Group: 64, Scale: BF16}, {Type: Affine, Bits: 8, Group: 32, Scale: BF16}} {
		if err := m.Widen(to, make([]byte, rows*to.RowBytes(k))); err == nil {
			t.Errorf("6 bits widened to %v: want an error", to)
		}
	}
}

// normals draws n standard normal values.
func normals(r *rand.Rand, n int) []float32 {
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	return w
}

// TestMLXMXFP4MatchesMLX: mlx's "mxfp4" rows transcoded give, exactly,
// mlx's dequantize (mlx/ops.cpp fp_dequantize): a 16-entry E2M1 table,
// codes taken from each byte's low nibble then its high one, times
// 2^(e−127), for every exponent whose largest value stays finite.
func TestMLXMXFP4MatchesMLX(t *testing.T) {
	e2m1 := [16]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6}
	r := rand.New(rand.NewPCG(7, 8))
	const rows, k = 5, 256
	words, exps := make([]byte, rows*k/2), make([]byte, rows*k/32)
	for i := range words {
		words[i] = byte(r.Uint32())
	}
	for i := range exps {
		exps[i] = byte(i * 251 / (len(exps) - 1)) // 0 (subnormal scales) to 251
	}
	for _, form := range append([]Spec{MLXMXFP4}, Forms(MLXMXFP4)...) {
		m := &Matrix{Spec: form, Rows: rows, K: k, Data: make([]byte, rows*form.RowBytes(k)),
			Scales: make([]byte, 4*len(exps)), Biases: make([]byte, 4*len(exps))}
		if err := TranscodeMLXMXFP4(words, exps, m); err != nil {
			t.Fatal(err)
		}
		for i, g := range m.Dequantize() {
			code := words[i/2] >> (4 * (i % 2)) & 0xf
			want := float32(e2m1[code] * math.Ldexp(1, int(exps[i/32])-127))
			if g != want {
				t.Fatalf("%v: value %d (code %d, exponent %d): %g, mlx %g", form, i, code, exps[i/32], g, want)
			}
		}
	}
	bad := []struct {
		words, exps, k int
		spec           Spec
		want           string
	}{
		{8, 1, 16, MLXMXFP4, "groups of 32"},
		{15, 1, 32, MLXMXFP4, "15 bytes of values"},
		{16, 2, 32, MLXMXFP4, "2 scales"},
		{16, 1, 32, Spec{Type: Affine, Bits: 4, Group: 32, Scale: F32}, "not"},
		{16, 1, 32, Spec{Type: Affine, Bits: 8, Group: 32, Scale: F16}, "not"},
	}
	for _, c := range bad {
		m := &Matrix{Spec: c.spec, Rows: 1, K: c.k, Data: make([]byte, c.k), Scales: make([]byte, 4), Biases: make([]byte, 4)}
		if err := TranscodeMLXMXFP4(make([]byte, c.words), make([]byte, c.exps), m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error saying %q", c, err, c.want)
		}
	}
}

// e4m3 is an E4M3 byte's value from the OCP format's definition (bias 7,
// subnormals m/8·2^−6), with E4M3FN's NaN codes read as the formula gives
// them (±480), as mlx does.
func e4m3(b byte) float64 {
	e, m := int(b>>3&15), float64(b&7)
	v := math.Ldexp(1+m/8, e-7)
	if e == 0 {
		v = math.Ldexp(m/8, -6)
	}
	if b&0x80 != 0 {
		return -v
	}
	return v
}

// TestMLXFPMatchesMLX: mlx's "nvfp4" and "mxfp8" rows laid out as NVFP4
// and MXFP8 rows give, exactly, mlx's dequantize (mlx/ops.cpp
// fp_dequantize): nvfp4 a 16-entry E2M1 table times an E4M3 scale a group
// of 16, every scale byte; mxfp8 E4M3 values, every byte, times 2^(e−127).
func TestMLXFPMatchesMLX(t *testing.T) {
	e2m1 := [16]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6}
	r := rand.New(rand.NewPCG(9, 10))
	const rows = 8
	// A row of 96 values ends in padding: 64 bytes for 54 (nvfp4), 112 for
	// 99 (mxfp8).
	for _, c := range []struct {
		mode string
		k    int
	}{{"nvfp4", 512}, {"mxfp8", 512}, {"nvfp4", 96}, {"mxfp8", 96}} {
		mode, k := c.mode, c.k
		fp := MLXFPModes[mode]
		words, scales := make([]byte, rows*k*fp.Bits/8), make([]byte, rows*k/fp.Group)
		for i := range words {
			words[i] = byte(r.Uint32())
		}
		for i := range scales {
			if mode == "nvfp4" {
				scales[i] = byte(i) & 0x7f // every non-negative E4M3 scale mlx may write
			} else {
				scales[i] = byte(i * 251 / (len(scales) - 1))
			}
		}
		m := &Matrix{Spec: fp.Spec, Rows: rows, K: k, Data: make([]byte, rows*fp.Spec.RowBytes(k))}
		if err := TranscodeMLXFP(mode, words, scales, m); err != nil {
			t.Fatal(err)
		}
		for i, g := range m.Dequantize() {
			var want float64
			if mode == "nvfp4" {
				want = e2m1[words[i/2]>>(4*(i%2))&0xf] * e4m3(scales[i/16])
			} else {
				want = e4m3(words[i]) * math.Ldexp(1, int(scales[i/32])-127)
			}
			if g != float32(want) {
				t.Fatalf("%s: value %d: %g, mlx %g", mode, i, g, want)
			}
		}
		if rb := fp.Spec.RowBytes(k); rb%16 != 0 || rb < k*fp.Bits/8+k/fp.Group || rb >= k*fp.Bits/8+k/fp.Group+16 {
			t.Errorf("%s: rows of %d values take %d bytes", mode, k, rb)
		}
	}
	for b := 0; b < 256; b++ {
		if got, want := E4M3ToF32(byte(b)), float32(e4m3(byte(b))); got != want {
			t.Errorf("E4M3 %#x: %g, want %g", b, got, want)
		}
	}
	bad := []struct {
		mode          string
		words, scales int
		k             int
		spec          Spec
		want          string
	}{
		{"nvfp4", 8, 1, 16, Spec{Type: NVFP4}, "units of 32"},
		{"nvfp4", 16, 1, 32, Spec{Type: NVFP4}, "1 scales"},
		{"mxfp8", 31, 1, 32, Spec{Type: MXFP8}, "31 bytes of values"},
		{"mxfp8", 32, 1, 32, Spec{Type: NVFP4}, "not NVFP4"},
		{"int4", 16, 1, 32, Spec{Type: NVFP4}, "not a floating-point"},
	}
	for _, c := range bad {
		m := &Matrix{Spec: c.spec, Rows: 1, K: c.k, Data: make([]byte, c.spec.RowBytes(max(32, c.k)))}
		if err := TranscodeMLXFP(c.mode, make([]byte, c.words), make([]byte, c.scales), m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error saying %q", c, err, c.want)
		}
	}
}

// Every affine width mlx writes has a kernel name, affine<bits>: the table
// KernelName reads stays in step with AffineBits.
func TestAffineKernelNames(t *testing.T) {
	for _, b := range AffineBits {
		if got, want := KernelName(Spec{Type: Affine, Bits: b, Group: 64, Scale: BF16}), fmt.Sprintf("affine%d", b); got != want {
			t.Errorf("%d bits: kernel name %q, want %q", b, got, want)
		}
	}
	if n := KernelName(Spec{Type: Affine, Bits: 7, Group: 64}); n != "" {
		t.Errorf("7 bits: kernel name %q, want none", n)
	}
}

// What reading a matrix moves leaves out the padding its rows are stored
// with: an MXFP8 row of 256 values is 256 codes and 8 scales, stored in 272
// bytes; formats stored unpadded read what they take.
func TestReadBytes(t *testing.T) {
	for _, tc := range []struct {
		s          Spec
		k          int
		read, take int64
	}{
		{Spec{Type: MXFP8}, 256, 264, 272},
		{Spec{Type: MXFP8}, 512, 528, 528},
		{Spec{Type: NVFP4}, 64, 36, 48},
		{Spec{Type: Affine, Bits: 4, Group: 64, Scale: BF16}, 256, 128 + 16, 128 + 16},
	} {
		if r, b := tc.s.ReadBytes(int64(2*tc.k), tc.k), tc.s.Bytes(int64(2*tc.k), tc.k); r != 2*tc.read || b != 2*tc.take {
			t.Errorf("%v, k %d: reads %d of %d, want %d of %d", tc.s, tc.k, r, b, 2*tc.read, 2*tc.take)
		}
	}
}
