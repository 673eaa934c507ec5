//go:build amd64 && !purego

package vec

import (
	"golang.org/x/sys/cpu"

	"github.com/mtlbench/mtlbench/bridge/half"
)

func detectLevel() int {
	x := &cpu.X86
	// HasAVX2 and HasAVX512 already include the OS-saves-the-registers checks.
	if !x.HasAVX2 || !x.HasFMA || !x.HasF16C {
		return levelGeneric
	}
	if x.HasAVX512 && x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL {
		if x.HasAVX512VNNI {
			return levelVNNI
		}
		return levelAVX512
	}
	return levelAVX2
}

// availableLevels lists the implementations tests can switch between.
func availableLevels() []int {
	ls := []int{levelGeneric}
	for l := levelAVX2; l <= detectLevel(); l++ {
		ls = append(ls, l)
	}
	return ls
}

// kern computes an mr x nr tile: dst[i*ldd+j*ldc] = dot(x row i, w row j)
// over the first k elements (AVX2 kernels stop at a multiple of 8; the
// caller adds the rest). Strides are in elements.
type kern[T uint16 | float32] func(x *float32, ldx int, w *T, ldw int, dst *float32, ldd, ldc int, k int)

// tiles is one ISA's set of micro-kernels for one weight type:
// k[(mr-1)*nr+nr-1] handles an mr x nr tile, k1[nr-1] a 1 x nr tile.
type tiles[T uint16 | float32] struct {
	mr, nr, vw int
	nr1        int  // tile width for m == 1 (4 streams measured best on Zen 4)
	masked     bool // kernels finish k themselves (AVX-512 masked tail)
	k, k1      []kern[T]
}

// xBlockBytes bounds the activation rows swept per pass over the weights, so
// large batches (prefill) keep x in L2 while every weight row streams by.
const xBlockBytes = 256 << 10

func gemmTiles[T uint16 | float32](t *tiles[T], dst []float32, ldd int, x []float32, w []T, m, n, k int) {
	nrT := t.nr
	pick := func(mr, nr int) kern[T] { return t.k[(mr-1)*t.nr+nr-1] }
	if m == 1 {
		nrT = t.nr1
		pick = func(_, nr int) kern[T] { return t.k1[nr-1] }
	}
	// One core reaches DRAM bandwidth only with several long sequential
	// streams in flight, so a tile does not take nrT adjacent w rows (each
	// a short 4 KiB stream at k=2048): the rows are split into nrT
	// contiguous groups of g, and tile r takes row r of every group. Each
	// group is then read front to back as one stream. Leftover rows get
	// ordinary tiles.
	g := n / nrT
	mb := max(t.mr, xBlockBytes/(4*k)/t.mr*t.mr)
	for i0 := 0; i0 < m; i0 += mb {
		i1 := min(m, i0+mb)
		// Weight tiles outermost within a block: a tile's rows are loaded
		// from memory once and reused from L1 by every group of mr x rows.
		for r := 0; r < g; r++ {
			for i := i0; i < i1; i += t.mr {
				mr := min(t.mr, i1-i)
				pick(mr, nrT)(&x[i*k], k, &w[r*k], g*k, &dst[i*ldd+r], ldd, g, k)
			}
		}
		for j := g * nrT; j < n; j += nrT {
			nr := min(nrT, n-j)
			for i := i0; i < i1; i += t.mr {
				mr := min(t.mr, i1-i)
				pick(mr, nr)(&x[i*k], k, &w[j*k], k, &dst[i*ldd+j], ldd, 1, k)
			}
		}
	}
}

// addTail adds the k%vw products the AVX2 kernels leave out.
func addTail[T uint16 | float32](dst []float32, ldd int, x []float32, w []T, m, n, k, k0 int, widen func(T) float32) {
	for i := 0; i < m; i++ {
		xr := x[i*k+k0 : i*k+k]
		for j := 0; j < n; j++ {
			wr := w[j*k+k0 : j*k+k]
			s := dst[i*ldd+j]
			for t, v := range xr {
				s += v * widen(wr[t])
			}
			dst[i*ldd+j] = s
		}
	}
}

