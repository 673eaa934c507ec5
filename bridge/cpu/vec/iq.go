package vec

import (
	"unsafe"

	"github.com/mtlbench/mtlbench/kernels/quant"
)

// iqDot: an IQ row's units as int8 codes (quant.IQUnit builds them eight
// to a word) dotted with x in SIMD, each half's sum under its scale.
func iqDot(t quant.Type, row []byte, x []float32) float32 {
	nb := quant.Spec{Type: t}.BlockBytes()
	var c [4]uint64
	q := unsafe.Slice((*byte)(unsafe.Pointer(&c[0])), 32)
	var acc float32
	for b := 0; b < len(row)/nb; b++ {
		blk := row[b*nb : (b+1)*nb]
		for u := 0; u < 8; u++ {
			s0, s1 := quant.IQUnit(t, blk, u, &c)
			xu := x[256*b+32*u : 256*b+32*u+32]
			if s0 == s1 {
				acc += s0 * DotI8F32(xu, q)
			} else {
				acc += s0*DotI8F32(xu[:16], q[:16]) + s1*DotI8F32(xu[16:], q[16:])
			}
		}
	}
	return acc
}
