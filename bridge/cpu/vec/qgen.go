//go:build ignore

// qgen writes qdot_amd64.s and qdot_kernels_amd64.go: AVX2+FMA kernels that
// dot four rows of a packed weight matrix with one activation row at a
// time, every format's blocks widened and scaled in registers
// (docs/quantization.md). Four rows share each activation load and give
// four independent FMA chains; the generator unrolls what differs between
// formats and scale dtypes:
//
//	go run qgen.go
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"math"
	"os"
)

// gen writes one ISA's kernels: AVX2 (Y registers, 8 lanes) or AVX-512
// (Z registers, 16 lanes; the same code, half the instructions a byte).
type gen struct {
	b   *bytes.Buffer
	z   bool
	vw  int    // f32 lanes
	isa string // name suffix
}

func (g *gen) p(f string, a ...any) { fmt.Fprintf(g.b, "\t"+f+"\n", a...) }
func (g *gen) label(l string)       { fmt.Fprintf(g.b, "%s:\n", l) }

// v names vector register n at the kernel's width.
func (g *gen) v(n int) string {
	if g.z {
		return fmt.Sprintf("Z%d", n)
	}
	return fmt.Sprintf("Y%d", n)
}

// h names the half-width register n: the source of a full-width f16
// conversion.
func (g *gen) h(n int) string {
	if g.z {
		return fmt.Sprintf("Y%d", n)
	}
	return fmt.Sprintf("X%d", n)
}

// Integer logic has no unsized EVEX form.
func (g *gen) and() string {
	if g.z {
		return "VPANDD"
	}
	return "VPAND"
}

// nibConst loads what nibble widening needs into register 15: on AVX-512
// the floats 0..15, which VPERMPS indexes with a value's low 4 bits (no
// mask, no conversion); on AVX2 the mask 15.
func (g *gen) nibConst() {
	if g.z {
		g.p("VMOVUPS qnibf<>(SB), Z15")
		return
	}
	g.broadcast32(15, 15)
}

// nibLo turns register n's dwords (zero-extended bytes) into the floats of
// their low nibbles, nibHi of src's high nibbles into dst.
func (g *gen) nibLo(n int) {
	if g.z {
		g.p("VPERMPS Z15, Z%d, Z%d", n, n)
		return
	}
	g.p("VPAND Y15, Y%d, Y%d", n, n)
	g.p("VCVTDQ2PS Y%d, Y%d", n, n)
}

func (g *gen) nibHi(src, dst int) {
	g.p("VPSRLD $4, %s, %s", g.v(src), g.v(dst))
	if g.z {
		g.p("VPERMPS Z15, Z%d, Z%d", dst, dst)
		return
	}
	g.p("VCVTDQ2PS Y%d, Y%d", dst, dst)
}

// hiPart is where a row's high-nibble products go: on AVX-512 registers
// of their own (Z16-Z19), added to the partial dot once a block; on AVX2,
// short of registers, the partial dot itself.
func (g *gen) hiPart(r int) string {
	if g.z {
		return fmt.Sprintf("Z%d", 16+r)
	}
	return g.part(r)
}

// addHi adds the high-nibble partial dots into the partial dots.
func (g *gen) addHi() {
	if g.z {
		for r := 0; r < 4; r++ {
			g.p("VADDPS Z%d, %s, %s", 16+r, g.part(r), g.part(r))
		}
	}
}

func (g *gen) or() string {
	if g.z {
		return "VPORD"
	}
	return "VPOR"
}

// Register map shared by every kernel:
//
//	SI  activations (x; the even values for affine 4-bit)
//	R13 the odd values (affine 4-bit)
//	DI  prepared sums (QPrepare's lane sums, S32 or 32·S16 per block)
//	BX  row 0 of the 4 weight rows; rows at stride R10 (R15 = 3·R10), which
//	    the driver makes a quarter of its rows: 4 long streams (qRun)
//	R8, R9  row 0's scales and biases (affine); rows at stride R11 (R12 = 3·R11)
//	R11 K-quants: the scratch buffer (sc) of decoded scales
//	CX  blocks left, DX inner iterations left, AX and R14 scratch
//	Y0-Y3 (Z0-Z3) the rows' sums, Y4-Y7 a block's partial dots, Y8 x, Y9 widened
//	weights, Y10 a scale, Y11-Y14 scratch and constants, Y15 the nibble mask
const (
	argList = "x, x2, p *float32, w *byte, ldw int, sc, bi *byte, lds int, dst *float32, nb, ni, ldd int"
	argSize = 96
)

func wrow(r, off int) string {
	switch r {
	case 0:
		return fmt.Sprintf("%d(BX)", off)
	case 1:
		return fmt.Sprintf("%d(BX)(R10*1)", off)
	case 2:
		return fmt.Sprintf("%d(BX)(R10*2)", off)
	}
	return fmt.Sprintf("%d(BX)(R15*1)", off)
}

func srow(base string, r int) string {
	switch r {
	case 0:
		return fmt.Sprintf("(%s)", base)
	case 1:
		return fmt.Sprintf("(%s)(R11*1)", base)
	case 2:
		return fmt.Sprintf("(%s)(R11*2)", base)
	}
	return fmt.Sprintf("(%s)(R12*1)", base)
}

// pfDist is how far ahead of the 4 row streams the kernels prefetch,
// in bytes: the four streams of a core are more than its hardware
// prefetchers keep far enough ahead on their own.
var pfDist = 1024

// prefetch fetches the lines n bytes of each row will advance by, pfDist
// ahead, into L1.
func (g *gen) prefetch(n int) {
	for r := 0; r < 4; r++ {
		for off := 0; off < n; off += 64 {
			g.p("PREFETCHT0 %s", wrow(r, pfDist+off))
		}
	}
}

// advanceRows steps BX past the n bytes each of the four weight rows just
// gave, prefetching the lines pfDist ahead of them first.
func (g *gen) advanceRows(n int) {
	g.prefetch(n)
	g.p("ADDQ $%d, BX", n)
}

// endBlockLoop closes the loop over CX blocks (label block) and the kernel.
func (g *gen) endBlockLoop() {
	g.p("DECQ CX")
	g.p("JNZ block")
	g.footer()
}

func (g *gen) acc(r int) string  { return g.v(r) }
func (g *gen) part(r int) string { return g.v(4 + r) }

func (g *gen) header(name string, frame int) {
	fmt.Fprintf(g.b, "// func %s(%s)\n", name, argList)
	fmt.Fprintf(g.b, "TEXT ·%s(SB), NOSPLIT, $%d-%d\n", name, frame, argSize)
	g.p("MOVQ x+0(FP), SI")
	g.p("MOVQ x2+8(FP), R13")
	g.p("MOVQ p+16(FP), DI")
	g.p("MOVQ w+24(FP), BX")
	g.p("MOVQ ldw+32(FP), R10")
	g.p("MOVQ sc+40(FP), R8")
	g.p("MOVQ bi+48(FP), R9")
	g.p("MOVQ lds+56(FP), R11")
	g.p("MOVQ nb+72(FP), CX")
	g.p("LEAQ (R10)(R10*2), R15")
	g.p("LEAQ (R11)(R11*2), R12")
	for r := 0; r < 4; r++ {
		// VEX zeroing clears a Z register too.
		g.p("VXORPS Y%d, Y%d, Y%d", r, r, r)
	}
}

