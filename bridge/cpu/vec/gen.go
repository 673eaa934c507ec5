//go:build ignore

// gen writes gemm_kernels_amd64.s and gemm_kernels_amd64.go: register-blocked
// MR x NR dot-product micro-kernels for every tile shape the driver needs.
// Hand-writing ~100 near-identical kernels invites typos, so they are
// generated:
//
//	go run gen.go
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"strings"
)

type isa struct {
	name   string // AVX2, AVX512
	vw     int    // f32 lanes per vector
	nregs  int
	reg    string // "Y" or "Z"
	mrMax  int    // tile rows of x
	nrMax  int    // tile rows of w when mr > 1
	nr1Max int    // tile rows of w for single-row x (decode)
	masked bool   // k tail handled in-kernel with AVX-512 masks
}

type dtype struct {
	name string // BF16, F16, F32
	goT  string // Go element type of w
	esz  int    // bytes per weight element
}

var isas = []isa{
	// AVX2: 16 registers -> 4x3 tile: 12 accumulators + 3 weight vectors + 1 x vector.
	{"AVX2", 8, 16, "Y", 4, 3, 4, false},
	// AVX-512: 32 registers -> 8x3 tile: 24 accumulators, so each weight vector
	// converted once feeds 8 activation rows (batch-8 decode in one pass).
	{"AVX512", 16, 32, "Z", 8, 3, 4, true},
}

var dtypes = []dtype{{"BF16", "uint16", 2}, {"F16", "uint16", 2}, {"F32", "float32", 4}}

// Software prefetch, as measured best on Zen 4 (64 MiB bf16, one core):
// multi-row tiles fetch the next tile (the next row of each w stream) into
// L2 (m=4: 63 -> 93, m=8: 90 -> 106 GFLOP/s); single-row kernels only fetch
// a few lines ahead into L1 (helps most at k=5632, where x crowds L1).
const (
	pfInsn = "PREFETCHT1"
	pf1    = "PREFETCHT0"
	pfDist = 256 // bytes ahead, single-row kernels
)

func kname(is isa, dt dtype, mr, nr int) string {
	return fmt.Sprintf("gemm%s%sx%dx%d", dt.name, is.name, mr, nr)
}

// ku picks how many independent accumulator sets a tile keeps so that at
// least ~8 FMA chains are in flight (FMA latency 4, 2 per cycle), within the
// register budget.
func ku(is isa, mr, nr int) int {
	u := (8 + mr*nr - 1) / (mr * nr)
	if u > 4 {
		u = 4
	}
	for u > 1 && mr*nr*u+wregs(mr, nr)+1 > is.nregs {
		u--
	}
	return u
}

// wregs is how many registers hold widened weights: one per w row when
// several x rows reuse it, two (alternating) for a single x row.
func wregs(mr, nr int) int {
	if mr == 1 {
		return min(nr, 2)
	}
	return nr
}

type gen struct{ b bytes.Buffer }

func (g *gen) p(format string, a ...any) { fmt.Fprintf(&g.b, "\t"+format+"\n", a...) }
func (g *gen) label(l string)            { fmt.Fprintf(&g.b, "%s:\n", l) }

// Row r of a strided matrix: base register for rows 0-3 or 4-7, plus the row
// stride register s (bytes) times 0, 1, 2 or (via s3 = 3*s) 3.
func rowAddr(off int, r int, base, base4, s, s3 string) string {
	b := base
	if r >= 4 {
		b = base4
	}
	switch r % 4 {
	case 0:
		return fmt.Sprintf("%d(%s)", off, b)
	case 1:
		return fmt.Sprintf("%d(%s)(%s*1)", off, b, s)
	case 2:
		return fmt.Sprintf("%d(%s)(%s*2)", off, b, s)
	}
	return fmt.Sprintf("%d(%s)(%s*1)", off, b, s3)
}

// Register map: SI/DI x rows 0-3/4-7 (stride R8, R9=3*R8); BX w rows 0-3
// (stride R10, R15=3*R10); R14 prefetch pointer for w; DX dst row (next row
// +R11), its columns at stride R12 (R13=3*R12); CX remaining k; AX scratch.
func xaddr(i, off int) string  { return rowAddr(off, i, "SI", "DI", "R8", "R9") }
func waddr(j, off int) string  { return rowAddr(off, j, "BX", "", "R10", "R15") }
func pfaddr(j, off int) string { return rowAddr(off, j, "R14", "", "R10", "R15") }
func daddr(j int) string       { return rowAddr(0, j, "DX", "", "R12", "R13") }

