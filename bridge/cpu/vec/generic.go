package vec

import (
	"encoding/binary"
	"github.com/mtlbench/mtlbench/bridge/half"
	"math"
)

// Portable implementations: used on non-amd64 targets, on CPUs without
// AVX2/FMA/F16C, with the purego tag, and by tests as a second opinion.

// chunk is how many weights are widened to f32 at a time into a stack buffer,
// so the generic gemm allocates nothing and the buffer stays in L1.
const chunk = 256

func gemmBF16Generic(dst []float32, ldd int, x []float32, w []uint16, m, n, k int) {
	if m < 4 {
		// Decode: widening inline (a shift) beats a trip through the buffer.
		for i := 0; i < m; i++ {
			xr := x[i*k : i*k+k]
			for j := 0; j < n; j++ {
				dst[i*ldd+j] = dotBF16Generic(xr, w[j*k:j*k+k])
			}
		}
		return
	}
	gemmGeneric(dst, ldd, x, w, m, n, k, func(d []float32, s []uint16) {
		for i, h := range s[:len(d)] {
			d[i] = math.Float32frombits(uint32(h) << 16)
		}
	})
}

func dotBF16Generic(x []float32, w []uint16) float32 {
	w = w[:len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i] * math.Float32frombits(uint32(w[i])<<16)
		s1 += x[i+1] * math.Float32frombits(uint32(w[i+1])<<16)
		s2 += x[i+2] * math.Float32frombits(uint32(w[i+2])<<16)
		s3 += x[i+3] * math.Float32frombits(uint32(w[i+3])<<16)
	}
	for ; i < len(x); i++ {
		s0 += x[i] * math.Float32frombits(uint32(w[i])<<16)
	}
	return (s0 + s1) + (s2 + s3)
}

func gemmF16Generic(dst []float32, ldd int, x []float32, w []uint16, m, n, k int) {
	gemmGeneric(dst, ldd, x, w, m, n, k, func(d []float32, s []uint16) {
		for i, h := range s[:len(d)] {
			d[i] = half.F16ToFloat(h)
		}
	})
}

func gemmF32Generic(dst []float32, ldd int, x []float32, w []float32, m, n, k int) {
	gemmGeneric(dst, ldd, x, w, m, n, k, func(d []float32, s []float32) { copy(d, s) })
}

// gemmGeneric widens each weight row a chunk at a time and dots it with four
// activation rows at once, so each widened weight is used four times.
func gemmGeneric[T uint16 | float32](dst []float32, ldd int, x []float32, w []T, m, n, k int, widen func([]float32, []T)) {
	var buf [chunk]float32
	for j := 0; j < n; j++ {
		wr := w[j*k : j*k+k]
		i := 0
		for ; i+4 <= m; i += 4 {
			var s0, s1, s2, s3 float32
			for c := 0; c < k; c += chunk {
				wb := buf[:min(chunk, k-c)]
				widen(wb, wr[c:])
				x0 := x[i*k+c:][:len(wb)]
				x1 := x[(i+1)*k+c:][:len(wb)]
				x2 := x[(i+2)*k+c:][:len(wb)]
				x3 := x[(i+3)*k+c:][:len(wb)]
				for t, v := range wb {
					s0 += x0[t] * v
					s1 += x1[t] * v
					s2 += x2[t] * v
					s3 += x3[t] * v
				}
			}
			dst[i*ldd+j] = s0
			dst[(i+1)*ldd+j] = s1
			dst[(i+2)*ldd+j] = s2
			dst[(i+3)*ldd+j] = s3
		}
		for ; i < m; i++ {
			var s float32
			for c := 0; c < k; c += chunk {
				wb := buf[:min(chunk, k-c)]
				widen(wb, wr[c:])
				s += dotF32Generic(x[i*k+c:][:len(wb)], wb)
			}
			dst[i*ldd+j] = s
		}
	}
}

func dotF32Generic(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func sumBytesGeneric(buf []byte) uint64 {
	var s0, s1, s2, s3 uint64
	i := 0
	for ; i+32 <= len(buf); i += 32 {
		b := buf[i : i+32]
		s0 += binary.LittleEndian.Uint64(b[0:])
		s1 += binary.LittleEndian.Uint64(b[8:])
		s2 += binary.LittleEndian.Uint64(b[16:])
		s3 += binary.LittleEndian.Uint64(b[24:])
	}
	for ; i+8 <= len(buf); i += 8 {
		s0 += binary.LittleEndian.Uint64(buf[i:])
	}
	for ; i < len(buf); i++ {
		s0 += uint64(buf[i])
	}
	return s0 + s1 + s2 + s3
}
