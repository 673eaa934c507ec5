package kbench

import (
	"fmt"
	"github.com/mtlbench/mtlbench/bridge/half"
	"math"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/internal/offheap"
)

// host is a tensor filled from host memory, kept so the reference can see
// the exact (rounded) values the backend was given.
type host struct {
	t     bridge.Tensor
	dt    bridge.DType
	shape []int
	f32   []float32 // dt == F32
	u16   []uint16  // dt == F16 or BF16: the bits
	// offHeap: the values lie off the Go heap (uploadTo), where the
	// backend may alias them; its duplicates are made there too.
	offHeap bool
}

// tensor is the backend's tensor, nil for a nil host (an optional input,
// such as a bias, left out) as the backend contract takes it.
func (h *host) tensor() bridge.Tensor {
	if h == nil {
		return nil
	}
	return h.t
}

// values returns the tensor's values as f32: the stored slice itself for
// f32 (read only), a widened copy otherwise; nil for a nil host.
func (h *host) values() []float32 {
	if h == nil {
		return nil
	}
	if h.dt == bridge.F32 {
		return h.f32
	}
	out := make([]float32, len(h.u16))
	widen(h.dt, out, h.u16)
	return out
}

// valuesAt writes the len(dst) values from element lo on into dst as f32:
// a piece of a tensor at a time, never the whole of a large one.
func (h *host) valuesAt(lo int64, dst []float32) {
	if h.dt == bridge.F32 {
		copy(dst, h.f32[lo:])
		return
	}
	widen(h.dt, dst, h.u16[lo:lo+int64(len(dst))])
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

// negated fills a tensor with -h's values, already rounded to h's dtype
// (where negation is exact), a chunk at a time.
func negated(h *host) filler {
	return func(lo int64, dst []float32) {
		h.valuesAt(lo, dst)
		for i := range dst {
			dst[i] = -dst[i]
		}
	}
}

// upload fills a dt tensor with random values around mean and hands it to
// the backend through Weight, the only way the contract gives to put host
// data on the device (activations and the KV cache included).
func (b *Bench) upload(dt bridge.DType, shape []int, mean, scale float32) (*host, error) {
	return b.uploadFrom(dt, shape, b.random(mean, scale))
}

// uploadFrom is upload with the values from fill, rounded to dt. A plan
// counts the tensor and returns an empty host.
func (b *Bench) uploadFrom(dt bridge.DType, shape []int, fill filler) (*host, error) {
	return b.uploadTo(nil, dt, shape, fill)
}

// uploadTo is uploadFrom with the values in mem (from offHeap, of the
// tensor's size) where it is not nil: a backend that can alias such memory
// (bridge.MappedWeighter) then holds the tensor once, where Weight would
// copy it beside the host values the reference reads. Only inputs no op
// writes go there: an aliased tensor is its host values.
func (b *Bench) uploadTo(mem []byte, dt bridge.DType, shape []int, fill filler) (*host, error) {
	n := elems(shape)
	b.reserve(mulSat(n, int64(dt.Size())))
	h := &host{dt: dt, shape: shape}
	if b.plan {
		return h, nil
	}
	if mem != nil && int64(len(mem)) != n*int64(dt.Size()) {
		return nil, fmt.Errorf("internal: %d bytes for a %v tensor of %d elements", len(mem), dt, n)
	}
	switch {
	case dt == bridge.F32 && len(mem) > 0:
		h.f32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(mem))), n)
	case (dt == bridge.F16 || dt == bridge.BF16) && len(mem) > 0:
		h.u16 = unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(mem))), n)
	case dt == bridge.F32:
		h.f32 = make([]float32, n)
	case dt == bridge.F16 || dt == bridge.BF16:
		h.u16 = make([]uint16, n)
	default:
		return nil, fmt.Errorf("internal: cannot fill a %v tensor", dt)
	}
	if err := b.fill(h, n, fill); err != nil {
		return nil, err
	}
	var t bridge.Tensor
	var err error
	if mw, ok := b.be.(bridge.MappedWeighter); ok && len(mem) > 0 {
		t, err = mw.WeightMapped(dt, shape, h.bytes())
	} else {
		t, err = b.be.Weight(dt, shape, h.bytes())
	}
	if err != nil {
		return nil, err
	}
	h.t, h.offHeap = t, len(mem) > 0
	b.tensors = append(b.tensors, t)
	b.hosts = append(b.hosts, h)
	return h, nil
}

// weight uploads a weight, an input no op writes, off the heap (uploadTo).
func (b *Bench) weight(dt bridge.DType, shape []int, mean, scale float32) (*host, error) {
	return b.uploadTo(b.offHeap(mulSat(elems(shape), int64(dt.Size()))), dt, shape, b.random(mean, scale))
}

