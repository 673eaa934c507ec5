package model

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// owned is the memory a source allocates for the weights it hands out
// (synthetic draws, dtype conversions, transcodes, unpermuted rows):
// off the Go heap where it can be (allocWeights), released together by
// Close, and remembered where mmap'd, so a backend may wrap it without a
// copy (MappedSource) and a run can tell its resident share (Memory).
type owned struct {
	mu     sync.Mutex
	frees  []func()
	mapped regions
}

// alloc returns n zeroed bytes that release frees.
func (o *owned) alloc(n int) []byte {
	b, free, mapped := allocWeights(n)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.frees = append(o.frees, free)
	if mapped {
		o.mapped = append(o.mapped, b)
	}
	return b
}

// contain reports whether b lies within one of the mmap'd allocations.
func (o *owned) contain(b []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mapped.contain(b)
}

// memory returns the mmap'd allocations (a copy of the list).
func (o *owned) memory() [][]byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([][]byte(nil), o.mapped...)
}

// release frees every allocation; what was handed out must no longer be
// used.
func (o *owned) release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, f := range o.frees {
		f()
	}
	o.frees, o.mapped = nil, nil
}

// converted returns data of dtype src as a new tensor of dtype dst.
func (o *owned) converted(data []byte, src, dst bridge.DType) []byte {
	out := o.alloc(len(data) / src.Size() * dst.Size())
	convert(out, data, src, dst)
	return out
}

// dequantized returns packed matrix p of the given shape as f32.
func (o *owned) dequantized(p Packed, shape []int) []byte {
	n := 1
	for _, d := range shape {
		n *= d
	}
	out := o.alloc(4 * n)
	dequantizeInto(out, p, shape)
	return out
}

// transcodeTarget is rows x k values of q in owned memory, for a
// transcoder to fill: GGUF's ggml formats, mlx's floating-point modes.
func (o *owned) transcodeTarget(q quant.Spec, rows, k int) *quant.Matrix {
	buf := o.alloc(int(q.Bytes(int64(rows)*int64(k), k)))
	nd, ns := rows*q.RowBytes(k), rows*q.Groups(k)*q.Scale.Size()
	m := &quant.Matrix{Spec: q, Rows: rows, K: k, Data: buf[:nd]}
	if q.Type == quant.Affine {
		m.Scales, m.Biases = buf[nd:nd+ns], buf[nd+ns:nd+2*ns]
	}
	return m
}

// formed is p, a matrix of the given shape, in to, one of
// quant.Forms(p.Spec): widened, or transcoded from its blocks, into owned
// memory, so the form a backend runs is held as the source's own and
// counted with it (Memory); a widening keeps p's scales and biases. The
// caller gives back p's values (docs/quantization.md, "Memory").
func (o *owned) formed(p Packed, shape []int, to quant.Spec) (Packed, error) {
	if !slices.Contains(quant.Forms(p.Spec), to) || len(shape) != 2 {
		return Packed{}, fmt.Errorf("%v of shape %v does not convert to %v", p.Spec, shape, to)
	}
	rows, k := shape[0], shape[1]
	m := &quant.Matrix{Spec: p.Spec, Rows: rows, K: k, Data: p.Data, Scales: p.Scales, Biases: p.Biases}
	if p.Spec.Type == quant.Affine {
		data := o.alloc(rows * to.RowBytes(k))
		if err := m.Widen(to, data); err != nil {
			return Packed{}, err
		}
		return Packed{Spec: to, Data: data, Scales: p.Scales, Biases: p.Biases}, nil
	}
	out := o.transcodeTarget(to, rows, k)
	if err := quant.Transcoders[p.Spec.String()].Transcode(p.Data, out); err != nil {
		return Packed{}, err
	}
	return Packed{Spec: to, Data: out.Data, Scales: out.Scales, Biases: out.Biases}, nil
}

// regions are mmap'd allocations.
type regions [][]byte

func (r regions) contain(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for _, x := range r {
		q := uintptr(unsafe.Pointer(unsafe.SliceData(x)))
		if p >= q && p+uintptr(len(b)) <= q+uintptr(len(x)) {
			return true
		}
	}
	return false
}
