package cuda

import (
	"slices"
	"testing"
)

// An engine made again asks for the sizes the last one freed, in the same
// order: each request gets the block the driver gave that request the first
// time, whatever order the blocks were freed in.
func TestBlockPoolGivesBackTheFirstAddresses(t *testing.T) {
	var p blockPool
	type block struct {
		ptr   uint64
		size  int64
		order uint64
	}
	// The driver's addresses need not rise with the order it gives them.
	first := []block{{0x9000, 256, 0}, {0x1000, 512, 0}, {0x5000, 256, 0}, {0x3000, 256, 0}, {0x7000, 512, 0}}
	for i := range first {
		first[i].order = p.stamp()
	}
	for _, i := range []int{3, 0, 4, 2, 1} { // freed out of order
		b := first[i]
		p.put(b.ptr, b.size, b.order)
	}
	if p.bytes != 256*3+512*2 {
		t.Fatalf("pool holds %d bytes, want %d", p.bytes, 256*3+512*2)
	}
	for _, want := range first {
		ptr, order, ok := p.take(want.size)
		if !ok || ptr != want.ptr || order != want.order {
			t.Fatalf("take(%d) = %#x (order %d, %v), want %#x (order %d)", want.size, ptr, order, ok, want.ptr, want.order)
		}
	}
	if p.bytes != 0 || len(p.free) != 0 {
		t.Fatalf("pool not empty after every block was taken: %d bytes, %v", p.bytes, p.free)
	}
	if _, _, ok := p.take(256); ok {
		t.Fatal("take from an empty pool succeeded")
	}
}

// A size nobody freed is not served from a block of another size, and drain
// hands every block back once.
func TestBlockPoolDrain(t *testing.T) {
	var p blockPool
	p.put(0x2000, 1024, p.stamp())
	p.put(0x1000, 4096, p.stamp())
	p.put(0x3000, 1024, p.stamp())
	if _, _, ok := p.take(2048); ok {
		t.Fatal("take(2048) served from blocks of other sizes")
	}
	got := p.drain()
	if want := []uint64{0x1000, 0x2000, 0x3000}; !slices.Equal(got, want) {
		t.Fatalf("drain = %#x, want %#x", got, want)
	}
	if p.bytes != 0 || len(p.drain()) != 0 {
		t.Fatalf("pool not empty after drain: %d bytes", p.bytes)
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
		var s shelf[int]
		made, total := 0, int64(0)
		for i, n := range c.sizes {
			got, ok := s.take(n)
			if !ok {
				got = made
				made++
				size := s.next(n * 5 / 4)
				s.put(size, got)
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