// broadcast32 fills vector register y with a dword constant.
func (g *gen) broadcast32(v uint32, y int) {
	g.p("MOVL $0x%x, AX", v)
	g.p("VMOVD AX, X%d", y)
	g.p("VPBROADCASTD X%d, %s", y, g.v(y))
}

// half broadcasts the f16 at addr as float32 into vector register y.
func (g *gen) half(addr string, y int) {
	g.p("VPBROADCASTW %s, %s", addr, g.h(y))
	g.p("VCVTPH2PS %s, %s", g.h(y), g.v(y))
}

// scale broadcasts an affine scale or bias of dtype f into register y.
func (g *gen) scale(f, addr string, y int) {
	switch f {
	case "F32":
		g.p("VBROADCASTSS %s, %s", addr, g.v(y))
	case "F16":
		g.half(addr, y)
	case "BF16":
		// bf16 is the high half of a float32: each dword holds the value
		// twice, and the left shift keeps one.
		g.p("VPBROADCASTW %s, %s", addr, g.v(y))
		g.p("VPSLLD $16, %s, %s", g.v(y), g.v(y))
	}
}

var scaleSize = map[string]int{"F32": 4, "F16": 2, "BF16": 2}

// footer reduces each row's sum and stores them at dst, ldd bytes apart.
func (g *gen) footer() {
	g.p("MOVQ dst+64(FP), AX")
	g.p("MOVQ ldd+88(FP), DX")
	g.p("LEAQ (DX)(DX*2), R14")
	for r := 0; r < 4; r++ {
		if g.z {
			g.p("VEXTRACTF64X4 $1, Z%d, Y9", r)
			g.p("VADDPS Y9, Y%d, Y%d", r, r)
		}
		g.p("VEXTRACTF128 $1, Y%d, X9", r)
		g.p("VADDPS X9, X%d, X%d", r, r)
		g.p("VPERMILPS $0x4E, X%d, X9", r)
		g.p("VADDPS X9, X%d, X%d", r, r)
		g.p("VPERMILPS $0xB1, X%d, X9", r)
		g.p("VADDSS X9, X%d, X%d", r, r)
		g.p("VMOVSS X%d, %s", r, []string{"(AX)", "(AX)(DX*1)", "(AX)(DX*2)", "(AX)(R14*1)"}[r])
	}
	g.p("VZEROUPPER")
	g.p("RET")
	g.b.WriteString("\n")
}

// fma accumulates x·w into a partial dot, the first product of a block
// starting it.
func (g *gen) fma(first bool, x, w, dst string) {
	if first {
		g.p("VMULPS %s, %s, %s", x, w, dst)
	} else {
		g.p("VFMADD231PS %s, %s, %s", x, w, dst)
	}
}

// affineTail applies a group's scales to its partial dots and its biases
// to the group's lane sums (DI; 8 of them, the upper lanes of a Z register
// zeroed by the VEX load): sum += s·part + b·lanes.
func (g *gen) affineTail(f string) {
	g.p("VMOVUPS (DI), Y11")
	for r := 0; r < 4; r++ {
		g.scale(f, srow("R8", r), 10)
		g.p("VFMADD231PS %s, %s, %s", g.v(10), g.part(r), g.acc(r))
		g.scale(f, srow("R9", r), 12)
		g.p("VFMADD231PS %s, %s, %s", g.v(12), g.v(11), g.acc(r))
	}
	g.p("ADDQ $32, DI")
	g.p("ADDQ $%d, R8", scaleSize[f])
	g.p("ADDQ $%d, R9", scaleSize[f])
}

// affine8: nb groups of ni·32 unsigned bytes.
func (g *gen) affine8(f string) string {
	name := "qAffine8" + f + g.isa
	g.header(name, 0)
	g.label("group")
	g.p("MOVQ ni+80(FP), DX")
	for r := 0; r < 4; r++ {
		g.p("VXORPS Y%d, Y%d, Y%d", 4+r, 4+r, 4+r)
	}
	g.label("inner")
	for c := 0; c < 32/g.vw; c++ {
		g.p("VMOVUPS %d(SI), %s", 4*g.vw*c, g.v(8))
		for r := 0; r < 4; r++ {
			g.p("VPMOVZXBD %s, %s", wrow(r, g.vw*c), g.v(9))
			g.p("VCVTDQ2PS %s, %s", g.v(9), g.v(9))
			g.fma(false, g.v(8), g.v(9), g.part(r))
		}
	}
	g.p("ADDQ $128, SI")
	g.advanceRows(32)
	g.p("DECQ DX")
	g.p("JNZ inner")
	g.affineTail(f)
	g.p("DECQ CX")
	g.p("JNZ group")
	g.footer()
	return name
}

// affine4: nb groups of ni·16 bytes; byte j's low nibble pairs with the
// even values (SI), its high nibble with the odd ones (R13).
func (g *gen) affine4(f string) string {
	name := "qAffine4" + f + g.isa
	g.header(name, 0)
	g.nibConst()
	g.label("group")
	g.p("MOVQ ni+80(FP), DX")
	for r := 0; r < 4; r++ {
		g.p("VXORPS Y%d, Y%d, Y%d", 4+r, 4+r, 4+r)
		if g.z {
			g.p("VPXORD Z%d, Z%d, Z%d", 16+r, 16+r, 16+r)
		}
	}
	g.label("inner")
	for c := 0; c < 16/g.vw; c++ {
		g.p("VMOVUPS %d(SI), %s", 4*g.vw*c, g.v(8))
		g.p("VMOVUPS %d(R13), %s", 4*g.vw*c, g.v(12))
		for r := 0; r < 4; r++ {
			g.p("VPMOVZXBD %s, %s", wrow(r, g.vw*c), g.v(9))
			g.nibHi(9, 13)
			g.nibLo(9)
			if g.z {
				g.p("VFMADD231PS Z8, Z9, %s", g.part(r))
				g.p("VFMADD231PS Z12, Z13, %s", g.hiPart(r))
				continue
			}
			// The low and high products are summed before they join the
			// partial dot, so its chain has one add per chunk.
			g.p("VMULPS Y8, Y9, Y9")
			g.p("VFMADD231PS Y12, Y13, Y9")
			g.p("VADDPS Y9, %s, %s", g.part(r), g.part(r))
		}
	}
	g.p("ADDQ $64, SI")
	g.p("ADDQ $64, R13")
	g.p("ADDQ $16, BX")
	g.p("DECQ DX")
	g.p("JNZ inner")
	// One prefetch a line: the group's bytes are ni·16 behind BX now.
	g.prefetch(16)
	g.addHi()
	g.affineTail(f)
	g.p("DECQ CX")
	g.p("JNZ group")
	g.footer()
	return name
}

