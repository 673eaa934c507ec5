package cpu

import (
	"fmt"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// tensor is host memory viewed as its element type.
type tensor struct {
	dt    bridge.DType
	shape []int
	n     int
	f32   []float32
	u16   []uint16 // f16 / bf16 bits
	i32   []int32
	q     *quant.Matrix // Packed weights
}

func (t *tensor) DType() bridge.DType { return t.dt }
func (t *tensor) Shape() []int        { return t.shape }
func (t *tensor) Len() int            { return t.n }

func elems(shape []int) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		n *= d
	}
	return n, nil
}

// view builds a tensor over data without copying when data is aligned for
// the element type (mmap'd weights), else over a copy.
func view(dt bridge.DType, shape []int, data []byte) (*tensor, error) {
	n, err := elems(shape)
	if err != nil {
		return nil, err
	}
	if len(data) != n*dt.Size() {
		return nil, fmt.Errorf("%d bytes for a %v tensor of shape %v (want %d)", len(data), dt, shape, n*dt.Size())
	}
	t := &tensor{dt: dt, shape: append([]int(nil), shape...), n: n}
	if n == 0 {
		return t, nil
	}
	if uintptr(unsafe.Pointer(&data[0]))%uintptr(dt.Size()) != 0 {
		data = append([]byte(nil), data...)
	}
	p := unsafe.Pointer(&data[0])
	switch dt {
	case bridge.F32:
		t.f32 = unsafe.Slice((*float32)(p), n)
	case bridge.F16, bridge.BF16:
		t.u16 = unsafe.Slice((*uint16)(p), n)
	case bridge.I32:
		t.i32 = unsafe.Slice((*int32)(p), n)
	default:
		return nil, fmt.Errorf("unsupported dtype %v", dt)
	}
	return t, nil
}

func alloc(dt bridge.DType, shape []int) (*tensor, error) {
	n, err := elems(shape)
	if err != nil {
		return nil, err
	}
	t := &tensor{dt: dt, shape: append([]int(nil), shape...), n: n}
	switch dt {
	case bridge.F32:
		t.f32 = make([]float32, n)
	case bridge.F16, bridge.BF16:
		t.u16 = make([]uint16, n)
	case bridge.I32:
		t.i32 = make([]int32, n)
	default:
		return nil, fmt.Errorf("unsupported dtype %v", dt)
	}
	return t, nil
}
