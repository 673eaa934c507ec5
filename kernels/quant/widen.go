package quant

import (
	"fmt"
	"slices"
)

// Widenings are the affine formats whose values hold a narrower affine
// format's exactly, narrowest first: the same groups, scales and biases,
// each value in more bits (q < 2^bits fits any wider field). A backend
// whose kernels run 4 and 8 bits (Metal, CUDA) runs mlx-community's 2-, 3-,
// 5- and 6-bit checkpoints at 4 or 8 bits (docs/quantization.md).
func Widenings(s Spec) []Spec {
	if s.Type != Affine {
		return nil
	}
	var out []Spec
	for _, b := range []int{4, 8} {
		if b > s.Bits {
			out = append(out, Spec{Type: Affine, Bits: b, Group: s.Group, Scale: s.Scale})
		}
	}
	return out
}

// Forms are the formats other than s that hold s's values exactly, the
// fewest bytes first, for a backend that lacks s or runs it faster in
// another: an affine format's Widenings, and a format with kernels of its
// own that is also read by transcoding (Q5_K) its transcoder's forms
// (Transcoder.Forms; Matrix.Convert writes them).
func Forms(s Spec) []Spec {
	if s.Type == Affine {
		return Widenings(s)
	}
	if tc, ok := Transcoders[s.String()]; ok {
		return tc.Forms()
	}
	return nil
}

// Convert returns m in to, one of Forms(m.Spec): widened, or transcoded
// from its blocks, into new memory.
func (m *Matrix) Convert(to Spec) (*Matrix, error) {
	if !slices.Contains(Forms(m.Spec), to) {
		return nil, fmt.Errorf("%v does not convert to %v", m.Spec, to)
	}
	out := &Matrix{Spec: to, Rows: m.Rows, K: m.K, Data: make([]byte, m.Rows*to.RowBytes(m.K))}
	if m.Spec.Type == Affine {
		out.Scales, out.Biases = m.Scales, m.Biases
		return out, m.Widen(to, out.Data)
	}
	n := m.Rows * to.Groups(m.K) * to.Scale.Size()
	out.Scales, out.Biases = make([]byte, n), make([]byte, n)
	return out, Transcoders[m.Spec.String()].Transcode(m.Data, out)
}

// Widen writes m's values at to's width into data (m.Rows·to.RowBytes(m.K)
// bytes); to must be one of Widenings(m.Spec). m's scales and biases serve
// the widened matrix unchanged.
func (m *Matrix) Widen(to Spec, data []byte) error {
	ok := false
	for _, w := range Widenings(m.Spec) {
		ok = ok || w == to
	}
	if !ok {
		return fmt.Errorf("%v does not widen to %v", m.Spec, to)
	}
	if err := m.Check(m.Spec.String()); err != nil {
		return err
	}
	if want := m.Rows * to.RowBytes(m.K); len(data) != want {
		return fmt.Errorf("widening %v to %v: %d bytes for %d rows of %d (want %d)", m.Spec, to, len(data), m.Rows, m.K, want)
	}
	from, wide := m.Spec.Bits, to.Bits
	rb, wb := m.Spec.RowBytes(m.K), to.RowBytes(m.K)
	mask := uint32(1)<<from - 1
	forRuns(m.Rows, max(1, (1<<16)/m.K), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			src, dst := m.Data[r*rb:(r+1)*rb], data[r*wb:(r+1)*wb]
			clear(dst)
			for i := 0; i < m.K; i++ {
				// Value i starts at bit i·from and spans at most two bytes.
				bit := i * from
				v := uint32(src[bit/8])
				if bit/8+1 < len(src) {
					v |= uint32(src[bit/8+1]) << 8
				}
				q := v >> (bit % 8) & mask
				dst[i*wide/8] |= byte(q << (i * wide % 8))
			}
		}
	})
	return nil
}