// q8_0: nb blocks of 34 bytes (f16 d, 32 int8).
func (g *gen) q8_0() string {
	name := "qQ8_0" + g.isa
	g.header(name, 0)
	g.label("block")
	for c := 0; c < 32/g.vw; c++ {
		g.p("VMOVUPS %d(SI), %s", 4*g.vw*c, g.v(8))
		for r := 0; r < 4; r++ {
			g.p("VPMOVSXBD %s, %s", wrow(r, 2+g.vw*c), g.v(9))
			g.p("VCVTDQ2PS %s, %s", g.v(9), g.v(9))
			g.fma(c == 0, g.v(8), g.v(9), g.part(r))
		}
	}
	for r := 0; r < 4; r++ {
		g.half(wrow(r, 0), 10)
		g.p("VFMADD231PS %s, %s, %s", g.v(10), g.part(r), g.acc(r))
	}
	g.p("ADDQ $128, SI")
	g.advanceRows(34)
	g.endBlockLoop()
	return name
}

// q4_0: nb blocks of 18 bytes (f16 d, 16 bytes: value j byte j's low
// nibble, value j+16 its high one); w = d·(q-8), the 8 taken off with the
// block's lane sums (DI).
func (g *gen) q4_0() string {
	name := "qQ4_0" + g.isa
	g.header(name, 0)
	g.nibConst()
	g.p("MOVL $0x41000000, AX") // 8.0
	g.p("VMOVD AX, X14")
	g.p("VBROADCASTSS X14, %s", g.v(14))
	g.label("block")
	for c := 0; c < 16/g.vw; c++ {
		g.p("VMOVUPS %d(SI), %s", 4*g.vw*c, g.v(8))
		g.p("VMOVUPS %d(SI), %s", 64+4*g.vw*c, g.v(12))
		for r := 0; r < 4; r++ {
			g.p("VPMOVZXBD %s, %s", wrow(r, 2+g.vw*c), g.v(9))
			g.nibHi(9, 13)
			g.nibLo(9)
			g.fma(c == 0, g.v(8), g.v(9), g.part(r))
			g.fma(c == 0 && g.z, g.v(12), g.v(13), g.hiPart(r))
		}
	}
	g.addHi()
	g.p("VMOVUPS (DI), Y11")
	for r := 0; r < 4; r++ {
		g.p("VFNMADD231PS %s, %s, %s", g.v(14), g.v(11), g.part(r))
		g.half(wrow(r, 0), 10)
		g.p("VFMADD231PS %s, %s, %s", g.v(10), g.part(r), g.acc(r))
	}
	g.p("ADDQ $128, SI")
	g.p("ADDQ $32, DI")
	g.advanceRows(18)
	g.endBlockLoop()
	return name
}

// q4_k: nb super-blocks of 144 bytes (f16 d and dmin, 12 bytes of 6-bit
// scales and mins, 128 bytes of nibbles). A first pass decodes every
// super-block's eight d·scale per row into the scratch buffer (sc) and
// takes the mins off with the sub-blocks' sums S32 (DI); the second pass
// reads them back long after they were stored (a load of a lane of a
// vector stored just before stalls on store forwarding).
func (g *gen) q4_k() string {
	name := "qQ4_K" + g.isa
	g.header(name, 0)
	g.nibConst()
	g.q4kScales()
	g.p("MOVQ R13, BX")
	g.p("MOVQ sc+40(FP), R11")
	g.p("MOVQ nb+72(FP), CX")
	g.label("block")
	for s := 0; s < 8; s++ {
		for c := 0; c < 32/g.vw; c++ {
			g.p("VMOVUPS %d(SI), %s", 4*(32*s+g.vw*c), g.v(8))
			for r := 0; r < 4; r++ {
				g.p("VPMOVZXBD %s, %s", wrow(r, 16+32*(s/2)+g.vw*c), g.v(9))
				if s%2 == 0 {
					g.nibLo(9)
				} else {
					g.nibHi(9, 9)
				}
				g.fma(c == 0, g.v(8), g.v(9), g.part(r))
			}
		}
		for r := 0; r < 4; r++ {
			g.p("VBROADCASTSS %d(R11), %s", 32*r+4*s, g.v(10))
			g.p("VFMADD231PS %s, %s, %s", g.v(10), g.part(r), g.acc(r))
		}
	}
	g.p("ADDQ $1024, SI")
	g.p("ADDQ $128, R11")
	g.advanceRows(144)
	g.endBlockLoop()
	return name
}

// q6_k: nb super-blocks of 210 bytes (128 bytes of low nibbles, 64 of high
// bit pairs, 16 int8 scales, f16 d). Values are widened without their
// offset of 32, which the sub-blocks' sums times 32 (DI) take off per
// scale. Scales are decoded in a first pass, as q4_k's.
func (g *gen) q6_k() string {
	name := "qQ6_K" + g.isa
	g.header(name, 0)
	g.broadcast32(15, 15)
	g.broadcast32(0x30, 14)
	g.q6kScales()
	g.p("MOVQ R13, BX")
	g.p("MOVQ sc+40(FP), R11")
	g.p("MOVQ nb+72(FP), CX")
	g.label("block")
	// Sub-block s = 8n + 2v + i covers values 16s..16s+16: in half n,
	// variant v of bytes l = 16i..16i+16 (ggml's dequantize_row_q6_K).
	for s := 0; s < 16; s++ {
		n, v, i := s/8, s%8/2, s%2
		for c := 0; c < 16/g.vw; c++ {
			l := 16*i + g.vw*c
			g.p("VMOVUPS %d(SI), %s", 4*(16*s+g.vw*c), g.v(8))
			for r := 0; r < 4; r++ {
				g.p("VPMOVZXBD %s, %s", wrow(r, 64*n+l+32*(v&1)), g.v(9))
				g.p("VPMOVZXBD %s, %s", wrow(r, 128+32*n+l), g.v(13))
				if v < 2 {
					g.p("%s %s, %s, %s", g.and(), g.v(15), g.v(9), g.v(9))
				} else {
					g.p("VPSRLD $4, %s, %s", g.v(9), g.v(9))
				}
				// Bits 2v, 2v+1 of the high byte become bits 4, 5.
				switch v {
				case 0:
					g.p("VPSLLD $4, %s, %s", g.v(13), g.v(13))
				case 1:
					g.p("VPSLLD $2, %s, %s", g.v(13), g.v(13))
				case 3:
					g.p("VPSRLD $2, %s, %s", g.v(13), g.v(13))
				}
				g.p("%s %s, %s, %s", g.and(), g.v(14), g.v(13), g.v(13))
				g.p("%s %s, %s, %s", g.or(), g.v(13), g.v(9), g.v(9))
				g.p("VCVTDQ2PS %s, %s", g.v(9), g.v(9))
				g.fma(c == 0, g.v(8), g.v(9), g.part(r))
			}
		}
		for r := 0; r < 4; r++ {
			g.p("VBROADCASTSS %d(R11), %s", 64*r+4*s, g.v(10))
			g.p("VFMADD231PS %s, %s, %s", g.v(10), g.part(r), g.acc(r))
		}
	}
	g.p("ADDQ $1024, SI")
	g.p("ADDQ $256, R11")
	g.advanceRows(210)
	g.endBlockLoop()
	return name
}

