package cuda

import (
	"cmp"
	"slices"
)

// blockPool keeps the device blocks a backend freed, for the next allocation
// of the same size. An engine made again for each repetition of a benchmark
// asks for the same sizes in the same order; handing each size's blocks back
// in the order the driver first gave them gives that engine the addresses the
// first one had, so the CUDA graphs keyed by them replay (graph_linux.go)
// instead of being captured again, and no cuMemFree stalls the device
// (docs/cuda.md, "Device memory").
type blockPool struct {
	free  map[int64][]pooledBlock // by size, in the order the driver gave them
	bytes int64                   // held in free
	next  uint64                  // the order of the next block the driver gives
}

type pooledBlock struct {
	ptr   uint64
	order uint64
}

// stamp returns the order of a block the driver has just given.
func (p *blockPool) stamp() uint64 {
	p.next++
	return p.next
}

// put keeps a freed block of size bytes, first given as the order-th.
func (p *blockPool) put(ptr uint64, size int64, order uint64) {
	if p.free == nil {
		p.free = map[int64][]pooledBlock{}
	}
	l := p.free[size]
	i, _ := slices.BinarySearchFunc(l, order, func(b pooledBlock, o uint64) int { return cmp.Compare(b.order, o) })
	p.free[size] = slices.Insert(l, i, pooledBlock{ptr, order})
	p.bytes += size
}

// take hands back the earliest-given free block of exactly size bytes.
func (p *blockPool) take(size int64) (ptr uint64, order uint64, ok bool) {
	l := p.free[size]
	if len(l) == 0 {
		return 0, 0, false
	}
	b := l[0]
	if len(l) == 1 {
		delete(p.free, size)
	} else {
		p.free[size] = l[1:]
	}
	p.bytes -= size
	return b.ptr, b.order, true
}

// drain empties the pool and returns the blocks it held, for the driver to
// free.
func (p *blockPool) drain() []uint64 {
	var ptrs []uint64
	for _, l := range p.free {
		for _, b := range l {
			ptrs = append(ptrs, b.ptr)
		}
	}
	p.free, p.bytes = nil, 0
	slices.Sort(ptrs)
	return ptrs
}

// shelf keeps the buffers of one use (a scratch buffer's name, a step's
// metadata) in the order they were made, each larger than the ones before
// (next):
// a request takes the first that holds it, and a new buffer is made only
// when none does. What a step of one shape gets then never changes, whatever
// larger steps ran between, where a buffer grown in place would move the
// arguments of every graph that held it (docs/cuda.md, "Device memory").
type shelf[T any] []shelved[T]

type shelved[T any] struct {
	size int64
	buf  T
}

// take returns the first buffer of at least n.
func (s shelf[T]) take(n int64) (T, bool) {
	for _, b := range s {
		if b.size >= n {
			return b.buf, true
		}
	}
	var none T
	return none, false
}

// put adds a buffer of size bytes, made for a request take found no buffer
// for: it is the largest. Sizes are the caller's unit (bytes, int32s).
func (s *shelf[T]) put(size int64, buf T) { *s = append(*s, shelved[T]{size, buf}) }

// next is the size to make for a request of n that no buffer holds (n with
// the caller's headroom): at least twice the largest, so the buffers of one
// use add up to less than twice the last.
func (s shelf[T]) next(n int64) int64 {
	if len(s) == 0 {
		return n
	}
	return max(n, 2*s[len(s)-1].size)
}
