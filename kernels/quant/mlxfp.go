package quant

import (
	"fmt"
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