// Integer dots (AVX-512 VNNI; docs/quantization.md): QPrepare has made x
// block fixed point, x ≈ d·xq per 32 values (|xq| ≤ M, qdot.go), stored as
// three int8 planes p2, p1, p0 with xq = 65536·p2 + 256·p1 + p0, so
// VPDPBUSD with the unsigned weights gives, in one register,
// ((Σq·p2)·256 + Σq·p1)·256 + Σq·p0 = Σq·xq exactly in int32. A unit is
// one 64-byte load of a row: 64 values at 8 bits, 128 at 4 (byte j's low
// nibble value 2j, its high one 2j+1, which pair with x's even and odd
// planes, so no shuffle is needed). The unit's lanes each cover 4 (8)
// consecutive values, so one block's lanes share d: the prepared dvec holds
// each lane's d, and a unit's sums become floats once, then times d and the
// group's scale (a per-lane scale vector where a unit spans groups). The
// biases meet the group sums of x in a first pass, 16 groups at a time.
//
// Unit layout (x, SI): 8 bits: p2[64] p1[64] p0[64] dvec[16]f32; 4 bits:
// the even values' p2, p1, p0, the odd values', dvec. p (DI): the group
// sums. nb: steps of max(unit, group) values; ni: groups of the row
// (biases).

// intIdx is lane i's scale in a unit of `per` values a lane when a unit
// spans several groups of g values.
func intIdx(per, g, i int) int { return per * i / g }

// affineInt: bits 4 or 8, group g, scale dtype f.
func (g *gen) affineInt(bits, grp int, f string, data *bytes.Buffer) string {
	name := fmt.Sprintf("qAffine%dG%d%sVNNI", bits, grp, f)
	unit, per, ub := 64, 4, 256 // values a unit, values a lane, unit bytes
	if bits == 4 {
		unit, per, ub = 128, 8, 448
	}
	units, spans := 1, 1 // units a step, groups a unit
	if grp > unit {
		units = grp / unit
	} else {
		spans = unit / grp
	}
	g.header(name, 0)
	ss := scaleSize[f]
	// The biases' pass: acc += bias·S over 16 groups at a time, the last
	// ones masked.
	g.p("MOVQ ni+80(FP), CX")
	g.label("bias")
	g.p("MOVL $0xffff, AX")
	g.p("CMPQ CX, $16")
	g.p("JGE biasfull")
	g.p("MOVL $1, AX")
	g.p("SHLL CX, AX")
	g.p("DECL AX")
	g.label("biasfull")
	g.p("KMOVW AX, K2")
	g.p("VMOVUPS.Z (DI), K2, Z8")
	for r := 0; r < 4; r++ {
		t := 24 + r
		switch f {
		case "F32":
			g.p("VMOVUPS.Z %s, K2, Z%d", srow("R9", r), t)
		case "F16":
			g.p("VMOVDQU16.Z %s, K2, Y%d", srow("R9", r), t)
			g.p("VCVTPH2PS Y%d, Z%d", t, t)
		case "BF16":
			g.p("VMOVDQU16.Z %s, K2, Y%d", srow("R9", r), t)
			g.p("VPMOVZXWD Y%d, Z%d", t, t)
			g.p("VPSLLD $16, Z%d, Z%d", t, t)
		}
		g.p("VFMADD231PS Z8, Z%d, Z%d", t, r)
	}
	g.p("ADDQ $64, DI")
	g.p("ADDQ $%d, R9", 16*ss)
	g.p("SUBQ $16, CX")
	g.p("JG bias")

	if bits == 4 {
		g.broadcast32(0x0f0f0f0f, 13)
	}
	if spans > 1 {
		// The scale vector: the unit's `spans` scales loaded (masked) and
		// permuted to their lanes (qidx).
		idx := fmt.Sprintf("qidx%dg%d%s<>", bits, grp, f)
		switch f {
		case "F32":
			for i := 0; i < 16; i++ {
				fmt.Fprintf(data, "DATA %s+%d(SB)/4, $%d\n", idx, 4*i, intIdx(per, grp, i))
			}
		case "BF16":
			// Word 2i+1 (the high half of lane i) the scale, word 2i a
			// zero word (31, which the masked load clears).
			for i := 0; i < 16; i++ {
				fmt.Fprintf(data, "DATA %s+%d(SB)/4, $0x%04x%04x\n", idx, 4*i, intIdx(per, grp, i), 31)
			}
		case "F16":
			// 16 halves, converted after the permute.
			for i := 0; i < 16; i += 2 {
				fmt.Fprintf(data, "DATA %s+%d(SB)/4, $0x%04x%04x\n", idx, 2*i, intIdx(per, grp, i+1), intIdx(per, grp, i))
			}
			for i := 32; i < 64; i += 4 {
				fmt.Fprintf(data, "DATA %s+%d(SB)/4, $0\n", idx, i)
			}
		}
		fmt.Fprintf(data, "GLOBL %s(SB), RODATA|NOPTR, $64\n\n", idx)
		g.p("VMOVDQU32 %s(SB), Z14", idx)
		g.p("MOVL $0x%x, AX", 1<<spans-1)
		g.p("KMOVW AX, K1")
	}
	g.p("MOVQ nb+72(FP), CX")
	g.p("TESTQ CX, CX")
	g.p("JZ done")
	g.label("step")
	for u := 0; u < units; u++ {
		// Plane registers p2, p1, p0 (and at 4 bits the odd values').
		ev, od := []int{8, 9, 10}, []int{11, 20, 21}
		for i, z := range ev {
			g.p("VMOVDQU32 %d(SI), Z%d", 64*i, z)
		}
		if bits == 4 {
			for i, z := range od {
				g.p("VMOVDQU32 %d(SI), Z%d", 192+64*i, z)
			}
		}
		g.p("VMOVUPS %d(SI), Z12", ub-64)
		for r := 0; r < 4; r++ {
			g.p("VMOVDQU32 %s, Z%d", wrow(r, 0), 24+r)
			g.p("VPXORD Z%d, Z%d, Z%d", 16+r, 16+r, 16+r)
			if bits == 4 {
				g.p("VPSRLW $4, Z%d, Z%d", 24+r, 28+r)
				g.p("VPANDD Z13, Z%d, Z%d", 24+r, 24+r)
				g.p("VPANDD Z13, Z%d, Z%d", 28+r, 28+r)
			}
		}
		// Σq·x24 = ((Σq·p2)·256 + Σq·p1)·256 + Σq·p0 in one register.
		for i := 0; i < 3; i++ {
			if i > 0 {
				for r := 0; r < 4; r++ {
					g.p("VPSLLD $8, Z%d, Z%d", 16+r, 16+r)
				}
			}
			for r := 0; r < 4; r++ {
				g.p("VPDPBUSD Z%d, Z%d, Z%d", ev[i], 24+r, 16+r)
				if bits == 4 {
					g.p("VPDPBUSD Z%d, Z%d, Z%d", od[i], 28+r, 16+r)
				}
			}
		}
		for r := 0; r < 4; r++ {
			g.p("VCVTDQ2PS Z%d, Z%d", 16+r, 16+r)
		}
		for r := 0; r < 4; r++ {
			switch {
			case spans > 1 || units == 1:
				g.p("VMULPS Z12, Z%d, Z%d", 16+r, 16+r)
			case u == 0:
				g.p("VMULPS Z12, Z%d, Z%d", 16+r, 4+r)
			default:
				g.p("VFMADD231PS Z12, Z%d, Z%d", 16+r, 4+r)
			}
		}
		g.p("ADDQ $%d, SI", ub)
		g.advanceRows(64)
	}
	// The step's scales.
	for r := 0; r < 4; r++ {
		t := 24 + r
		if spans == 1 {
			g.scale(f, srow("R8", r), t)
		} else {
			switch f {
			case "F32":
				g.p("VMOVUPS.Z %s, K1, Z%d", srow("R8", r), t)
				g.p("VPERMPS Z%d, Z14, Z%d", t, t)
			case "BF16":
				g.p("VMOVDQU16.Z %s, K1, Z%d", srow("R8", r), t)
				g.p("VPERMW Z%d, Z14, Z%d", t, t)
			case "F16":
				g.p("VMOVDQU16.Z %s, K1, Y%d", srow("R8", r), t)
				g.p("VPERMW Y%d, Y14, Y%d", t, t)
				g.p("VCVTPH2PS Y%d, Z%d", t, t)
			}
		}
		src := 16 + r
		if spans == 1 && units > 1 {
			src = 4 + r
		}
		g.p("VFMADD231PS Z%d, Z%d, Z%d", t, src, r)
	}
	g.p("ADDQ $%d, R8", spans*ss)
	g.p("DECQ CX")
	g.p("JNZ step")
	g.label("done")
	g.footer()
	return name
}

