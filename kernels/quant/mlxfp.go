package quant

import (
	"fmt"
	"slices"
)

// MLX's floating-point quantization modes (mlx.core.quantize's "mxfp4",
// "nvfp4" and "mxfp8") keep a row's values as 4- or 8-bit floats with one
// scale a group, and no biases. mlx-lm writes them with --q-mode.

// MLXMXFP4 is what an mlx "mxfp4" matrix runs as: MXFP4's values exactly,
// as GGUF's MXFP4 blocks are (docs/quantization.md, "MLX's mxfp4").
var MLXMXFP4 = Transcoders["MXFP4"].Into

// MLXMXFP4Group and MLXMXFP4Bits are the only group size and width mlx
// accepts in mode "mxfp4".
const (
	MLXMXFP4Group = 32
	MLXMXFP4Bits  = 4
)

// TranscodeMLXMXFP4 rewrites rows of k values that mlx packed in mode
// "mxfp4" into m, in MLXMXFP4 or a wider affine form of it
// (Transcoders["MXFP4"].Forms()): words holds a row's 4-bit E2M1 codes eight to
// a little-endian uint32, value i at bit 4i (so byte p holds values 2p and
// 2p+1 in its low and high nibbles), and exps one E8M0 exponent a group of
// 32, w = E2M1(code)·2^(e−127).
func TranscodeMLXMXFP4(words, exps []byte, m *Matrix) error {
	forms := Transcoders["MXFP4"].Forms()
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
