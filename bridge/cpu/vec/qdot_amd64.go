//go:build amd64 && !purego

package vec

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/mtlbench/mtlbench/kernels/quant"
)

// qkern dots rows w, w+ldw, w+2·ldw, w+3·ldw with x into dst, dst+ldd,
// dst+2·ldd, dst+3·ldd (strides in bytes; qgen.go): nb blocks (affine:
// groups) of ni inner steps each.
type qkern func(x, x2, p *float32, w *byte, ldw int, sc, bi *byte, lds int, dst *float32, nb, ni, ldd int)

// qkerns is one level's kernels.
type qkerns struct {
	affine8, affine4       [3]qkern // by scale dtype
	q8_0, q4_0, q4_k, q6_k qkern
}

var qKernels = [...]qkerns{
	levelAVX2: {
		affine8: [...]qkern{quant.F32: qAffine8F32AVX2, quant.F16: qAffine8F16AVX2, quant.BF16: qAffine8BF16AVX2},
		affine4: [...]qkern{quant.F32: qAffine4F32AVX2, quant.F16: qAffine4F16AVX2, quant.BF16: qAffine4BF16AVX2},
		q8_0:    qQ8_0AVX2, q4_0: qQ4_0AVX2, q4_k: qQ4_KAVX2, q6_k: qQ6_KAVX2,
	},
	levelAVX512: {
		affine8: [...]qkern{quant.F32: qAffine8F32AVX512, quant.F16: qAffine8F16AVX512, quant.BF16: qAffine8BF16AVX512},
		affine4: [...]qkern{quant.F32: qAffine4F32AVX512, quant.F16: qAffine4F16AVX512, quant.BF16: qAffine4BF16AVX512},
		q8_0:    qQ8_0AVX512, q4_0: qQ4_0AVX512, q4_k: qQ4_KAVX512, q6_k: qQ6_KAVX512,
	},
}

// qIntKernels are levelVNNI's integer affine kernels, by bits (8, 4),
// group size (32, 64, 128) and scale dtype.
var qIntKernels = [2][3][3]qkern{
	{
		{quant.F32: qAffine8G32F32VNNI, quant.F16: qAffine8G32F16VNNI, quant.BF16: qAffine8G32BF16VNNI},
		{quant.F32: qAffine8G64F32VNNI, quant.F16: qAffine8G64F16VNNI, quant.BF16: qAffine8G64BF16VNNI},
		{quant.F32: qAffine8G128F32VNNI, quant.F16: qAffine8G128F16VNNI, quant.BF16: qAffine8G128BF16VNNI},
	},
	{
		{quant.F32: qAffine4G32F32VNNI, quant.F16: qAffine4G32F16VNNI, quant.BF16: qAffine4G32BF16VNNI},
		{quant.F32: qAffine4G64F32VNNI, quant.F16: qAffine4G64F16VNNI, quant.BF16: qAffine4G64BF16VNNI},
		{quant.F32: qAffine4G128F32VNNI, quant.F16: qAffine4G128F16VNNI, quant.BF16: qAffine4G128BF16VNNI},
	},
}

// qdotsArch runs the row kernels on blocks of 4 rows; a row left over runs
// as a block of that row 4 times (stride 0). Other bit widths than 4 and 8
// fall back to the generic dots.
func qdotsArch(dst []float32, w *quant.Matrix, lo, hi int, x, p []float32) bool {
	s, k := w.Spec, w.K
	ks := &qKernels[min(level, levelAVX512)]
	if len(x) < k || len(p) < QPrepLen(s, k) || lo < 0 || hi > w.Rows {
		panic(fmt.Sprintf("vec: QDots rows [%d,%d) of %d, k=%d, with %d activations and %d prepared sums (want %d)",
			lo, hi, w.Rows, k, len(x), len(p), QPrepLen(s, k)))
	}
	rb := s.RowBytes(k)
	if qInt(s) {
		return qdotsInt(dst, w, lo, hi, x, p)
	}
	var (
		kern   qkern
		xa     = &x[0]
		x2, pe *float32
		sc, bi []byte
		lds    int
		nb, ni = k / s.Block(), 1
	)
	if n := qExtraLen(s, k); n > 0 {
		pe = &p[QPrepLen(s, k)-n]
	}
	switch s.Type {
	case quant.Affine:
		switch s.Bits {
		case 8:
			kern = ks.affine8[s.Scale]
		case 4:
			kern = ks.affine4[s.Scale]
			xd := p[k/16 : k/16+k]
			xa, x2 = &xd[0], &xd[k/2]
		default:
			return false
		}
		ni = s.Group / 32
		sc, bi, lds = w.Scales, w.Biases, s.Groups(k)*s.Scale.Size()
		if len(sc) < hi*lds || len(bi) < hi*lds {
			panic(fmt.Sprintf("vec: QDots: %d scale and %d bias bytes for %d rows of %d", len(sc), len(bi), hi, lds))
		}
	case quant.Q8_0:
		kern = ks.q8_0
	case quant.Q4_0:
		kern = ks.q4_0
	case quant.Q4_K, quant.Q6_K:
		// The K kernels decode 4 rows' sub-block scales into a scratch
		// buffer before they read the values (qgen.go).
		kern, n := ks.q4_k, 4*8*nb
		if s.Type == quant.Q6_K {
			kern, n = ks.q6_k, 4*16*nb
		}
		buf := qScratch.Get().(*[]float32)
		defer qScratch.Put(buf)
		if len(*buf) < n {
			*buf = make([]float32, n)
		}
		scratch := unsafe.Pointer(&(*buf)[0])
		return qRun(dst, w, lo, hi, func(r, rows int, d *float32) {
			kern(&x[0], nil, pe, &w.Data[r*rb], rows*rb, (*byte)(scratch), nil, 0, d, nb, 1, 4*rows)
		})
	default:
		return false
	}
	scale := func(b []byte, r int) *byte {
		if b == nil {
			return nil
		}
		return &b[r*lds]
	}
	return qRun(dst, w, lo, hi, func(r, rows int, d *float32) {
		kern(xa, x2, pe, &w.Data[r*rb], rows*rb, scale(sc, r), scale(bi, r), rows*lds, d, nb, ni, 4*rows)
	})
}

