package kbench

import (
	"fmt"
	"github.com/mtlbench/mtlbench/bridge/half"
	"math"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
)

// host is a tensor filled from host memory, kept so the reference can see
// the exact (rounded) values the backend was given.
type host struct {
	t     bridge.Tensor
	dt    bridge.DType
	shape []int
	f32   []float32 // dt == F32
	u16   []uint16  // dt == F16 or BF16: the bits
}

// values returns the tensor's values as f32: the stored slice itself for
// f32 (read only), a widened copy otherwise.
func (h *host) values() []float32 {
	if h.dt == bridge.F32 {
		return h.f32
	}
	out := make([]float32, len(h.u16))
	widen(h.dt, out, h.u16)
	return out
}

// rows returns rows ids of a [rows][width] tensor as f32.
func (h *host) rows(ids []int32, width int) []float32 {
	out := make([]float32, len(ids)*width)
	for i, id := range ids {
		lo := int(id) * width
		if h.dt == bridge.F32 {
			copy(out[i*width:], h.f32[lo:lo+width])
		} else {
			widen(h.dt, out[i*width:(i+1)*width], h.u16[lo:lo+width])
		}
	}
	return out
}

func widen(dt bridge.DType, dst []float32, src []uint16) {
	if dt == bridge.BF16 {
		half.BF16ToF32(dst, src)
	} else {
		half.F16ToF32(dst, src)
	}
}

func narrow(dt bridge.DType, dst []uint16, src []float32) {
	if dt == bridge.BF16 {
		half.F32ToBF16(dst, src)
	} else {
		half.F32ToF16(dst, src)
	}
}

// roundTo rounds xs in place to the values a dt tensor would hold.
func roundTo(dt bridge.DType, xs []float32) {
	if dt != bridge.F16 && dt != bridge.BF16 {
		return
	}
	u := make([]uint16, len(xs))
	narrow(dt, u, xs)
	widen(dt, xs, u)
}

// reserve counts n bytes against what the backend said it can still give,
// so an oversized case fails with the figures instead of an out-of-memory
// kill halfway through filling its tensors.
func (b *Bench) reserve(n int64) error {
	b.used += n
	if b.avail > 0 && b.used > b.avail {
		return fmt.Errorf("%s needs more than the %d MiB the %s backend has available", b.op, b.avail>>20, b.be.Info().Backend)
	}
	return nil
}

func elems(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	return n
}

// filler writes the elements of a tensor starting at element lo into dst.
type filler func(lo int64, dst []float32)

// random draws uniform values of standard deviation scale around mean;
// uniform rather than normal because it is several times cheaper to draw
// for the hundreds of millions of MoE weights.
func (b *Bench) random(mean, scale float32) filler {
	s := scale * float32(math.Sqrt(3))
	return func(_ int64, dst []float32) {
		for i := range dst {
			dst[i] = mean + s*(2*b.rng.Float32()-1)
		}
	}
}

// upload fills a dt tensor with random values around mean and hands it to
// the backend through Weight, the only way the contract gives to put host
// data on the device (activations and the KV cache included).
func (b *Bench) upload(dt bridge.DType, shape []int, mean, scale float32) (*host, error) {
	return b.uploadFrom(dt, shape, b.random(mean, scale))
}

// uploadFrom is upload with the values from fill, rounded to dt.
func (b *Bench) uploadFrom(dt bridge.DType, shape []int, fill filler) (*host, error) {
	n := elems(shape)
	if err := b.reserve(n * int64(dt.Size())); err != nil {
		return nil, err
	}
	h := &host{dt: dt, shape: shape}
	switch dt {
	case bridge.F32:
		h.f32 = make([]float32, n)
		fill(0, h.f32)
	case bridge.F16, bridge.BF16:
		// Drawn and rounded in chunks: no f32 copy of a large matrix.
		h.u16 = make([]uint16, n)
		tmp := make([]float32, min(n, 1<<16))
		for lo := int64(0); lo < n; lo += int64(len(tmp)) {
			c := tmp[:min(int64(len(tmp)), n-lo)]
			fill(lo, c)
			narrow(dt, h.u16[lo:lo+int64(len(c))], c)
		}
	default:
		return nil, fmt.Errorf("internal: cannot fill a %v tensor", dt)
	}
	t, err := b.be.Weight(dt, shape, h.bytes())
	if err != nil {
		return nil, err
	}
	h.t = t
	b.tensors = append(b.tensors, t)
	b.hosts = append(b.hosts, h)
	return h, nil
}