func (g *gen) kernel(is isa, dt dtype, mr, nr int) {
	if nr > 4 {
		panic("register map has room for 4 w rows")
	}
	u := ku(is, mr, nr)
	R := func(n int) string { return fmt.Sprintf("%s%d", is.reg, n) }
	acc := func(s, i, j int) int { return (s*mr+i)*nr + j }
	nacc := mr * nr * u
	nw := wregs(mr, nr)
	wreg := func(j int) int { return nacc + j%nw }
	xreg := nacc + nw
	if xreg >= is.nregs {
		panic("out of vector registers")
	}
	insn := pfInsn
	if mr == 1 {
		insn = pf1
	}

	fmt.Fprintf(&g.b, "// func %s(x *float32, ldx int, w *%s, ldw int, dst *float32, ldd, ldc int, k int)\n", kname(is, dt, mr, nr), dt.goT)
	fmt.Fprintf(&g.b, "TEXT ·%s(SB), NOSPLIT, $0-64\n", kname(is, dt, mr, nr))
	g.p("MOVQ x+0(FP), SI")
	g.p("MOVQ ldx+8(FP), R8")
	g.p("SHLQ $2, R8")
	g.p("MOVQ w+16(FP), BX")
	g.p("MOVQ ldw+24(FP), R10")
	if dt.esz == 2 {
		g.p("SHLQ $1, R10")
	} else {
		g.p("SHLQ $2, R10")
	}
	g.p("MOVQ dst+32(FP), DX")
	g.p("MOVQ ldd+40(FP), R11")
	g.p("SHLQ $2, R11")
	g.p("MOVQ ldc+48(FP), R12")
	g.p("SHLQ $2, R12")
	g.p("MOVQ k+56(FP), CX")
	g.p("LEAQ (R8)(R8*2), R9")
	g.p("LEAQ (R10)(R10*2), R15")
	g.p("LEAQ (R12)(R12*2), R13")
	if mr > 4 {
		g.p("LEAQ (SI)(R8*4), DI")
	}
	if mr == 1 {
		// w rows come from long sequential streams (see gemmTiles);
		// R14 runs pfDist bytes ahead in each, into the next row at the end.
		g.p("LEAQ %d(BX), R14", pfDist)
	} else {
		// R14 walks the same k position one w row further on: in the
		// driver's grouped tiles, the next tile's rows.
		g.p("LEAQ (BX)(CX*%d), R14", dt.esz)
	}
	for a := 0; a < nacc; a++ {
		g.p("VXORPS %s, %s, %s", R(a), R(a), R(a))
	}

	load := func(dst int, addr string, mask bool) {
		m, k := "", ""
		if mask {
			m, k = ".Z", "K1, "
		}
		switch dt.name {
		case "BF16":
			// bf16 -> f32 is a 16-bit left shift of the zero-extended pattern.
			g.p("VPMOVZXWD%s %s, %s%s", m, addr, k, R(dst))
			g.p("VPSLLD $16, %s, %s", R(dst), R(dst))
		case "F16":
			g.p("VCVTPH2PS%s %s, %s%s", m, addr, k, R(dst))
		default:
			g.p("VMOVUPS%s %s, %s%s", m, addr, k, R(dst))
		}
	}
	chunk := func(s, c int, mask bool) {
		if mr == 1 {
			if mask {
				g.p("VMOVUPS.Z %s, K1, %s", xaddr(0, c*is.vw*4), R(xreg))
			} else {
				g.p("VMOVUPS %s, %s", xaddr(0, c*is.vw*4), R(xreg))
			}
			for j := 0; j < nr; j++ {
				load(wreg(j), waddr(j, c*is.vw*dt.esz), mask)
				g.p("VFMADD231PS %s, %s, %s", R(xreg), R(wreg(j)), R(acc(s, 0, j)))
			}
			return
		}
		for j := 0; j < nr; j++ {
			load(wreg(j), waddr(j, c*is.vw*dt.esz), mask)
		}
		for i := 0; i < mr; i++ {
			if mask {
				g.p("VMOVUPS.Z %s, K1, %s", xaddr(i, c*is.vw*4), R(xreg))
			} else {
				g.p("VMOVUPS %s, %s", xaddr(i, c*is.vw*4), R(xreg))
			}
			for j := 0; j < nr; j++ {
				g.p("VFMADD231PS %s, %s, %s", R(xreg), R(wreg(j)), R(acc(s, i, j)))
			}
		}
	}
	pf := func(chunks int) {
		for j := 0; j < nr; j++ {
			for off := 0; off < chunks*is.vw*dt.esz; off += 64 {
				g.p("%s %s", insn, pfaddr(j, off))
			}
		}
	}
	advance := func(chunks int) {
		g.p("ADDQ $%d, SI", chunks*is.vw*4)
		if mr > 4 {
			g.p("ADDQ $%d, DI", chunks*is.vw*4)
		}
		g.p("ADDQ $%d, BX", chunks*is.vw*dt.esz)
		g.p("ADDQ $%d, R14", chunks*is.vw*dt.esz)
	}

	// cu chunks per unrolled iteration, rotating over the u accumulator sets;
	// single-row kernels cover a whole cache line of each w row, so each
	// iteration issues exactly one prefetch per row.
	cu := u
	if mr == 1 {
		cu = max(u, 64/(is.vw*dt.esz))
	}
	step := is.vw * cu
	if cu > 1 {
		g.p("SUBQ $%d, CX", step)
		g.p("JL endu")
		g.label("loopu")
		pf(cu)
		for c := 0; c < cu; c++ {
			chunk(c%u, c, false)
		}
		advance(cu)
		g.p("SUBQ $%d, CX", step)
		g.p("JGE loopu")
		g.label("endu")
		g.p("ADDQ $%d, CX", step)
	}
	g.p("SUBQ $%d, CX", is.vw)
	g.p("JL end1")
	g.label("loop1")
	pf(1)
	chunk(0, 0, false)
	advance(1)
	g.p("SUBQ $%d, CX", is.vw)
	g.p("JGE loop1")
	g.label("end1")
	g.p("ADDQ $%d, CX", is.vw)
	if is.masked {
		// Remaining k%16 elements: masked loads zero the missing lanes (and
		// suppress faults past the end of the slices).
		g.p("JZ reduce")
		g.p("MOVL $1, AX")
		g.p("SHLL CX, AX")
		g.p("DECL AX")
		g.p("KMOVW AX, K1")
		chunk(0, 0, true)
		g.label("reduce")
	}
	for s := 1; s < u; s++ {
		for i := 0; i < mr; i++ {
			for j := 0; j < nr; j++ {
				g.p("VADDPS %s, %s, %s", R(acc(s, i, j)), R(acc(0, i, j)), R(acc(0, i, j)))
			}
		}
	}
	t, t2 := xreg, wreg(0)
	for i := 0; i < mr; i++ {
		if i > 0 {
			g.p("ADDQ R11, DX")
		}
		for j := 0; j < nr; j++ {
			a := acc(0, i, j)
			if is.reg == "Z" {
				g.p("VEXTRACTF64X4 $1, Z%d, Y%d", a, t)
				g.p("VADDPS Y%d, Y%d, Y%d", t, a, t)
				g.p("VEXTRACTF32X4 $1, Y%d, X%d", t, t2)
				g.p("VADDPS X%d, X%d, X%d", t2, t, t)
			} else {
				g.p("VEXTRACTF128 $1, Y%d, X%d", a, t2)
				g.p("VADDPS X%d, X%d, X%d", t2, a, t)
			}
			g.p("VPERMILPS $0x4E, X%d, X%d", t, t2)
			g.p("VADDPS X%d, X%d, X%d", t2, t, t)
			g.p("VPERMILPS $0xB1, X%d, X%d", t, t2)
			g.p("VADDSS X%d, X%d, X%d", t2, t, t)
			g.p("VMOVSS X%d, %s", t, daddr(j))
		}
	}
	g.p("VZEROUPPER")
	g.p("RET")
	g.b.WriteString("\n")
}

