package pool

import (
	"slices"
	"testing"
)

// An engine made again asks for the sizes the last one freed, in the same
// order: each request gets the block the driver gave that request the first
// time, whatever order the blocks were freed in.
func TestBlocksGivesBackTheFirstAddresses(t *testing.T) {
	var p Blocks[uint64]
	type block struct {
		ptr   uint64
		size  int64
		order uint64
	}
	// The driver's addresses need not rise with the order it gives them.
	first := []block{{0x9000, 256, 0}, {0x1000, 512, 0}, {0x5000, 256, 0}, {0x3000, 256, 0}, {0x7000, 512, 0}}
	for i := range first {
		first[i].order = p.Stamp()
	}
	for _, i := range []int{3, 0, 4, 2, 1} { // freed out of order
		b := first[i]
		p.Put(b.ptr, b.size, b.order)
	}
	if p.Bytes() != 256*3+512*2 {
		t.Fatalf("pool holds %d bytes, want %d", p.Bytes(), 256*3+512*2)
	}
	for _, want := range first {
		ptr, order, ok := p.Take(want.size)
		if !ok || ptr != want.ptr || order != want.order {
			t.Fatalf("take(%d) = %#x (order %d, %v), want %#x (order %d)", want.size, ptr, order, ok, want.ptr, want.order)
		}
	}
	if p.Bytes() != 0 || len(p.free) != 0 {
		t.Fatalf("pool not empty after every block was taken: %d bytes, %v", p.Bytes(), p.free)
	}
	if _, _, ok := p.Take(256); ok {
		t.Fatal("take from an empty pool succeeded")
	}
}

// A size nobody freed is not served from a block of another size, and Drain
// hands every block back once, in the order the device gave them.
func TestBlocksDrain(t *testing.T) {
	var p Blocks[uint64]
	p.Put(0x2000, 1024, p.Stamp())
	p.Put(0x1000, 4096, p.Stamp())
	p.Put(0x3000, 1024, p.Stamp())
	if _, _, ok := p.Take(2048); ok {
		t.Fatal("take(2048) served from blocks of other sizes")
	}
	got := p.Drain()
	if want := []uint64{0x2000, 0x1000, 0x3000}; !slices.Equal(got, want) { // the order given
		t.Fatalf("drain = %#x, want %#x", got, want)
	}
	if p.Bytes() != 0 || len(p.Drain()) != 0 {
		t.Fatalf("pool not empty after drain: %d bytes", p.Bytes())
	}
}

// A step of one shape gets the same buffer whatever larger steps came
// before or between (a suite's prefill case between two decode repetitions).
func TestShelfKeepsWhatEachSizeTook(t *testing.T) {
	for _, c := range []struct {
		name  string
		sizes []int64
		want  []int // which buffer each request gets, in the order made
	}{
		{"small first", []int64{100, 5000, 100, 5000, 125, 300}, []int{0, 1, 0, 1, 0, 1}},
		{"large first", []int64{5000, 100, 70000, 100, 5000}, []int{0, 0, 1, 0, 0}},
		{"growing", []int64{4, 8, 12, 20, 44, 12, 21}, []int{0, 1, 2, 2, 3, 2, 3}},
	} {
		var s Shelf[int]
		made, total := 0, int64(0)
		for i, n := range c.sizes {
			got, ok := s.Take(n)
			if !ok {
				got = made
				made++
				size := s.Next(n * 5 / 4)
				s.Put(size, got)
				total += size
			}
			if got != c.want[i] {
				t.Errorf("%s: request %d (%d bytes) got buffer %d, want %d", c.name, i, n, got, c.want[i])
			}
		}
		if last := s[len(s)-1].size; total >= 2*last {
			t.Errorf("%s: buffers of %d bytes in all, the largest %d", c.name, total, last)
		}
	}
}
