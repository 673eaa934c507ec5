package bridge

import (
	"hash/fnv"
	"sync/atomic"
	"unsafe"
)

// HostKey identifies host bytes a backend has made a device tensor of.
// Each repetition of a benchmark makes an engine of its own, and the
// engines hand the backend the same cached bytes (runner/model.Cached);
// keyed so, a backend gives them the tensor the first engine got instead
// of another copy, and what it derived from that tensor (packed experts,
// pointer tables) is found again.
type HostKey struct {
	addr uintptr
	size int
	dt   DType
	fp   uint64 // sampled content, in case the host memory was reused
}

// KeyOf is the key of data as a tensor of dt.
func KeyOf(dt DType, data []byte) HostKey {
	k := HostKey{size: len(data), dt: dt}
	if len(data) == 0 {
		return k
	}
	k.addr = uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	h := fnv.New64a()
	const samples = 64
	step := max(len(data)/samples, 1)
	for i := 0; i < len(data); i += step {
		h.Write(data[i:min(i+8, len(data))])
	}
	h.Write(data[max(len(data)-8, 0):])
	k.fp = h.Sum64()
	return k
}

// Holders counts who holds a tensor a backend made of host bytes (a
// HostKey) and hands out again for the same bytes: each hand-out after the
// first adds one and each Free takes one, the memory going with the last.
// A build that fails frees what it was handed, which then leaves in place
// the tensors an engine made before it still runs. The zero value is one
// holder.
type Holders struct{ extra atomic.Int64 }

// Add counts one more holder.
func (h *Holders) Add() { h.extra.Add(1) }

// Drop takes a holder and reports whether it was the last.
func (h *Holders) Drop() bool { return h.extra.Add(-1) < 0 }