func gemmBF16Arch(dst []float32, ldd int, x []float32, w []uint16, m, n, k int) bool {
	return tiledGemm(&gemmBF16AVX2Tiles, &gemmBF16AVX512Tiles, dst, ldd, x, w, m, n, k, half.BF16ToFloat)
}

func gemmF16Arch(dst []float32, ldd int, x []float32, w []uint16, m, n, k int) bool {
	return tiledGemm(&gemmF16AVX2Tiles, &gemmF16AVX512Tiles, dst, ldd, x, w, m, n, k, half.F16ToFloat)
}

func gemmF32Arch(dst []float32, ldd int, x []float32, w []float32, m, n, k int) bool {
	return tiledGemm(&gemmF32AVX2Tiles, &gemmF32AVX512Tiles, dst, ldd, x, w, m, n, k, func(v float32) float32 { return v })
}

// tiledGemm runs a GEMM on the level's tiles (AVX-512's where present) the
// one way for every weight dtype, the k tail past the vector width that
// unmasked tiles leave widened by widen; it reports success.
func tiledGemm[T uint16 | float32](avx2, avx512 *tiles[T], dst []float32, ldd int, x []float32, w []T, m, n, k int, widen func(T) float32) bool {
	t := avx2
	if level >= levelAVX512 {
		t = avx512
	}
	gemmTiles(t, dst, ldd, x, w, m, n, k)
	if k0 := k &^ (t.vw - 1); !t.masked && k0 < k {
		addTail(dst, ldd, x, w, m, n, k, k0, widen)
	}
	return true
}

//go:noescape
func dotAVX2(a, b *float32, n int) float32

//go:noescape
func sumBytesAVX2(p *byte, n int) uint64

// The dot kernel (RMSNorm's sums of squares) finishes its tail with masked
// loads.
func dotF32Arch(a, b []float32) float32 { return dotAVX2(&a[0], &b[0], len(a)) }

func sumBytesArch(buf []byte) (int, uint64) {
	n := len(buf) &^ 511
	if n == 0 {
		return 0, 0
	}
	return n, sumBytesAVX2(&buf[0], n)
}

//go:noescape
func siluMulAVX2(out, gate, up *float32, n int)

func siluMulArch(out, gate, up []float32) int {
	n := len(out) &^ 7
	if n > 0 {
		siluMulAVX2(&out[0], &gate[0], &up[0], n)
	}
	return n
}

//go:noescape
func axpyRowsAVX2(acc, p, v *float32, n, d int)

func axpyRowsArch(acc, p, v []float32, d int) int {
	c := d &^ 7
	if c > 0 && len(p) > 0 {
		axpyRowsAVX2(&acc[0], &p[0], &v[0], len(p), d)
	}
	return c
}

//go:noescape
func geluAVX2(out, x *float32, n int)

func geluArch(out, x []float32) int {
	n := len(out) &^ 7
	if n > 0 {
		geluAVX2(&out[0], &x[0], n)
	}
	return n
}

//go:noescape
func expSubAVX2(x *float32, n int, m float32) float32

func expSubArch(x []float32, m float32) (int, float32) {
	n := len(x) &^ 7
	if n == 0 {
		return 0, 0
	}
	return n, expSubAVX2(&x[0], n, m)
}

//go:noescape
func dotU8AVX2(x *float32, q *byte, n int) float32

//go:noescape
func dotI8AVX2(x *float32, q *byte, n int) float32

func dotU8Arch(x []float32, q []byte) float32 { return dotU8AVX2(&x[0], &q[0], len(q)) }
func dotI8Arch(x []float32, q []byte) float32 { return dotI8AVX2(&x[0], &q[0], len(q)) }

//go:noescape
func dotNibAVX2(lo, hi *float32, q *byte, n int) float32

func dotNibArch(lo, hi []float32, q []byte) float32 { return dotNibAVX2(&lo[0], &hi[0], &q[0], len(q)) }