// offHeap is n zeroed bytes outside the Go heap, given back at Close: the
// memory of a case's large read-only inputs, which Metal aliases instead
// of copying (uploadTo). A plan allocates nothing and gets nil.
func (b *Bench) offHeap(n int64) []byte {
	if b.plan || n == 0 {
		return nil
	}
	mem, free, _ := offheap.Alloc(int(n))
	b.frees = append(b.frees, free)
	return mem
}

// fillChunk is the elements filled between looks at the context: a
// fraction of a millisecond of drawing, where a large tensor takes seconds.
const fillChunk = 1 << 16

// fill draws h's n values a chunk at a time, rounded to its dtype through
// one chunk of f32 (no f32 copy of a large matrix), until the case's
// context ends.
func (b *Bench) fill(h *host, n int64, fill filler) error {
	var tmp []float32
	if h.dt != bridge.F32 {
		tmp = make([]float32, min(n, fillChunk))
	}
	for lo := int64(0); lo < n; lo += fillChunk {
		if err := b.ctx.Err(); err != nil {
			return fmt.Errorf("%s: filling its tensors: %w", b.desc, err)
		}
		hi := min(lo+fillChunk, n)
		if h.dt == bridge.F32 {
			fill(lo, h.f32[lo:hi])
			continue
		}
		c := tmp[:hi-lo]
		fill(lo, c)
		narrow(h.dt, h.u16[lo:hi], c)
	}
	return nil
}

// bytes views the host values as the little-endian bytes Weight takes.
func (h *host) bytes() []byte {
	if h.dt == bridge.F32 {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(h.f32))), 4*len(h.f32))
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(h.u16))), 2*len(h.u16))
}

// output allocates a zeroed tensor the op writes (a plan counts it and
// gets nil).
func (b *Bench) output(dt bridge.DType, shape ...int) (bridge.Tensor, error) {
	b.reserve(mulSat(elems(shape), int64(dt.Size())))
	if b.plan {
		return nil, nil
	}
	t, err := b.be.Alloc(dt, shape...)
	if err != nil {
		return nil, err
	}
	b.tensors = append(b.tensors, t)
	return t, nil
}

// tokenIDs gives the step n token ids; only Embedding reads them.
func (b *Bench) tokenIDs(n int) {
	b.tokens = n
	b.reserve(mulSat(int64(n), 4))
	if !b.plan {
		b.ids = make([]int32, n)
	}
}

// distinctIDs draws the token ids as a seeded sample of distinct rows of a
// v-row table, each row once before any row twice, so the rows gathered are
// those the op's ideal counts (ops gatheredRows).
func (b *Bench) distinctIDs(v int) {
	if len(b.ids) == 0 || v <= 0 {
		return
	}
	if len(b.ids) <= v/2 { // few of many rows: draw until distinct
		seen := make(map[int32]bool, len(b.ids))
		for i := range b.ids {
			id := int32(b.rng.IntN(v))
			for seen[id] {
				id = int32(b.rng.IntN(v))
			}
			seen[id] = true
			b.ids[i] = id
		}
		return
	}
	perm := b.rng.Perm(v)
	for i := range b.ids {
		b.ids[i] = int32(perm[i%v])
	}
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

// rotate is how many copies (perCopy bytes each) of the inputs of a call
// moving perCall bytes to cycle through: rotation's count, cut to what the
// plan found fits. A plan records the count and makes none, so its tensors
// hold one copy and Need adds the rest.
func (b *Bench) rotate(perCall, perCopy int64) int {
	n := b.rotation(perCall)
	b.want, b.perCopy = n, perCopy
	if b.plan {
		return 1
	}
	// What is made, for Memory: MoE's routing, known only now, may ask for
	// fewer than the plan's guess.
	b.mem.Copies, b.mem.Fit = n, min(n, b.fit)
	return b.mem.Fit
}

// duplicate uploads another tensor with h's exact values, from host memory
// of its own (backends may share the device copy of the same host bytes).
func (b *Bench) duplicate(h *host) (*host, error) {
	var mem []byte
	if h.offHeap {
		mem = b.offHeap(mulSat(elems(h.shape), int64(h.dt.Size())))
	}
	return b.uploadTo(mem, h.dt, h.shape, h.valuesAt)
}

// copies returns h and n-1 duplicates of it. A backend that refuses one
// ends the copies without an error (fewer copies time a warmer cache,
// nothing worse); an interrupt is an error.
func (b *Bench) copies(h *host, n int) ([]*host, error) {
	out := []*host{h}
	for len(out) < n {
		d, err := b.duplicate(h)
		if err != nil {
			if b.ctx.Err() != nil {
				return nil, err
			}
			break
		}
		out = append(out, d)
	}
	return out, nil
}
