// Package pool keeps the device buffers a backend freed, for the next
// allocation of the same size, and the buffers of one use that grows
// (docs/architecture.md, "A repetition's engine").
package pool

import (
	"cmp"
	"slices"
)

// Blocks keeps freed buffers (B: a device address, a Metal buffer) by exact
// size. An engine made again for each repetition of a benchmark asks for
// the same sizes in the same order; handing each size's buffers back in
// the order the device first gave them gives that engine the buffers the
// first one had: CUDA graphs keyed by their addresses replay instead of
// being captured again, and no buffer is freed, allocated and cleared by
// the driver between repetitions.
type Blocks[B any] struct {
	free  map[int64][]kept[B] // by size, in the order the device gave them
	bytes int64               // held in free
	next  uint64              // the order of the next buffer the device gives
}

type kept[B any] struct {
	buf   B
	order uint64
}

// Stamp returns the order of a buffer the device has just given.
func (p *Blocks[B]) Stamp() uint64 {
	p.next++
	return p.next
}

// Put keeps a freed buffer of size bytes, first given as the order-th.
func (p *Blocks[B]) Put(buf B, size int64, order uint64) {
	if p.free == nil {
		p.free = map[int64][]kept[B]{}
	}
	l := p.free[size]
	i, _ := slices.BinarySearchFunc(l, order, func(k kept[B], o uint64) int { return cmp.Compare(k.order, o) })
	p.free[size] = slices.Insert(l, i, kept[B]{buf, order})
	p.bytes += size
}

// Take hands back the earliest-given free buffer of exactly size bytes.
func (p *Blocks[B]) Take(size int64) (buf B, order uint64, ok bool) {
	l := p.free[size]
	if len(l) == 0 {
		return buf, 0, false
	}
	k := l[0]
	if len(l) == 1 {
		delete(p.free, size)
	} else {
		p.free[size] = l[1:]
	}
	p.bytes -= size
	return k.buf, k.order, true
}

// Bytes is what the kept buffers hold.
func (p *Blocks[B]) Bytes() int64 { return p.bytes }

// Drain empties the pool and returns its buffers, in the order the device
// gave them, for the device to free.
func (p *Blocks[B]) Drain() []B {
	var all []kept[B]
	for _, l := range p.free {
		all = append(all, l...)
	}
	slices.SortFunc(all, func(a, c kept[B]) int { return cmp.Compare(a.order, c.order) })
	bufs := make([]B, len(all))
	for i, k := range all {
		bufs[i] = k.buf
	}
	p.free, p.bytes = nil, 0
	return bufs
}

// Shelf keeps the buffers of one use (a scratch buffer's name, a step's
// metadata) in the order they were made, each at least twice the one
// before (Next): a request takes the first that holds it, and a buffer is
// made only when none does. What a step of one shape gets then never
// changes, whatever larger steps ran between, where a buffer grown in
// place would move the arguments of every CUDA graph that held it
// (docs/cuda.md, "Device memory").
type Shelf[T any] []shelved[T]

type shelved[T any] struct {
	size int64
	buf  T
}

// Take returns the first buffer of at least n.
func (s Shelf[T]) Take(n int64) (T, bool) {
	for _, b := range s {
		if b.size >= n {
			return b.buf, true
		}
	}
	var none T
	return none, false
}

// Next is the size to make for a request of n that no buffer holds (n with
// the caller's headroom): at least twice the largest, so the buffers of one
// use add up to less than twice the last.
func (s Shelf[T]) Next(n int64) int64 {
	if len(s) == 0 {
		return n
	}
	return max(n, 2*s[len(s)-1].size)
}

// Put adds a buffer of size (the caller's unit: bytes, int32s), made for a
// request Take found no buffer for: it is the largest.
func (s *Shelf[T]) Put(size int64, buf T) { *s = append(*s, shelved[T]{size, buf}) }

// Each calls f with every buffer, for their release.
func (s Shelf[T]) Each(f func(T)) {
	for _, b := range s {
		f(b.buf)
	}
}