// prepInt quantizes x for the integer dots (qPrepareInt's layouts, which
// the integer kernels read): per block of 32 values d = max|x|/M and
// xq = round(x/d) (VCVTPS2DQ, to nearest), split into the planes
// p2 = (xq+32896)>>16, p1 and p0 (qdot.go), each dword truncated to its
// byte (at 4 bits the even and odd values to their own planes, a qword's
// low and high dword); each block's d to its lanes of the unit's dvec and
// its float sum to bs.
//
//	func qPrepInt{8,4,K4,Q40}(x *float32, dst *byte, bs *float32, n int, m float32)
func (g *gen) prepInt(layout string) string {
	name := "qPrepInt" + layout
	// Unit bytes, blocks a unit, lanes a block; a plane set is the three
	// planes (p2, p1, p0) of 64 bytes each.
	ub, blocks, lanes := 256, 2, 8
	switch layout {
	case "4":
		ub, blocks, lanes = 448, 4, 4
	case "K4":
		ub, blocks, lanes = 512, 4, 8
	case "Q40":
		ub, blocks, lanes = 512, 4, 4
	}
	// dvecAt is where block blk's lanes of d go in the unit.
	dvecAt := func(blk int) int {
		switch layout {
		case "4":
			return 384 + 16*blk
		case "K4":
			return 384 + 64*(blk&1) + 32*(blk>>1)
		case "Q40":
			return 384 + 16*blk
		}
		return 192 + 32*blk
	}
	fmt.Fprintf(g.b, "// func %s(x *float32, dst *byte, bs *float32, n int, m float32)\n", name)
	fmt.Fprintf(g.b, "TEXT ·%s(SB), NOSPLIT, $0-36\n", name)
	g.p("MOVQ x+0(FP), SI")
	g.p("MOVQ dst+8(FP), DI")
	g.p("MOVQ bs+16(FP), R8")
	g.p("MOVQ n+24(FP), CX")
	g.p("TESTQ CX, CX")
	g.p("JZ done")
	// Constants in Z16-Z20, which no VEX instruction clears.
	g.p("MOVL $0x7fffffff, AX")
	g.p("VPBROADCASTD AX, Z16")
	g.p("MOVL $128, AX")
	g.p("VPBROADCASTD AX, Z17")
	g.p("VBROADCASTSS m+32(FP), Z18")
	g.p("MOVL $0x%08x, AX", math.Float32bits(1e-30))
	g.p("VPBROADCASTD AX, Z19")
	g.p("MOVL $32896, AX") // 128·256 + 128
	g.p("VPBROADCASTD AX, Z20")
	g.label("unit")
	for blk := 0; blk < blocks; blk++ {
		g.p("VMOVUPS (SI), Z0")
		g.p("VMOVUPS 64(SI), Z1")
		g.p("VPANDD Z16, Z0, Z2")
		g.p("VPANDD Z16, Z1, Z3")
		g.p("VMAXPS Z3, Z2, Z2")
		g.p("VADDPS Z1, Z0, Z4")
		for _, op := range []struct {
			v, s string
			r    int
		}{{"VMAXPS", "VMAXSS", 2}, {"VADDPS", "VADDSS", 4}} {
			r := op.r
			g.p("VEXTRACTF64X4 $1, Z%d, Y%d", r, r+1)
			g.p("%s Y%d, Y%d, Y%d", op.v, r+1, r, r)
			g.p("VEXTRACTF128 $1, Y%d, X%d", r, r+1)
			g.p("%s X%d, X%d, X%d", op.v, r+1, r, r)
			g.p("VPERMILPS $0x4E, X%d, X%d", r, r+1)
			g.p("%s X%d, X%d, X%d", op.v, r+1, r, r)
			g.p("VPERMILPS $0xB1, X%d, X%d", r, r+1)
			g.p("%s X%d, X%d, X%d", op.s, r+1, r, r)
		}
		g.p("VMOVSS X4, %d(R8)", 4*blk)
		if layout == "Q40" {
			// 2·Σx to each of the block's 4 lanes: 8·Σx over them.
			g.p("VADDSS X4, X4, X3")
			g.p("VBROADCASTSS X3, X3")
			g.p("VMOVUPS X3, %d(DI)", 448+16*blk)
		}
		// d = max/M to the block's lanes; x·(M/max(max, 1e-30)) (0 for a
		// block of zeros, whose d is 0).
		g.p("VDIVSS X18, X2, X5")
		if lanes == 8 {
			g.p("VBROADCASTSS X5, Y5")
			g.p("VMOVUPS Y5, %d(DI)", dvecAt(blk))
		} else {
			g.p("VBROADCASTSS X5, X5")
			g.p("VMOVUPS X5, %d(DI)", dvecAt(blk))
		}
		g.p("VMAXSS X19, X2, X2")
		g.p("VDIVSS X2, X18, X2")
		g.p("VBROADCASTSS X2, Z6")
		for h := 0; h < 2; h++ {
			pos := 32*blk + 16*h
			// x24 in Z7; p2 = (x24+32896)>>16, r = x24-65536·p2,
			// p1 = (r+128)>>8, p0 = r-256·p1, each in [-128, 127].
			g.p("VMULPS Z6, Z%d, Z7", h)
			g.p("VCVTPS2DQ Z7, Z7")
			g.p("VPADDD Z20, Z7, Z8")
			g.p("VPSRAD $16, Z8, Z8")
			g.p("VPSLLD $16, Z8, Z9")
			g.p("VPSUBD Z9, Z7, Z7")
			g.p("VPADDD Z17, Z7, Z9")
			g.p("VPSRAD $8, Z9, Z9")
			g.p("VPSLLD $8, Z9, Z10")
			g.p("VPSUBD Z10, Z7, Z10")
			planes := []int{8, 9, 10}
			switch layout {
			case "8":
				for i, z := range planes {
					g.p("VPMOVDB Z%d, %d(DI)", z, 64*i+pos)
				}
				continue
			case "Q40":
				// Each block's first 16 values in the first plane set,
				// its second 16 in the second.
				o := 192*h + 16*blk
				for i, z := range planes {
					g.p("VPMOVDB Z%d, %d(DI)", z, 64*i+o)
				}
				continue
			case "K4":
				// Blocks 0 and 2 (a chunk's low nibbles) in the first
				// plane set, 1 and 3 in the second.
				o := 192*(blk&1) + 32*(blk>>1) + 16*h
				for i, z := range planes {
					g.p("VPMOVDB Z%d, %d(DI)", z, 64*i+o)
				}
				continue
			}
			// The even values' plane set, then the odd values'.
			for i, z := range planes {
				g.p("VPMOVQB Z%d, %d(DI)", z, 64*i+pos/2)
				g.p("VPSRLQ $32, Z%d, Z%d", z, z)
				g.p("VPMOVQB Z%d, %d(DI)", z, 192+64*i+pos/2)
			}
		}
		g.p("ADDQ $128, SI")
	}
	g.p("ADDQ $%d, R8", 4*blocks)
	g.p("ADDQ $%d, DI", ub)
	g.p("DECQ CX")
	g.p("JNZ unit")
	g.label("done")
	g.p("VZEROUPPER")
	g.p("RET")
	g.b.WriteString("\n")
	return name
}

