package emu

import (
	"cmp"
	"math/bits"
	"slices"
	"unsafe"
)

// footprint is the distinct device bytes a dispatch read and wrote: its
// traffic if a cache held every byte it touched more than once
// (docs/msl-subset.md, "The cost witness"); and each range of bound memory
// with the bytes it counted and the distinct ones.
type footprint struct {
	read, written int64
	ranges        []rangeCost
}

// rangeCost is one range of bound memory: the bindings (buffer indices)
// whose memory it holds, the bytes read and written in it with every
// access counted, and the distinct ones.
type rangeCost struct {
	bindings                      []int
	read, written                 int64
	distinctRead, distinctWritten int64
}

// footprintMaps are a dispatch's bitmaps, a bit a byte read and a bit a
// byte written, over the memory its bindings reach. That memory is cut into
// disjoint ranges at every binding's start: a byte belongs to the argument
// bound nearest below it, as arguments laid out back to back in one buffer
// are, and arguments bound at one address share a range.
type footprintMaps struct {
	ranges   []cFPRange
	bindings [][]int // each range's binding indices
	maps     [][]byte
}

func newFootprintMaps(bufs []cBinding) (*footprintMaps, error) {
	type span struct {
		lo, hi uintptr
		idx    int
	}
	var ss []span
	for i, b := range bufs {
		if b.ptr != 0 && b.len > 0 {
			ss = append(ss, span{b.ptr, b.ptr + uintptr(b.len), i})
		}
	}
	slices.SortFunc(ss, func(a, b span) int { return cmp.Or(cmp.Compare(a.lo, b.lo), cmp.Compare(a.idx, b.idx)) })
	type cut struct {
		lo, hi uintptr
		idx    []int
	}
	var cuts []cut
	reach := uintptr(0) // the end of the memory the spans so far cover
	for _, s := range ss {
		if n := len(cuts); n > 0 && cuts[n-1].lo == s.lo {
			cuts[n-1].idx = append(cuts[n-1].idx, s.idx)
			cuts[n-1].hi = max(cuts[n-1].hi, s.hi)
			reach = max(reach, s.hi)
			continue
		}
		if n := len(cuts); n > 0 && s.lo < reach {
			cuts[n-1].hi = s.lo // the previous range ends where this one starts
		}
		cuts = append(cuts, cut{s.lo, max(s.hi, reach), []int{s.idx}})
		reach = max(reach, s.hi)
	}
	m := &footprintMaps{}
	for _, c := range cuts {
		// Bitmaps are mapped, not allocated: untouched pages stay the
		// shared zero page, so a large buffer read in a few places is cheap.
		words := (int(c.hi-c.lo) + 63) / 64
		rd, err := allocShared(8 * words)
		if err != nil {
			m.free()
			return nil, err
		}
		wr, err := allocShared(8 * words)
		if err != nil {
			freeShared(rd)
			m.free()
			return nil, err
		}
		m.maps = append(m.maps, rd, wr)
		m.ranges = append(m.ranges, cFPRange{lo: c.lo, hi: c.hi,
			rd: uintptr(unsafe.Pointer(&rd[0])), wr: uintptr(unsafe.Pointer(&wr[0]))})
		m.bindings = append(m.bindings, c.idx)
	}
	return m, nil
}

// count is the bits set, bytes read then bytes written, in all and by
// range, with each range's counted bytes; the ranges in the order of their
// first binding.
func (m *footprintMaps) count() footprint {
	var fp footprint
	for r := range m.ranges {
		rc := rangeCost{bindings: m.bindings[r], read: m.ranges[r].counted[0], written: m.ranges[r].counted[1],
			distinctRead: ones(m.maps[2*r]), distinctWritten: ones(m.maps[2*r+1])}
		fp.read += rc.distinctRead
		fp.written += rc.distinctWritten
		fp.ranges = append(fp.ranges, rc)
	}
	// In argument order, not address order, so reports read alike.
	slices.SortFunc(fp.ranges, func(a, b rangeCost) int { return cmp.Compare(a.bindings[0], b.bindings[0]) })
	return fp
}

func ones(b []byte) int64 {
	n := 0
	for _, w := range unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8) {
		n += bits.OnesCount64(w)
	}
	return int64(n)
}

func (m *footprintMaps) free() {
	for _, b := range m.maps {
		freeShared(b)
	}
	m.maps, m.ranges, m.bindings = nil, nil, nil
}