// bytes views the host values as the little-endian bytes Weight takes.
func (h *host) bytes() []byte {
	if h.dt == bridge.F32 {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(h.f32))), 4*len(h.f32))
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(h.u16))), 2*len(h.u16))
}

// output allocates a zeroed tensor the op writes.
func (b *Bench) output(dt bridge.DType, shape ...int) (bridge.Tensor, error) {
	if err := b.reserve(elems(shape) * int64(dt.Size())); err != nil {
		return nil, err
	}
	t, err := b.be.Alloc(dt, shape...)
	if err != nil {
		return nil, err
	}
	b.tensors = append(b.tensors, t)
	return t, nil
}

// read copies a tensor back as f32: the values as the backend holds them,
// for inputs an op updates in place.
func (b *Bench) read(t bridge.Tensor) ([]float32, error) {
	out := make([]float32, t.Len())
	return out, b.be.Read(t, out)
}

// around reads ins, runs the op once and reads outs: what a check compares,
// taken from the values the backend really holds before and after the call.
func (b *Bench) around(ins []bridge.Tensor, outs ...bridge.Tensor) (before, after [][]float32, err error) {
	for _, t := range ins {
		v, err := b.read(t)
		if err != nil {
			return nil, nil, err
		}
		before = append(before, v)
	}
	if err := b.once(); err != nil {
		return nil, nil, err
	}
	for _, t := range outs {
		v, err := b.read(t)
		if err != nil {
			return nil, nil, err
		}
		after = append(after, v)
	}
	return before, after, nil
}

// tolerance sets the check bound from the least precise dtype involved.
func (b *Bench) tolerance(dts ...bridge.DType) {
	b.tol, b.tolDT = 1e-4, bridge.F32
	for _, dt := range append(dts, b.act) {
		switch {
		case dt == bridge.BF16:
			b.tol, b.tolDT = 3e-2, dt
		case dt == bridge.F16 && b.tolDT != bridge.BF16:
			b.tol, b.tolDT = 5e-3, dt
		}
	}
}

// maxDiff is the largest |a[i]-b[i]|; NaN anywhere makes it NaN.
func maxDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if d > m || d != d {
			m = d
		}
		if m != m {
			return m
		}
	}
	return m
}

func maxAbs(a []float32) float64 {
	var m float64
	for _, v := range a {
		m = max(m, math.Abs(float64(v)))
	}
	return m
}

// spread picks at most k of the indices 0..n-1, evenly, first and last
// included: the rows a reference check recomputes when all would be slow.
func spread(n, k int) []int {
	if n <= k {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, k)
	for i := range out {
		out[i] = i * (n - 1) / (k - 1)
	}
	return out
}

// gatherRows copies rows idx of x (rows of width) into a new slice.
func gatherRows(x []float32, idx []int, width int) []float32 {
	out := make([]float32, len(idx)*width)
	for i, r := range idx {
		copy(out[i*width:(i+1)*width], x[r*width:(r+1)*width])
	}
	return out
}

// rotation is how many copies of a call's inputs (perCall bytes) a case on a
// device with a last-level cache cycles through, so repeated calls stream
// from memory as the engine's do (each layer's weights and KV cache are
// read once a step) rather than from a warm cache.
func (b *Bench) rotation(perCall int64) int {
	c := b.be.Info().CacheBytes
	if c <= 0 || perCall <= 0 {
		return 1
	}
	return int(min(max((3*c+perCall-1)/perCall, 1), 64))
}

// duplicate uploads another tensor with h's exact values, from host memory
// of its own (backends may share the device copy of the same host bytes).
func (b *Bench) duplicate(h *host) (*host, error) {
	return b.uploadFrom(h.dt, h.shape, func(lo int64, dst []float32) {
		if h.dt == bridge.F32 {
			copy(dst, h.f32[lo:])
			return
		}
		widen(h.dt, dst, h.u16[lo:lo+int64(len(dst))])
	})
}

// copies returns h and n-1 duplicates of it; it stops early, without an
// error, when the backend runs short of memory (fewer copies time a warmer
// cache, nothing worse).
func (b *Bench) copies(h *host, n int) []*host {
	out := []*host{h}
	size := elems(h.shape) * int64(h.dt.Size())
	for len(out) < n && (b.avail <= 0 || b.used+size <= b.avail/2) {
		d, err := b.duplicate(h)
		if err != nil {
			break
		}
		out = append(out, d)
	}
	return out
}
