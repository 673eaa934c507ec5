package quant

import (
	"fmt"
	"math"
	"slices"
)

// MLX's floating-point quantization modes (mlx.core.quantize's "mxfp4",
// "nvfp4" and "mxfp8") keep a row's values as 4- or 8-bit floats with one
// scale a group, and no biases. mlx-lm writes them with --q-mode.

// MLXMXFP4 is what an mlx "mxfp4" matrix is read as: GGUF's MXFP4 blocks,
// the very bytes in another order (docs/quantization.md, "MLX's mxfp4"),
// or one of their forms (Forms) on a backend without MXFP4 kernels.
var MLXMXFP4 = Spec{Type: MXFP4}

// MLXMXFP4Group and MLXMXFP4Bits are the only group size and width mlx
// accepts in mode "mxfp4".
const (
	MLXMXFP4Group = 32
	MLXMXFP4Bits  = 4
)

// TranscodeMLXMXFP4 rewrites rows of k values that mlx packed in mode
// "mxfp4" into m, as MLXMXFP4's blocks (an exponent, then value j in byte
// j's low nibble and value j+16 in its high one) or one of their affine
// forms (Forms(MLXMXFP4)): words holds a row's 4-bit E2M1 codes eight to
// a little-endian uint32, value i at bit 4i (so byte p holds values 2p and
// 2p+1 in its low and high nibbles), and exps one E8M0 exponent a group of
// 32, w = E2M1(code)·2^(e−127).
func TranscodeMLXMXFP4(words, exps []byte, m *Matrix) error {
	forms := append([]Spec{MLXMXFP4}, Forms(MLXMXFP4)...)
	if !slices.Contains(forms, m.Spec) {
		return fmt.Errorf("mxfp4: transcodes into %v, not %v", formsString(forms), m.Spec)
	}
	if m.K <= 0 || m.K%MLXMXFP4Group != 0 {
		return fmt.Errorf("mxfp4 packs rows in groups of %d values; a row of %d values does not divide", MLXMXFP4Group, m.K)
	}
	groups := m.Rows * m.K / MLXMXFP4Group
	if len(words) != groups*16 || len(exps) != groups {
		return fmt.Errorf("mxfp4: %d bytes of values and %d scales for %d rows of %d values (want %d and %d)",
			len(words), len(exps), m.Rows, m.K, groups*16, groups)
	}
	if err := m.Check("mxfp4 transcoded"); err != nil {
		return err
	}
	if m.Spec == MLXMXFP4 {
		forRuns(groups, transcodeRun, func(lo, hi int) {
			for g := lo; g < hi; g++ {
				blk, src := m.Data[17*g:17*g+17], words[16*g:16*g+16]
				blk[0] = exps[g]
				for j := 0; j < 16; j++ {
					// Value j and j+16: nibble j%2 of bytes j/2 and 8+j/2.
					lo, hi := src[j/2]>>(4*(j%2))&0xf, src[8+j/2]>>(4*(j%2))&0xf
					blk[1+j] = lo | hi<<4
				}
			}
		})
		return nil
	}
	bits := m.Spec.Bits
	forRuns(groups, transcodeRun, func(lo, hi int) {
		var codes [MLXMXFP4Group]byte
		for g := lo; g < hi; g++ {
			mxfp4Scale(exps[g], m.Scales[4*g:4*g+4], m.Biases[4*g:4*g+4])
			for p, b := range words[16*g : 16*g+16] {
				codes[2*p] = byte(MXFP4Levels[b&0xf] + 12)
				codes[2*p+1] = byte(MXFP4Levels[b>>4] + 12)
			}
			packCodes(m.Data[4*bits*g:4*bits*(g+1)], codes[:], bits)
		}
	})
	return nil
}

// MLXFP is one of mlx's floating-point modes: its only group size and
// width, and the format its matrices are read as (mxfp4 as GGUF's MXFP4
// blocks; nvfp4 and mxfp8 as rows of their values, then their scales).
type MLXFP struct {
	Group, Bits int
	Spec        Spec
}

// MLXFPModes are mlx's floating-point modes by name (mlx's fp_quantize:
// mxfp4 and mxfp8 an E8M0 exponent a group of 32, nvfp4 an E4M3 scale a
// group of 16).
var MLXFPModes = map[string]MLXFP{
	"mxfp4": {Group: MLXMXFP4Group, Bits: MLXMXFP4Bits, Spec: MLXMXFP4},
	"nvfp4": fpRows[NVFP4],
	"mxfp8": fpRows[MXFP8],
}

