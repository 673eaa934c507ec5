//go:build linux

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
)

// hostBuf is page-locked host memory, which asynchronous copies read or
// write when the stream reaches them rather than when they are queued.
type hostBuf struct {
	p   unsafe.Pointer
	n   int    // int32s
	dev uint64 // the kernels' address of p (0: not mapped)
}

func (h *hostBuf) i32() []int32 {
	if h.p == nil {
		return nil
	}
	return unsafe.Slice((*int32)(h.p), h.n)
}

// hostAlloc allocates n int32s of pinned memory into h (thread only).
func (b *Backend) hostAlloc(h *hostBuf, n int) error {
	var p unsafe.Pointer
	if err := b.check("cuMemAllocHost", call(b.api.cuMemAllocHost, uintptr(unsafe.Pointer(&p)), uintptr(n*4))); err != nil {
		return fmt.Errorf("cuda: allocating %d bytes of pinned host memory: %w", n*4, err)
	}
	*h = hostBuf{p: p, n: n}
	if f := b.api.cuMemHostGetDevicePointer; f != 0 && call(f, uintptr(unsafe.Pointer(&h.dev)), uintptr(p), 0) != 0 {
		h.dev = 0
	}
	return nil
}

func (b *Backend) hostFree(h *hostBuf) {
	if h.p != nil {
		call(b.api.cuMemFreeHost, uintptr(h.p))
	}
	*h = hostBuf{}
}

// stepSlot holds what one submitted step reads back: its stats, then the
// ids it was submitted with, in pinned memory, and the event that marks its
// end.
type stepSlot struct {
	busy bool
	// event marks the step's end; start, its first work (b.starts), both
	// timed: their interval is the step's DeviceTime.
	event, start uintptr
	host         hostBuf
	nStats, nIDs int
	launches     int // kernels and cuBLAS calls the step made
	misses       int // its lists run without a graph held for them
	profile      bool
	metaBuf      int         // the metadata buffer the step uploads from
	frees        []*devAlloc // released before the step was submitted
}

// pendingStep is a step SubmitStep queued.
type pendingStep struct {
	b      *Backend
	slot   *stepSlot
	waited bool
}

func (p *pendingStep) Wait() (bridge.StepStats, []int32, error) {
	if p.waited {
		return bridge.StepStats{}, nil, fmt.Errorf("cuda: step waited for twice")
	}
	p.waited = true
	if p.b.closed {
		return bridge.StepStats{}, nil, fmt.Errorf("cuda: backend is closed")
	}
	var (
		st  bridge.StepStats
		ids []int32
	)
	err := p.b.th.do(func() error {
		var err error
		st, ids, err = p.b.waitLocked(p.slot)
		return err
	})
	return st, ids, err
}

// donePending is a step that was waited for when it was submitted.
type donePending struct {
	st  bridge.StepStats
	ids []int32
}

func (d donePending) Wait() (bridge.StepStats, []int32, error) { return d.st, d.ids, nil }