// qdotsInt runs levelVNNI's integer kernels (qgen.go: affineInt) on x
// prepared by qPrepareInt; groups past the last whole step are dotted in
// floats.
func qdotsInt(dst []float32, w *quant.Matrix, lo, hi int, x, p []float32) bool {
	s, k := w.Spec, w.K
	if s.Type == quant.Q4_0 {
		n := qIntUnits(s, k)
		k0 := n * qIntUnit(s)
		var units *float32
		if n > 0 {
			units = &p[0]
		}
		rb := s.RowBytes(k)
		qRun(dst, w, lo, hi, func(r, rows int, d *float32) {
			qQ4_0VNNI(units, nil, nil, &w.Data[r*rb], rows*rb, nil, nil, 0, d, n, 1, 4*rows)
		})
		if k0 < k {
			for j := lo; j < hi; j++ {
				dst[j-lo] += qIntTail(w, j, k0, x)
			}
		}
		return true
	}
	if s.Type == quant.Q4_K || s.Type == quant.Q6_K {
		// The first pass decodes 4 rows' d·scale into a scratch buffer
		// (qgen.go: q4kScales, q6kScales), padded for the last row's
		// 16-float table.
		nb := k / 256
		kern, n := qkern(qQ4_KVNNI), 4*8*nb+16
		if s.Type == quant.Q6_K {
			kern, n = qQ6_KVNNI, 4*16*nb+16
		}
		buf := qScratch.Get().(*[]float32)
		defer qScratch.Put(buf)
		if len(*buf) < n {
			*buf = make([]float32, n)
		}
		scratch := (*byte)(unsafe.Pointer(&(*buf)[0]))
		rb, units := s.RowBytes(k), &p[qIntSums(s, k)]
		return qRun(dst, w, lo, hi, func(r, rows int, d *float32) {
			kern(units, nil, &p[0], &w.Data[r*rb], rows*rb, scratch, nil, 0, d, nb, 1, 4*rows)
		})
	}
	rb, G := s.RowBytes(k), s.Group
	lds := s.Groups(k) * s.Scale.Size()
	if len(w.Scales) < hi*lds || len(w.Biases) < hi*lds {
		panic(fmt.Sprintf("vec: QDots: %d scale and %d bias bytes for %d rows of %d", len(w.Scales), len(w.Biases), hi, lds))
	}
	gi := map[int]int{32: 0, 64: 1, 128: 2}[G]
	kern := qIntKernels[(8-s.Bits)/4][gi][s.Scale]
	n := qIntUnits(s, k)
	k0 := n * qIntUnit(s)
	var units *float32
	if n > 0 {
		units = &p[k/G]
	}
	qRun(dst, w, lo, hi, func(r, rows int, d *float32) {
		kern(units, nil, &p[0], &w.Data[r*rb], rows*rb, &w.Scales[r*lds], &w.Biases[r*lds], rows*lds, d, k0/qIntStep(s), k/G, 4*rows)
	})
	if k0 < k {
		for j := lo; j < hi; j++ {
			dst[j-lo] += qIntTail(w, j, k0, x)
		}
	}
	return true
}

// qRun calls kern on rows [lo,hi) 4 at a time: kern(r, q, d) dots rows r,
// r+q, r+2q, r+3q into d[0], d[q], d[2q], d[3q]. The 4 rows are a quarter
// of the range apart, so each is read front to back as one long stream
// (one core reaches DRAM bandwidth only with several in flight, as
// gemmTiles says); a row left over runs as the same row 4 times (q = 0).
func qRun(dst []float32, w *quant.Matrix, lo, hi int, kern func(r, q int, d *float32)) bool {
	rb := w.Spec.RowBytes(w.K)
	if len(w.Data) < hi*rb {
		panic(fmt.Sprintf("vec: QDots: %d packed bytes for %d rows of %d", len(w.Data), hi, rb))
	}
	q := (hi - lo) / 4
	for r := lo; r < lo+q; r++ {
		kern(r, q, &dst[r-lo])
	}
	for r := lo + 4*q; r < hi; r++ {
		var t [4]float32
		kern(r, 0, &t[0])
		dst[r-lo] = t[0]
	}
	return true
}

var qScratch = sync.Pool{New: func() any { return new([]float32) }}

// prepIntArch runs qgen.go's prepInt kernels for layout l.
func prepIntArch(l int, x []float32, dst []byte, bs []float32, n int, m float32) bool {
	if n == 0 {
		return true
	}
	U := qlUnit(l)
	if len(x) < n*U || len(dst) < n*qlBytes(l) || len(bs) < n*U/qIntBlock {
		panic(fmt.Sprintf("vec: prepIntArch: %d values, %d bytes, %d sums for %d units", len(x), len(dst), len(bs), n))
	}
	[...]func(x *float32, dst *byte, bs *float32, n int, m float32){qlA8: qPrepInt8, qlA4: qPrepInt4, qlK4: qPrepIntK4, qlQ40: qPrepIntQ40}[l](&x[0], &dst[0], &bs[0], n, m)
	return true
}