// q4kScales is the K-quant kernels' first pass over Q4_K super-blocks:
// each row's eight d·scale into the scratch buffer (sc, 32 bytes a row,
// 128 a super-block) and the mins taken off the sums with the sums of x
// over every 32 values (DI).
func (g *gen) q4kScales() {
	g.p("MOVQ BX, R13")
	g.p("MOVQ sc+40(FP), R11")
	g.label("scales")
	for r := 0; r < 4; r++ {
		// ggml's get_scale_min_k4 on whole words: bytes 0-3 of the scales
		// are the low six bits of sub-blocks 0-3, bytes 4-7 of the mins;
		// sub-blocks 4-7 take bytes 8-11's nibbles and the top two bits.
		g.p("MOVL %s, AX", wrow(r, 4))
		g.p("MOVL %s, DX", wrow(r, 8))
		g.p("MOVL %s, R14", wrow(r, 12))
		g.p("MOVL AX, R9")
		g.p("SHRL $6, R9")
		g.p("ANDL $0x03030303, R9")
		g.p("SHLL $4, R9")
		g.p("MOVL R14, R8")
		g.p("ANDL $0x0f0f0f0f, R8")
		g.p("ORL R8, R9")
		g.p("ANDL $0x3f3f3f3f, AX")
		g.p("SHLQ $32, R9")
		g.p("ORQ R9, AX")
		g.p("MOVL DX, R9")
		g.p("SHRL $6, R9")
		g.p("ANDL $0x03030303, R9")
		g.p("SHLL $4, R9")
		g.p("SHRL $4, R14")
		g.p("ANDL $0x0f0f0f0f, R14")
		g.p("ORL R14, R9")
		g.p("ANDL $0x3f3f3f3f, DX")
		g.p("SHLQ $32, R9")
		g.p("ORQ R9, DX")
		// Eight lanes: VEX forms, which clear the upper half of a Z
		// register, so the mins' product adds zeros there.
		g.p("VPBROADCASTW %s, X10", wrow(r, 0))
		g.p("VCVTPH2PS X10, Y10")
		g.p("VMOVQ AX, X12")
		g.p("VPMOVZXBD X12, Y12")
		g.p("VCVTDQ2PS Y12, Y12")
		g.p("VMULPS Y10, Y12, Y12")
		g.p("VMOVUPS Y12, %d(R11)", 32*r)
		g.p("VPBROADCASTW %s, X10", wrow(r, 2))
		g.p("VCVTPH2PS X10, Y10")
		g.p("VMOVQ DX, X12")
		g.p("VPMOVZXBD X12, Y12")
		g.p("VCVTDQ2PS Y12, Y12")
		g.p("VMULPS Y10, Y12, Y12")
		g.p("VMULPS (DI), Y12, Y12")
		g.p("VSUBPS %s, %s, %s", g.v(12), g.acc(r), g.acc(r))
	}
	g.p("ADDQ $128, R11")
	g.p("ADDQ $32, DI")
	g.p("ADDQ $144, BX")
	g.p("DECQ CX")
	g.p("JNZ scales")
}

// q4kInt: Q4_K rows dotted in integers (AVX-512 VNNI) with x prepared in
// the K4 layout (qPrepareInt): a super-block's 128 bytes of nibbles are 2
// units of 64 bytes; a unit's low nibbles are sub-blocks 4u and 4u+2 (lanes
// 0-7 and 8-15), its high ones 4u+1 and 4u+3, against planes of x ordered
// the same way. The two sums stay apart (their sub-blocks' d·scale differ),
// each becomes floats once, times its lanes' d of x and its lanes'
// d·scale, permuted from the first pass's eight (qidxk4).
func (g *gen) q4kInt(data *bytes.Buffer) string {
	name := "qQ4_KVNNI"
	for i, o := range []int{0, 1} {
		for l := 0; l < 16; l++ {
			fmt.Fprintf(data, "DATA qidxk4<>+%d(SB)/4, $%d\n", 64*i+4*l, o+2*(l/8))
		}
	}
	fmt.Fprintf(data, "GLOBL qidxk4<>(SB), RODATA|NOPTR, $128\n\n")
	g.header(name, 0)
	g.q4kScales()
	g.p("MOVQ R13, BX")
	g.p("MOVQ sc+40(FP), R11")
	g.p("MOVQ nb+72(FP), CX")
	g.broadcast32(0x0f0f0f0f, 14)
	g.p("VMOVDQU32 qidxk4<>(SB), Z15")
	g.p("VMOVDQU32 qidxk4<>+64(SB), Z20")
	g.label("block")
	for u := 0; u < 2; u++ {
		L, H := []int{8, 9, 10}, []int{11, 21, 22}
		for i := 0; i < 3; i++ {
			g.p("VMOVDQU32 %d(SI), Z%d", 64*i, L[i])
			g.p("VMOVDQU32 %d(SI), Z%d", 192+64*i, H[i])
		}
		g.p("VMOVUPS 384(SI), Z12")
		g.p("VMOVUPS 448(SI), Z13")
		for r := 0; r < 4; r++ {
			g.p("VMOVDQU32 %s, Z%d", wrow(r, 16+64*u), 24+r)
			g.p("VPSRLW $4, Z%d, Z%d", 24+r, 28+r)
			g.p("VPANDD Z14, Z%d, Z%d", 24+r, 24+r)
			g.p("VPANDD Z14, Z%d, Z%d", 28+r, 28+r)
			g.p("VPXORD Z%d, Z%d, Z%d", 4+r, 4+r, 4+r)
			g.p("VPXORD Z%d, Z%d, Z%d", 16+r, 16+r, 16+r)
		}
		for i := 0; i < 3; i++ {
			if i > 0 {
				for r := 0; r < 4; r++ {
					g.p("VPSLLD $8, Z%d, Z%d", 4+r, 4+r)
					g.p("VPSLLD $8, Z%d, Z%d", 16+r, 16+r)
				}
			}
			for r := 0; r < 4; r++ {
				g.p("VPDPBUSD Z%d, Z%d, Z%d", L[i], 24+r, 4+r)
				g.p("VPDPBUSD Z%d, Z%d, Z%d", H[i], 28+r, 16+r)
			}
		}
		for r := 0; r < 4; r++ {
			g.p("VCVTDQ2PS Z%d, Z%d", 4+r, 4+r)
			g.p("VCVTDQ2PS Z%d, Z%d", 16+r, 16+r)
			g.p("VMULPS Z12, Z%d, Z%d", 4+r, 4+r)
			g.p("VMULPS Z13, Z%d, Z%d", 16+r, 16+r)
		}
		for r := 0; r < 4; r++ {
			// The table is read from the row's eight d·scale on: 16 floats,
			// the buffer padded for the last row's.
			g.p("VPERMPS %d(R11), Z15, Z%d", 32*r+16*u, 24+r)
			g.p("VPERMPS %d(R11), Z20, Z%d", 32*r+16*u, 28+r)
			g.p("VFMADD231PS Z%d, Z%d, Z%d", 24+r, 4+r, r)
			g.p("VFMADD231PS Z%d, Z%d, Z%d", 28+r, 16+r, r)
		}
		g.p("ADDQ $512, SI")
	}
	g.p("ADDQ $128, R11")
	g.advanceRows(144)
	g.endBlockLoop()
	return name
}

