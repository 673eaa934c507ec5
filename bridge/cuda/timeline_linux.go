//go:build linux

package cuda

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
)

// The in-place timeline (Options.Timeline; docs/cuda.md, "The in-place
// timeline"). Kernels compiled with MTLB_TIMELINE note, for each block,
// when the wait on the previous kernel let it go, in one log every module
// writes to (common.cu's tl_note); the host keeps the launches it issued,
// in the same order, with the op each belongs to, and groups the log's
// entries into them when asked.

// tlCap is how many blocks' entries the log holds (16 bytes each): a 4-bit
// Qwen3-30B-A3B decode step notes about 60,000.
const tlCap = 1 << 23

// tlLaunches is how many launches the host logs in a window (32 bytes
// each): a Qwen3-30B-A3B decode step issues about 300.
const tlLaunches = 1 << 19

// timeline is the host's side: the ops launches belong to, the launches
// issued since TimelineStart (thread only) and the log.
type timeline struct {
	tlAts []bridge.OpTiming
	tlIdx map[bridge.OpTiming]int32
	tlCur int32
	tlLog []tlLaunch
	tlBuf *devAlloc
}

type tlLaunch struct {
	fn              uintptr
	blocks, threads uint64
	at              int32
}

// tlMark notes the op the next launches belong to (any mode).
func (b *Backend) tlMark(layer int, component, op string) {
	k := bridge.OpTiming{Layer: layer, Component: component, Op: op}
	i, ok := b.tlIdx[k]
	if !ok {
		if b.tlIdx == nil {
			b.tlIdx = map[bridge.OpTiming]int32{}
		}
		i = int32(len(b.tlAts))
		b.tlAts = append(b.tlAts, k)
		b.tlIdx[k] = i
	}
	b.tlCur = i
}

// tlRecord logs the launches of ents as they are issued, once a timeline
// has started (thread only). A cuBLAS GEMM is logged with no shape: its
// kernels note nothing, so it leaves a gap in the timeline where a step's
// dispatches count it.
func (b *Backend) tlRecord(ents []entry) {
	if b.tlBuf == nil {
		return
	}
	for _, e := range ents {
		if len(b.tlLog) >= tlLaunches {
			return // past the window: the notes after the last logged launch go unread
		}
		switch e.kind {
		case entLaunch:
			b.tlLog = append(b.tlLog, tlLaunch{fn: e.fn, blocks: uint64(e.grid[0]) * uint64(e.grid[1]) * uint64(e.grid[2]),
				threads: uint64(e.block), at: e.at})
		case entGemm:
			b.tlLog = append(b.tlLog, tlLaunch{at: -1})
		}
	}
}

// TimelineOn says whether the kernels keep the timeline (Options.Timeline).
func (b *Backend) TimelineOn() bool { return b.opts.Timeline }

// TimelineStart empties the timeline: the launches after it are the ones
// Timeline reports. It fails unless the backend was opened with
// Options.Timeline.
func (b *Backend) TimelineStart() error {
	if !b.opts.Timeline {
		return fmt.Errorf("cuda: the in-place timeline is off (MTLBENCH_CUDA_TIMELINE=1 turns it on)")
	}
	return b.th.do(func() error {
		a := b.api
		if err := b.check("cuStreamSynchronize", call(a.cuStreamSynchronize, b.stream)); err != nil {
			return err
		}
		if b.tlBuf == nil {
			if a.cuModuleGetGlobal == 0 {
				return fmt.Errorf("cuda: the driver has no cuModuleGetGlobal, which the timeline hands the kernels its log with")
			}
			d, err := b.devAlloc(16 + 16*tlCap)
			if err != nil {
				return fmt.Errorf("cuda: the timeline's log: %w", err)
			}
			for _, m := range b.mods {
				var p, size uint64
				name := []byte("mtlb_tl_log\x00")
				if err := b.check("cuModuleGetGlobal mtlb_tl_log", call(a.cuModuleGetGlobal, uintptr(unsafe.Pointer(&p)),
					uintptr(unsafe.Pointer(&size)), m, uintptr(unsafe.Pointer(&name[0])))); err != nil {
					return fmt.Errorf("%w (kernels compiled without MTLB_TIMELINE?)", err)
				}
				if size != 8 {
					return fmt.Errorf("cuda: mtlb_tl_log is %d bytes in the kernels, want a pointer's 8", size)
				}
				if err := b.check("cuMemcpyHtoD", call(a.cuMemcpyHtoD, uintptr(p), uintptr(unsafe.Pointer(&d.ptr)), 8)); err != nil {
					return err
				}
			}
			b.tlBuf = d
		}
		head := [2]uint64{0, tlCap}
		if err := b.check("cuMemcpyHtoD", call(a.cuMemcpyHtoD, uintptr(b.tlBuf.ptr), uintptr(unsafe.Pointer(&head[0])), 16)); err != nil {
			return err
		}
		b.tlLog = b.tlLog[:0]
		return nil
	})
}

// Timeline waits for the device and returns the launches issued since
// TimelineStart, in order, each with its kernel, op and times: as many as
// the log held, less any no block of which reached a wait.
func (b *Backend) Timeline() ([]bridge.TimelineLaunch, error) {
	var notes []uint64
	var log []tlLaunch
	var full bool
	err := b.th.do(func() error {
		a := b.api
		if !b.opts.Timeline || b.tlBuf == nil {
			return fmt.Errorf("cuda: no timeline: MTLBENCH_CUDA_TIMELINE=1 turns it on and TimelineStart starts it")
		}
		if err := b.check("cuStreamSynchronize", call(a.cuStreamSynchronize, b.stream)); err != nil {
			return err
		}
		var n uint64
		if err := b.check("cuMemcpyDtoH", call(a.cuMemcpyDtoH, uintptr(unsafe.Pointer(&n)), uintptr(b.tlBuf.ptr), 8)); err != nil {
			return err
		}
		n = min(n, tlCap)
		notes = make([]uint64, 2*n)
		if n > 0 {
			if err := b.check("cuMemcpyDtoH", call(a.cuMemcpyDtoH, uintptr(unsafe.Pointer(&notes[0])), uintptr(b.tlBuf.ptr+16), uintptr(16*n))); err != nil {
				return err
			}
		}
		log, full = slices.Clone(b.tlLog), len(b.tlLog) >= tlLaunches
		return nil
	})
	if err != nil {
		return nil, err
	}
	names := make(map[uintptr]string, len(b.fns))
	for n, f := range b.fns {
		names[f] = n
	}
	issued := make([]tlIssued, len(log))
	for i, l := range log {
		issued[i] = tlIssued{kernel: names[l.fn], blocks: l.blocks, threads: l.threads, at: bridge.OpTiming{Layer: -1}}
		if l.at >= 0 && int(l.at) < len(b.tlAts) {
			issued[i].at = b.tlAts[l.at]
		}
		if b.opts.ProfileDetail { // each kernel an op of its own, as profiles split them
			issued[i].at.Op += ":" + issued[i].kernel
		}
	}
	return matchTimeline(issued, decodeNotes(notes), full)
}
