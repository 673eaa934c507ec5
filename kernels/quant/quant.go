// Package quant holds the packed weight formats mtlbench reads: MLX's affine
// quantization (mlx-lm checkpoints) and GGUF's block types (llama.cpp
// files). It says how each lays out its bytes, checks a tensor's sizes
// against its shape, and is the pure-Go reference for the ops on packed
// weights (GEMV/GEMM, expert GEMVs, embedding rows) that every backend is
// checked against. docs/quantization.md describes the formats.
package quant

import (
	"fmt"
	"slices"
	"strings"
)

// Type is a packed weight format.
type Type uint8

const (
	// Affine is MLX's: per row, groups of Group values, each value Bits
	// wide in a little-endian bit stream of uint32 words (value i of a row
	// at bit i·Bits); a scale and a bias per group, w = scale·q + bias.
	Affine Type = iota + 1
	// Q8_0 is GGUF's blocks of 32: an f16 scale d and 32 int8, w = d·q.
	Q8_0
	// Q4_0 is GGUF's blocks of 32: an f16 scale d and 16 bytes of nibbles
	// (value j low nibble of byte j, value j+16 its high nibble), w = d·(q-8).
	Q4_0
	// Q4_K is GGUF's super-blocks of 256: f16 d and dmin, 12 bytes of
	// 6-bit sub-block scales and mins, 128 bytes of nibbles.
	Q4_K
	// Q6_K is GGUF's super-blocks of 256: 128 bytes of low nibbles, 64 of
	// high 2-bit pairs, 16 int8 sub-block scales, f16 d.
	Q6_K
	// Q2_K is GGUF's super-blocks of 256: 16 bytes of 4-bit sub-block
	// scales (low nibble) and mins (high nibble), one per 16 values, 64
	// bytes of 2-bit values, f16 d and dmin; w = d·sc·q − dmin·m.
	Q2_K
	// The IQ formats: super-blocks of 256 whose values are rows of a grid
	// (iq.go), 2.06, 2.31, 2.56, 3.06, 3.44, 1.56 and 1.75 bits a value.
	IQ2_XXS
	IQ2_XS
	IQ2_S
	IQ3_XXS
	IQ3_S
	IQ1_S
	IQ1_M
	// Q5_K is GGUF's super-blocks of 256 (176 bytes): f16 d and dmin,
	// Q4_K's 12 bytes of 6-bit scales and mins, 32 bytes of fifth bits
	// (bit j of byte l: value l of sub-block j), 128 bytes of nibbles as
	// Q4_K's; w = d·sc·q − dmin·m per 32 values. Metal has kernels for it;
	// the other backends run it transcoded (Transcoders, Forms).
	Q5_K
	// Q3_K is GGUF's super-blocks of 256 (110 bytes): 32 bytes of high
	// bits, 64 of 2-bit values, 12 of 6-bit scales (one per 16 values), f16
	// d; w = d·(sc − 32)·q with q in −4..3. Metal has kernels for it; the
	// other backends run it transcoded (Q8_0).
	Q3_K
	// IQ4_XS is GGUF's super-blocks of 256 (136 bytes): f16 d, 6-bit
	// scales per 32 values in 2 + 4 bytes, 128 bytes of 4-bit indices into
	// IQ4_NL's 16 int8 levels; w = d·(sc − 32)·level. Metal has kernels for
	// it; the other backends run it transcoded.
	IQ4_XS
	// IQ4_NL is GGUF's blocks of 32 (18 bytes): f16 d and 16 bytes of
	// 4-bit indices into 16 int8 levels, Q4_0's order; w = d·level. Metal
	// has kernels for it; the other backends run it transcoded (Q8_0).
	IQ4_NL
	// MXFP4 is GGUF's blocks of 32 (17 bytes): an E8M0 exponent e and 16
	// bytes of 4-bit E2M1 codes (Q4_0's order); w = E2M1(code)·2^(e−127).
	// mlx's mxfp4 matrices are read into it (TranscodeMLXMXFP4). Metal has
	// kernels for it; the other backends run it transcoded.
	MXFP4
	// NVFP4 is mlx's "nvfp4": a row is its k/2 bytes of 4-bit E2M1 codes
	// (mlx's order: value i in nibble i), then its k/16 E4M3 scales, one a
	// group of 16, padded to 16 bytes (FPRowValues); w = E2M1(code)·E4M3(s).
	// Every backend has kernels for it, as for MXFP8.
	NVFP4
	// MXFP8 is mlx's "mxfp8": a row is its k E4M3 values, then its k/32
	// E8M0 exponents, padded to 16 bytes; w = E4M3(q)·2^(e−127).
	MXFP8
)

// transcodedElsewhere are the GGUF formats with kernels on Metal only:
// CUDA and the CPU run them in their transcoders' forms (Forms).
var transcodedElsewhere = []Type{Q5_K, Q3_K, IQ4_XS, IQ4_NL, MXFP4}

// MetalOnly reports whether s's format has kernels on Metal only: CUDA
// and the CPU run it in one of Forms(s).
func MetalOnly(s Spec) bool { return slices.Contains(transcodedElsewhere, s.Type) }