// q6kScales is the first pass over Q6_K super-blocks: each row's sixteen
// d·scale into the scratch buffer (sc, 64 bytes a row, 256 a super-block)
// and the codes' offset of 32 taken off with 32 times the sums of x over
// every 16 values (DI).
func (g *gen) q6kScales() {
	g.p("MOVQ BX, R13")
	g.p("MOVQ sc+40(FP), R11")
	g.label("scales")
	for r := 0; r < 4; r++ {
		g.half(wrow(r, 208), 10)
		for h := 0; h < 16/g.vw; h++ {
			g.p("VPMOVSXBD %s, %s", wrow(r, 192+g.vw*h), g.v(12))
			g.p("VCVTDQ2PS %s, %s", g.v(12), g.v(12))
			g.p("VMULPS %s, %s, %s", g.v(10), g.v(12), g.v(12))
			g.p("VMOVUPS %s, %d(R11)", g.v(12), 64*r+4*g.vw*h)
			g.p("VFNMADD231PS %d(DI), %s, %s", 4*g.vw*h, g.v(12), g.acc(r))
		}
	}
	g.p("ADDQ $256, R11")
	g.p("ADDQ $64, DI")
	g.p("ADDQ $210, BX")
	g.p("DECQ CX")
	g.p("JNZ scales")
}

// q6kInt: Q6_K rows dotted in integers (AVX-512 VNNI). Half n of a
// super-block is 64 bytes of low nibbles (ql) and 32 of high bit pairs
// (qh): the unit of ql's low nibbles, with qh's pairs 0 and 1 (bytes 0-31
// and 32-63) as bits 4-5, is values 0-63 of the half, its high nibbles
// with pairs 2 and 3 values 64-127, so x is prepared as 8-bit affine
// units (qPrepareInt: two a half). Each lane holds 4 values of one
// sub-block of 16, whose d·scale the first pass decoded (q6kScales) and a
// permute spreads (qidxk6).
func (g *gen) q6kInt(data *bytes.Buffer) string {
	name := "qQ6_KVNNI"
	for l := 0; l < 16; l++ {
		fmt.Fprintf(data, "DATA qidxk6<>+%d(SB)/4, $%d\n", 4*l, l/4)
	}
	// Word shifts of qh: pairs 0 and 1 for the low bytes' halves, 2 and 3
	// for the high ones.
	for v := 0; v < 2; v++ {
		for i := 0; i < 32; i++ {
			fmt.Fprintf(data, "DATA qshk6<>+%d(SB)/2, $%d\n", 64*v+2*i, 4*v+2*(i/16))
		}
	}
	fmt.Fprintf(data, "GLOBL qidxk6<>(SB), RODATA|NOPTR, $64\n")
	fmt.Fprintf(data, "GLOBL qshk6<>(SB), RODATA|NOPTR, $128\n\n")
	g.header(name, 0)
	g.q6kScales()
	g.p("MOVQ R13, BX")
	g.p("MOVQ sc+40(FP), R11")
	g.p("MOVQ nb+72(FP), CX")
	g.broadcast32(0x0f0f0f0f, 14)
	g.broadcast32(0x03030303, 15)
	g.p("VMOVDQU32 qshk6<>(SB), Z20")
	g.p("VMOVDQU32 qshk6<>+64(SB), Z21")
	g.p("VMOVDQU32 qidxk6<>(SB), Z22")
	g.label("block")
	for n := 0; n < 2; n++ {
		// Units A (values 0-63 of the half) and B (64-127): planes p2,
		// p1, p0 each; their d are read from memory where used.
		A, B := []int{8, 9, 10}, []int{11, 12, 13}
		for i := 0; i < 3; i++ {
			g.p("VMOVDQU32 %d(SI), Z%d", 64*i, A[i])
			g.p("VMOVDQU32 %d(SI), Z%d", 256+64*i, B[i])
		}
		for r := 0; r < 4; r++ {
			t := 24 + 4*(r&1) // two rows' temporaries in turn
			lo, hi := 4+r, 16+r
			g.p("VMOVDQU32 %s, Z%d", wrow(r, 64*n), t)
			g.p("VBROADCASTI64X4 %s, Z%d", wrow(r, 128+32*n), t+2)
			g.p("VPSRLW $4, Z%d, Z%d", t, t+1)
			g.p("VPANDD Z14, Z%d, Z%d", t, t)
			g.p("VPANDD Z14, Z%d, Z%d", t+1, t+1)
			for j, sh := range []int{20, 21} {
				g.p("VPSRLVW Z%d, Z%d, Z%d", sh, t+2, t+3)
				g.p("VPANDD Z15, Z%d, Z%d", t+3, t+3)
				g.p("VPSLLW $4, Z%d, Z%d", t+3, t+3)
				g.p("VPORD Z%d, Z%d, Z%d", t+3, t+j, t+j)
			}
			g.p("VPXORD Z%d, Z%d, Z%d", lo, lo, lo)
			g.p("VPXORD Z%d, Z%d, Z%d", hi, hi, hi)
			for i := 0; i < 3; i++ {
				if i > 0 {
					g.p("VPSLLD $8, Z%d, Z%d", lo, lo)
					g.p("VPSLLD $8, Z%d, Z%d", hi, hi)
				}
				g.p("VPDPBUSD Z%d, Z%d, Z%d", A[i], t, lo)
				g.p("VPDPBUSD Z%d, Z%d, Z%d", B[i], t+1, hi)
			}
		}
		for r := 0; r < 4; r++ {
			lo, hi := 4+r, 16+r
			g.p("VCVTDQ2PS Z%d, Z%d", lo, lo)
			g.p("VCVTDQ2PS Z%d, Z%d", hi, hi)
			g.p("VMULPS 192(SI), Z%d, Z%d", lo, lo)
			g.p("VMULPS 448(SI), Z%d, Z%d", hi, hi)
		}
		for r := 0; r < 4; r++ {
			// Tables from sub-blocks 8n and 8n+4 of the row on: 16
			// floats, the buffer padded for the last row's.
			t := 24 + 4*(r&1)
			g.p("VPERMPS %d(R11), Z22, Z%d", 64*r+32*n, t)
			g.p("VPERMPS %d(R11), Z22, Z%d", 64*r+32*n+16, t+1)
			g.p("VFMADD231PS Z%d, Z%d, Z%d", t, 4+r, r)
			g.p("VFMADD231PS Z%d, Z%d, Z%d", t+1, 16+r, r)
		}
		g.p("ADDQ $512, SI")
	}
	g.p("ADDQ $256, R11")
	g.advanceRows(210)
	g.endBlockLoop()
	return name
}

