package emu

import (
	"cmp"
	"math/bits"
	"slices"
	"unsafe"
)

// footprint is the distinct device bytes a dispatch read and wrote: its
// traffic if a cache held every byte it touched more than once
// (docs/msl-subset.md, "The cost witness").
type footprint struct{ read, written int64 }

// footprintMaps are a dispatch's bitmaps: the memory its bindings reach,
// merged into disjoint ranges (a buffer bound at two offsets is one range),
// a bit a byte read and a bit a byte written.
type footprintMaps struct {
	ranges []cFPRange
	maps   [][]byte
}

func newFootprintMaps(bufs []cBinding) (*footprintMaps, error) {
	type span struct{ lo, hi uintptr }
	var ss []span
	for _, b := range bufs {
		if b.ptr != 0 && b.len > 0 {
			ss = append(ss, span{b.ptr, b.ptr + uintptr(b.len)})
		}
	}
	slices.SortFunc(ss, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	m := &footprintMaps{}
	var merged []span
	for _, s := range ss {
		if n := len(merged); n > 0 && s.lo <= merged[n-1].hi {
			merged[n-1].hi = max(merged[n-1].hi, s.hi)
			continue
		}
		merged = append(merged, s)
	}
	for _, s := range merged {
		// Bitmaps are mapped, not allocated: untouched pages stay the
		// shared zero page, so a large buffer read in a few places is cheap.
		words := (int(s.hi-s.lo) + 63) / 64
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
		m.ranges = append(m.ranges, cFPRange{lo: s.lo, hi: s.hi,
			rd: uintptr(unsafe.Pointer(&rd[0])), wr: uintptr(unsafe.Pointer(&wr[0]))})
	}
	return m, nil
}

// count is the bits set: bytes read, then bytes written.
func (m *footprintMaps) count() footprint {
	var fp footprint
	for i, b := range m.maps {
		n := 0
		for _, w := range unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8) {
			n += bits.OnesCount64(w)
		}
		if i%2 == 0 {
			fp.read += int64(n)
		} else {
			fp.written += int64(n)
		}
	}
	return fp
}

func (m *footprintMaps) free() {
	for _, b := range m.maps {
		freeShared(b)
	}
	m.maps, m.ranges = nil, nil
}