func main() {
	var s gen
	s.b.WriteString("// Code generated by gen.go; DO NOT EDIT.\n\n//go:build !purego\n\n#include \"textflag.h\"\n\n")
	var d bytes.Buffer
	d.WriteString("// Code generated by gen.go; DO NOT EDIT.\n\n//go:build !purego\n\npackage vec\n\n")
	shapes := func(is isa) (sh [][2]int) {
		for mr := 1; mr <= is.mrMax; mr++ {
			for nr := 1; nr <= is.nrMax; nr++ {
				sh = append(sh, [2]int{mr, nr})
			}
		}
		for nr := is.nrMax + 1; nr <= is.nr1Max; nr++ {
			sh = append(sh, [2]int{1, nr})
		}
		return sh
	}
	for _, is := range isas {
		for _, dt := range dtypes {
			for _, sh := range shapes(is) {
				s.kernel(is, dt, sh[0], sh[1])
				fmt.Fprintf(&d, "//go:noescape\nfunc %s(x *float32, ldx int, w *%s, ldw int, dst *float32, ldd, ldc int, k int)\n\n", kname(is, dt, sh[0], sh[1]), dt.goT)
			}
		}
	}
	for _, is := range isas {
		for _, dt := range dtypes {
			kt := "kern[" + dt.goT + "]"
			fmt.Fprintf(&d, "var gemm%s%sTiles = tiles[%s]{mr: %d, nr: %d, nr1: %d, vw: %d, masked: %v,\nk: []%s{\n",
				dt.name, is.name, dt.goT, is.mrMax, is.nrMax, is.nr1Max, is.vw, is.masked, kt)
			for mr := 1; mr <= is.mrMax; mr++ {
				var names []string
				for nr := 1; nr <= is.nrMax; nr++ {
					names = append(names, kname(is, dt, mr, nr))
				}
				fmt.Fprintf(&d, "%s,\n", strings.Join(names, ", "))
			}
			fmt.Fprintf(&d, "},\nk1: []%s{\n", kt)
			for nr := 1; nr <= is.nr1Max; nr++ {
				fmt.Fprintf(&d, "%s,\n", kname(is, dt, 1, nr))
			}
			d.WriteString("}}\n\n")
		}
	}
	src, err := format.Source(d.Bytes())
	if err != nil {
		os.Stderr.Write(d.Bytes())
		panic(err)
	}
	must(os.WriteFile("gemm_kernels_amd64.go", src, 0o644))
	must(os.WriteFile("gemm_kernels_amd64.s", s.b.Bytes(), 0o644))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