// ggmlNames are GGUF's block formats' ggml names, which are also their
// String (as mlxNames are mlx's), and kernelNames the suffixes of their GPU kernels, the same in
// lower case: the GPU backends look a pipeline up by name for every
// dispatch they encode.
var (
	ggmlNames = map[Type]string{Q8_0: "Q8_0", Q4_0: "Q4_0", Q2_K: "Q2_K", Q3_K: "Q3_K", Q4_K: "Q4_K", Q5_K: "Q5_K",
		Q6_K: "Q6_K", IQ4_XS: "IQ4_XS", IQ4_NL: "IQ4_NL", MXFP4: "MXFP4", IQ2_XXS: "IQ2_XXS", IQ2_XS: "IQ2_XS", IQ2_S: "IQ2_S",
		IQ3_XXS: "IQ3_XXS", IQ3_S: "IQ3_S", IQ1_S: "IQ1_S", IQ1_M: "IQ1_M"}
	// mlxNames are the formats of mlx's nvfp4 and mxfp8 modes.
	mlxNames    = map[Type]string{NVFP4: "NVFP4", MXFP8: "MXFP8"}
	kernelNames = func() map[Type]string {
		m := make(map[Type]string, len(ggmlNames)+len(mlxNames))
		for _, names := range []map[Type]string{ggmlNames, mlxNames} {
			for t, n := range names {
				m[t] = strings.ToLower(n)
			}
		}
		return m
	}()
)

// Float is the element type of an affine format's scales and biases: the
// checkpoint's float dtype.
type Float uint8

const (
	F32 Float = iota
	F16
	BF16
)

// Size is the bytes of one value.
func (f Float) Size() int {
	if f == F32 {
		return 4
	}
	return 2
}

func (f Float) String() string { return [...]string{"f32", "f16", "bf16"}[f] }

// Spec is one tensor's packing.
type Spec struct {
	Type  Type
	Bits  int   // Affine: bits per value (2, 3, 4, 5, 6 or 8)
	Group int   // Affine: values per scale (32, 64 or 128)
	Scale Float // Affine: dtype of scales and biases
}

// AffineBits are the bit widths an affine tensor may have, and AffineGroups
// its group sizes: what mlx's quantize accepts.
var (
	AffineBits   = []int{2, 3, 4, 5, 6, 8}
	AffineGroups = []int{32, 64, 128}
)

// Block is the values one block (affine: one group) holds.
func (s Spec) Block() int {
	switch s.Type {
	case Affine:
		return s.Group
	case Q8_0, Q4_0:
		return 32
	case Q4_K, Q6_K, Q2_K, Q5_K, Q3_K, IQ4_XS:
		return 256
	case IQ4_NL, MXFP4, NVFP4, MXFP8:
		return 32
	}
	if IsIQ(s.Type) {
		return 256
	}
	return 0
}

// BlockBytes is the packed bytes of one block (affine: its values only;
// its scale and bias are in their own tensors); 0 for NVFP4 and MXFP8,
// whose rows are no blocks (RowBytes).
func (s Spec) BlockBytes() int {
	switch s.Type {
	case Affine:
		return s.Group * s.Bits / 8
	case Q8_0:
		return 34
	case Q4_0:
		return 18
	case Q4_K:
		return 144
	case Q6_K:
		return 210
	case Q2_K:
		return 84
	case Q5_K:
		return 176
	case Q3_K:
		return 110
	case IQ4_XS:
		return 136
	case IQ4_NL:
		return 18
	case MXFP4:
		return 17
	}
	return iqBytes[s.Type]
}

// RowBytes is the packed bytes of a row of k values.
func (s Spec) RowBytes(k int) int {
	if fp, ok := fpRows[s.Type]; ok {
		return fpRowBytes(fp, k)
	}
	return k / s.Block() * s.BlockBytes()
}

// affineKernels are the affine widths' kernel suffixes, by bit width: the
// GPU backends look a pipeline up by name for every dispatch they encode.
var affineKernels = [...]string{2: "affine2", 3: "affine3", 4: "affine4", 5: "affine5", 6: "affine6", 8: "affine8"}

// KernelName is the suffix of the GPU kernels (Metal and CUDA) for s's
// format: affine2 to affine8 by bit width, a GGUF format's ggml name in
// lower case (q4_k, iq2_xxs); "" for a format that has none. A backend may
// lack some of them (SupportsQuant says which).
func KernelName(s Spec) string {
	if s.Type == Affine {
		if slices.Contains(AffineBits, s.Bits) {
			return affineKernels[s.Bits]
		}
		return ""
	}
	return kernelNames[s.Type]
}