// fpRows are the formats whose rows are mlx's values, then their scales
// (NVFP4, MXFP8), by type.
var fpRows = map[Type]MLXFP{
	NVFP4: {Group: 16, Bits: 4, Spec: Spec{Type: NVFP4}},
	MXFP8: {Group: 32, Bits: 8, Spec: Spec{Type: MXFP8}},
}

// FPRowValues is the bytes of an NVFP4 or MXFP8 row's values, where its
// scales begin: mlx's packing of the row, whole, so a kernel's unit of 32
// values is 16 (NVFP4) or 32 (MXFP8) bytes at a 16-byte aligned offset of
// a row, its scales one ushort or one byte further on (docs/quantization.md).
func FPRowValues(s Spec, k int) int { return k * fpRows[s.Type].Bits / 8 }

// fpRowBytes is an NVFP4 or MXFP8 row of k values: its values and its
// scales, padded to 16 bytes.
func fpRowBytes(fp MLXFP, k int) int { return (k*fp.Bits/8 + k/fp.Group + 15) &^ 15 }

// E2M1Values are E2M1's 16 codes' values (MXFP4Levels halved).
var E2M1Values = func() (v [16]float32) {
	for i, l := range MXFP4Levels {
		v[i] = float32(l) / 2
	}
	return v
}()

// E4M3ToF32 is an E4M3 byte's value as mlx reads it (its fp8_e4m3
// conversion: the low seven bits as the top of an f16's, times 256), so
// 0x7f and 0xff, which OCP's E4M3FN leaves NaN and mlx never writes (it
// saturates to ±448), read ±480.
func E4M3ToF32(b byte) float32 { return HalfToF32(uint16(b&0x80)<<8|uint16(b&0x7f)<<7) * 256 }

// E8M0ToF32 is 2^(e−127), with e = 0 the f32 subnormal 2^−127 (mlx's and
// ggml's reading; 255 is infinite).
func E8M0ToF32(e byte) float32 {
	if e == 0 {
		return math.Float32frombits(0x00400000)
	}
	return math.Float32frombits(uint32(e) << 23)
}

// TranscodeMLXFP lays out rows of k values that mlx packed in a
// floating-point mode as MLXFPModes[mode].Spec in m (for mxfp4 also its
// forms: TranscodeMLXMXFP4): words holds a row's codes, 4-bit ones eight
// to a little-endian uint32 with value i at bit 4i, 8-bit ones a byte
// each; scales one byte a group. An nvfp4 or mxfp8 row is copied whole,
// its scales after it.
func TranscodeMLXFP(mode string, words, scales []byte, m *Matrix) error {
	fp, ok := MLXFPModes[mode]
	if !ok {
		return fmt.Errorf("mlx mode %q is not a floating-point one (mxfp4, nvfp4, mxfp8)", mode)
	}
	if mode == "mxfp4" {
		return TranscodeMLXMXFP4(words, scales, m)
	}
	if m.Spec != fp.Spec {
		return fmt.Errorf("%s: transcodes into %v, not %v", mode, fp.Spec, m.Spec)
	}
	if m.K <= 0 || m.K%32 != 0 {
		return fmt.Errorf("%s is read in units of 32 values; a row of %d values does not divide", mode, m.K)
	}
	vb, sb := FPRowValues(fp.Spec, m.K), m.K/fp.Group // a row's bytes of values and of scales
	if len(words) != m.Rows*vb || len(scales) != m.Rows*sb {
		return fmt.Errorf("%s: %d bytes of values and %d scales for %d rows of %d values (want %d and %d)",
			mode, len(words), len(scales), m.Rows, m.K, m.Rows*vb, m.Rows*sb)
	}
	if err := m.Check(mode + " laid out"); err != nil {
		return err
	}
	rb := m.Spec.RowBytes(m.K)
	forRuns(m.Rows, max(1, transcodeRun*32/m.K), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := m.Data[r*rb : (r+1)*rb]
			copy(row, words[r*vb:(r+1)*vb])
			clear(row[vb+copy(row[vb:], scales[r*sb:(r+1)*sb]):])
		}
	})
	return nil
}