// q40Int: Q4_0 rows dotted in integers (AVX-512 VNNI). A unit is 4 blocks
// (72 bytes): their 16 bytes of nibbles gathered into one register, byte j
// of block b's low nibble value j, its high one j+16, against plane sets
// of x with each block's first and second 16 values (qPrepareInt's Q40
// layout). A lane holds 8 values of one block, so one sum a row: times
// the lanes' d of x and d of the weights (the 4 blocks' f16 d inserted and
// spread by a permute, qidxq40), less the offset 8·d·Σx from the unit's
// prepared 2·Σx a lane (4 lanes a block).
func (g *gen) q40Int(data *bytes.Buffer) string {
	name := "qQ4_0VNNI"
	for l := 0; l < 16; l++ {
		fmt.Fprintf(data, "DATA qidxq40<>+%d(SB)/4, $%d\n", 4*l, l/4)
	}
	fmt.Fprintf(data, "GLOBL qidxq40<>(SB), RODATA|NOPTR, $64\n\n")
	g.header(name, 0)
	g.broadcast32(0x0f0f0f0f, 14)
	g.p("VMOVDQU32 Z14, Z17")
	g.p("VMOVDQU32 qidxq40<>(SB), Z16")
	g.p("TESTQ CX, CX")
	g.p("JZ done")
	g.label("unit")
	lo, hi := []int{8, 9, 10}, []int{11, 21, 22}
	for i := 0; i < 3; i++ {
		g.p("VMOVDQU32 %d(SI), Z%d", 64*i, lo[i])
		g.p("VMOVDQU32 %d(SI), Z%d", 192+64*i, hi[i])
	}
	g.p("VMOVUPS 384(SI), Z23")
	for r := 0; r < 4; r++ {
		w := 24 + r
		g.p("VMOVDQU32 %s, X%d", wrow(r, 2), w)
		for b := 1; b < 4; b++ {
			g.p("VINSERTI32X4 $%d, %s, Z%d, Z%d", b, wrow(r, 2+18*b), w, w)
		}
		g.p("VPSRLW $4, Z%d, Z%d", w, w+4)
		g.p("VPANDD Z17, Z%d, Z%d", w, w)
		g.p("VPANDD Z17, Z%d, Z%d", w+4, w+4)
		g.p("VPXORD Z%d, Z%d, Z%d", 4+r, 4+r, 4+r)
	}
	for i := 0; i < 3; i++ {
		if i > 0 {
			for r := 0; r < 4; r++ {
				g.p("VPSLLD $8, Z%d, Z%d", 4+r, 4+r)
			}
		}
		for r := 0; r < 4; r++ {
			g.p("VPDPBUSD Z%d, Z%d, Z%d", lo[i], 24+r, 4+r)
			g.p("VPDPBUSD Z%d, Z%d, Z%d", hi[i], 28+r, 4+r)
		}
	}
	for r := 0; r < 4; r++ {
		// The 4 blocks' d of row r: words of X12+r, then floats, then
		// spread over their lanes.
		t := 12 + r
		for b := 0; b < 4; b++ {
			g.p("VPINSRW $%d, %s, X%d, X%d", b, wrow(r, 18*b), t, t)
		}
		g.p("VCVTPH2PS X%d, Y%d", t, t)
		g.p("VPERMPS Z%d, Z16, Z%d", t, 24+r)
		g.p("VCVTDQ2PS Z%d, Z%d", 4+r, 4+r)
		g.p("VMULPS Z23, Z%d, Z%d", 4+r, 4+r)
		g.p("VFNMADD231PS 448(SI), Z%d, Z%d", 24+r, r)
		g.p("VFMADD231PS Z%d, Z%d, Z%d", 24+r, 4+r, r)
	}
	g.p("ADDQ $512, SI")
	g.advanceRows(72)
	g.p("DECQ CX")
	g.p("JNZ unit")
	g.label("done")
	g.footer()
	return name
}

func main() {
	if d := os.Getenv("QPF"); d != "" {
		fmt.Sscan(d, &pfDist)
	}
	var s, d bytes.Buffer
	s.WriteString("// Code generated by qgen.go; DO NOT EDIT.\n\n//go:build !purego\n\n#include \"textflag.h\"\n\n")
	// qnibf<> is the floats 0..15, the AVX-512 nibble table (nibConst).
	for i := range 16 {
		fmt.Fprintf(&s, "DATA qnibf<>+%d(SB)/4, $0x%08x\n", 4*i, math.Float32bits(float32(i)))
	}
	s.WriteString("GLOBL qnibf<>(SB), RODATA|NOPTR, $64\n\n")
	d.WriteString("// Code generated by qgen.go; DO NOT EDIT.\n\n//go:build !purego\n\npackage vec\n\n")
	for _, g := range []*gen{{b: &s, vw: 8, isa: "AVX2"}, {b: &s, z: true, vw: 16, isa: "AVX512"}} {
		var names []string
		for _, f := range []string{"F32", "F16", "BF16"} {
			names = append(names, g.affine8(f), g.affine4(f))
		}
		names = append(names, g.q8_0(), g.q4_0(), g.q4_k(), g.q6_k())
		if g.z {
			var data bytes.Buffer
			for _, bits := range []int{8, 4} {
				for _, grp := range []int{32, 64, 128} {
					for _, f := range []string{"F32", "F16", "BF16"} {
						names = append(names, g.affineInt(bits, grp, f, &data))
					}
				}
			}
			names = append(names, g.q4kInt(&data), g.q6kInt(&data), g.q40Int(&data))
			s.Write(data.Bytes())
			for _, l := range []string{"8", "4", "K4", "Q40"} {
				fmt.Fprintf(&d, "//go:noescape\nfunc %s(x *float32, dst *byte, bs *float32, n int, m float32)\n\n", g.prepInt(l))
			}
		}
		for _, n := range names {
			fmt.Fprintf(&d, "//go:noescape\nfunc %s(%s)\n\n", n, argList)
		}
	}
	src, err := format.Source(d.Bytes())
	if err != nil {
		panic(err)
	}
	must(os.WriteFile("qdot_kernels_amd64.go", src, 0o644))
	must(os.WriteFile("qdot_amd64.s", s.Bytes(), 0o644))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
