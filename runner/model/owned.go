package model

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/internal/offheap"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// owned is the memory a source allocates for the weights it hands out
// (synthetic draws, dtype conversions, transcodes, unpermuted rows):
// off the Go heap where it can be (offheap.Alloc), released together by
// Close, and remembered where mmap'd, so a backend may wrap it without a
// copy (MappedSource) and a run can tell its resident share (Memory).
type owned struct {
	mu     sync.Mutex
	frees  []func()
	mapped regions
	stacks map[string]*stack
	// experts is the experts of a MoE layer: their matrices are placed
	// in stacks (place); 0 places nothing so.
	experts int
}

// stack is one allocation that holds equal slots side by side: the
// experts of a MoE layer, which a backend then reads in place as one
// region (docs/quantization.md, "Memory").
type stack struct {
	mem    []byte
	slot   int
	handed []bool // slots handed out, and so already filled
}

// alloc returns n zeroed bytes that release frees.
func (o *owned) alloc(n int) []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.allocLocked(n)
}

func (o *owned) allocLocked(n int) []byte {
	b, free, mapped := offheap.Alloc(n)
	o.frees = append(o.frees, free)
	if mapped {
		o.mapped = append(o.mapped, b)
	}
	return b
}

// slot returns slot i of n bytes in the stack key names, allocating its
// slots x n bytes on first use, and whether the slot is fresh (handed out
// for the first time, to be filled). A slot out of range, or a size that
// disagrees with the stack's, gets memory of its own.
func (o *owned) slot(key string, slots, i, n int) (b []byte, fresh bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.stacks[key]
	if st == nil && i >= 0 && i < slots && n > 0 {
		st = &stack{mem: o.allocLocked(slots * n), slot: n, handed: make([]bool, slots)}
		if o.stacks == nil {
			o.stacks = map[string]*stack{}
		}
		o.stacks[key] = st
	}
	if st == nil || i < 0 || i >= len(st.handed) || n != st.slot {
		return o.allocLocked(n), true
	}
	fresh = !st.handed[i]
	st.handed[i] = true
	return st.mem[i*n : (i+1)*n], fresh
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
	o.frees, o.mapped, o.stacks = nil, nil, nil
}

// place returns n bytes for part ("" for floats; data, scales or biases
// of a packed matrix) of spec's tensor in form, and whether they are
// fresh, to be filled. An expert's matrix of a MoE layer goes in its
// layer's stack: floats as [gate | up | down] of every expert, packed
// parts one stack per matrix and part, so a backend that reads a layer's
// experts as one region (Metal) takes them in place rather than gather a
// second copy of them (docs/quantization.md, "Memory"). Anything else
// gets memory of its own.
func (o *owned) place(spec TensorSpec, form, part string, n int) ([]byte, bool) {
	l, m, e, ok := expertSlot(spec.Name, o.experts)
	switch {
	case !ok:
		return o.alloc(n), true
	case part == "":
		return o.slot(fmt.Sprintf("%d %s", l, form), 3*o.experts, m*o.experts+e, n)
	default:
		return o.slot(fmt.Sprintf("%d %d %s %s", l, m, form, part), o.experts, e, n)
	}
}

// expertMatrices are an expert's matrices, in the order of their stacks.
var expertMatrices = [...]string{"gate_proj.weight", "up_proj.weight", "down_proj.weight"}

// expertSlot is layer l's expert e's matrix m (expertMatrices) that name
// names, one of experts per layer.
func expertSlot(name string, experts int) (l, m, e int, ok bool) {
	var rest string
	if n, _ := fmt.Sscanf(name, "model.layers.%d.mlp.experts.%d.%s", &l, &e, &rest); n != 3 || e < 0 || e >= experts {
		return 0, 0, 0, false
	}
	m = slices.Index(expertMatrices[:], rest)
	return l, m, e, m >= 0
}

// converted returns spec's data of dtype src as a new tensor of dtype dst;
// a finite value dst cannot hold is an error (rangeError).
func (o *owned) converted(spec TensorSpec, data []byte, src, dst bridge.DType) ([]byte, error) {
	out, fresh := o.place(spec, dst.String(), "", len(data)/src.Size()*dst.Size())
	if fresh {
		if v, over := convert(out, data, src, dst); over {
			return nil, &rangeError{value: v, src: src, dst: dst}
		}
	}
	return out, nil
}

// dequantized returns spec's matrix, p, as f32.
func (o *owned) dequantized(spec TensorSpec, p Packed) []byte {
	out, fresh := o.place(spec, bridge.F32.String(), "", 4*int(spec.Elems()))
	if fresh {
		dequantizeInto(out, p, spec.Shape)
	}
	return out
}

// transcodeTarget is spec's matrix in q in owned memory, for a transcoder
// to fill: GGUF's ggml formats, mlx's floating-point modes.
func (o *owned) transcodeTarget(spec TensorSpec, q quant.Spec) *quant.Matrix {
	rows, k := spec.Shape[0], spec.Shape[1]
	m := &quant.Matrix{Spec: q, Rows: rows, K: k}
	m.Data, _ = o.place(spec, q.String(), "data", rows*q.RowBytes(k))
	if q.Type == quant.Affine {
		ns := rows * q.Groups(k) * q.Scale.Size()
		m.Scales, _ = o.place(spec, q.String(), "scales", ns)
		m.Biases, _ = o.place(spec, q.String(), "biases", ns)
	}
	return m
}

// formed is p, a matrix of the given shape, in to, one of
// quant.Forms(p.Spec): widened, or transcoded from its blocks, into owned
// memory, so the form a backend runs is held as the source's own and
// counted with it (Memory); a widening keeps p's scales and biases. The
// caller gives back p's values (docs/quantization.md, "Memory").
func (o *owned) formed(spec TensorSpec, p Packed, to quant.Spec) (Packed, error) {
	if !slices.Contains(quant.Forms(p.Spec), to) || len(spec.Shape) != 2 {
		return Packed{}, fmt.Errorf("%v of shape %v does not convert to %v", p.Spec, spec.Shape, to)
	}
	rows, k := spec.Shape[0], spec.Shape[1]
	m := &quant.Matrix{Spec: p.Spec, Rows: rows, K: k, Data: p.Data, Scales: p.Scales, Biases: p.Biases}
	if p.Spec.Type == quant.Affine {
		data, _ := o.place(spec, to.String(), "data", rows*to.RowBytes(k))
		if err := m.Widen(to, data); err != nil {
			return Packed{}, err
		}
		return Packed{Spec: to, Data: data, Scales: p.Scales, Biases: p.Biases}, nil
	}
	out := o.transcodeTarget(spec, to)
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