// KernelFormats names the formats with GPU kernels (KernelName) that
// keep accepts, for a backend's refusal of one it lacks: the affine widths
// ("affine 2, 3, 4, 5, 6 and 8 bits"), then the others in Type order. It
// is read from the tables, so a format given kernels is named with them.
func KernelFormats(keep func(Spec) bool) string {
	var bits []string
	for _, b := range AffineBits {
		if keep(Spec{Type: Affine, Bits: b, Group: AffineGroups[0]}) {
			bits = append(bits, fmt.Sprint(b))
		}
	}
	var names []string
	if n := len(bits); n > 0 {
		list := bits[0]
		if n > 1 {
			list = strings.Join(bits[:n-1], ", ") + " and " + bits[n-1]
		}
		names = append(names, "affine "+list+" bits")
	}
	for t := Affine + 1; kernelNames[t] != ""; t++ {
		if s := (Spec{Type: t}); keep(s) {
			names = append(names, s.String())
		}
	}
	return strings.Join(names, ", ")
}

// Groups is the scales (and biases) of a row of k values: affine only.
func (s Spec) Groups(k int) int {
	if s.Type != Affine {
		return 0
	}
	return k / s.Group
}

// Bytes is everything n values in rows of k take: packed values, and for
// affine formats their scales and biases.
func (s Spec) Bytes(n int64, k int) int64 {
	rows := n / int64(k)
	return rows * int64(s.RowBytes(k)+2*s.Groups(k)*s.Scale.Size())
}

// ReadBytes is what reading n values in rows of k must move: Bytes less
// the padding an NVFP4 or MXFP8 row is stored with (to 16 bytes), which no
// kernel reads. Cost models and rooflines count these.
func (s Spec) ReadBytes(n int64, k int) int64 {
	fp, ok := fpRows[s.Type]
	if !ok {
		return s.Bytes(n, k)
	}
	return n / int64(k) * int64(k*fp.Bits/8+k/fp.Group)
}

func (s Spec) String() string {
	if s.Type == Affine {
		return fmt.Sprintf("affine %d-bit, group %d, %v scales", s.Bits, s.Group, s.Scale)
	}
	if n, ok := ggmlNames[s.Type]; ok {
		return n
	}
	if n, ok := mlxNames[s.Type]; ok {
		return n
	}
	return fmt.Sprintf("quant(%d)", uint8(s.Type))
}

// Validate checks that the packing exists and fits rows of k values.
func (s Spec) Validate(k int) error {
	switch s.Type {
	case Affine:
		if !slices.Contains(AffineBits, s.Bits) {
			return fmt.Errorf("affine quantization with %d bits is not supported (bits: %s)", s.Bits, ints(AffineBits))
		}
		if !slices.Contains(AffineGroups, s.Group) {
			return fmt.Errorf("affine quantization with group size %d is not supported (group sizes: %s)", s.Group, ints(AffineGroups))
		}
		if s.Scale > BF16 {
			return fmt.Errorf("affine scales of dtype %d are not supported", s.Scale)
		}
	case Q8_0, Q4_0, Q4_K, Q6_K, Q2_K, Q5_K, Q3_K, IQ4_XS, IQ4_NL, MXFP4, NVFP4, MXFP8:
	default:
		if !IsIQ(s.Type) {
			return fmt.Errorf("unknown quantization type %d", s.Type)
		}
	}
	if k <= 0 || k%s.Block() != 0 {
		return fmt.Errorf("%v packs rows in blocks of %d values; a row of %d values does not divide", s, s.Block(), k)
	}
	return nil
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// Matrix is a packed [Rows][K] weight, row-major: row r's packed values are
// Data[r·RowBytes(K):], and for affine formats its scales and biases are
// Scales and Biases from r·Groups(K) on.
type Matrix struct {
	Spec           Spec
	Rows, K        int
	Data           []byte
	Scales, Biases []byte
}

// Check verifies every buffer holds exactly what the shape needs; name
// labels the error.
func (m *Matrix) Check(name string) error {
	if err := m.Spec.Validate(m.K); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if want := m.Rows * m.Spec.RowBytes(m.K); len(m.Data) != want {
		return fmt.Errorf("%s: %d bytes of packed %v values for %d rows of %d (want %d)", name, len(m.Data), m.Spec, m.Rows, m.K, want)
	}
	if m.Spec.Type == Affine {
		want := m.Rows * m.Spec.Groups(m.K) * m.Spec.Scale.Size()
		if len(m.Scales) != want || len(m.Biases) != want {
			return fmt.Errorf("%s: scales of %d and biases of %d bytes for %d rows of %d groups of %v (want %d each)",
				name, len(m.Scales), len(m.Biases), m.Rows, m.Spec.Groups(m.K), m.Spec.Scale, want)
		}
	}
	return nil
}

// Expert returns expert e of a stacked [experts][rows][k] matrix: a view,
// no copy.
func (m *Matrix) Expert(e, experts int) *Matrix {
	r := m.Rows / experts
	rb, g := m.Spec.RowBytes(m.K), m.Spec.Groups(m.K)*m.Spec.Scale.Size()
	x := &Matrix{Spec: m.Spec, Rows: r, K: m.K, Data: m.Data[e*r*rb : (e+1)*r*rb]}
	if m.Spec.Type == Affine {
		x.Scales, x.Biases = m.Scales[e*r*g:(e+1)*r*g], m.Biases[e*r*g:(e+1)*r*g]
	}
	return x
}
