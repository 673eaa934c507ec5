package ops

import "testing"

func TestContextBucket(t *testing.T) {
	for _, c := range []struct{ n, min, want int }{{1, 32, 32}, {32, 32, 32}, {33, 32, 64}, {4096, 32, 4096}, {4097, 32, 8192}, {0, 0, 1}} {
		if got := ContextBucket(c.n, c.min); got != c.want {
			t.Errorf("ContextBucket(%d, %d) = %d, want %d", c.n, c.min, got, c.want)
		}
	}
}

// The split follows the context: as many partitions as fill the cores
// where the context allows, within the chunks a partition may hold and the
// partitions a launch merges, every position covered. With Whole, a
// context that fits is one partition at any batch; a longer one splits as
// without it.
func TestSplitRule(t *testing.T) {
	for _, c := range []struct{ whole, ctx, groups, chunks, parts int }{
		{0, 32, 1, 1, 1},
		{0, 128, 4, 1, 4},
		{0, 4096, 4, 1, 128},
		{0, 4096, 64, 4, 32},
		{0, 16384, 4, 4, 128},
		{0, 65536, 4, 8, 256},
		{0, 1 << 20, 4, 128, 256},
		{256, 0, 4, 1, 1},
		{256, 33, 4, 2, 1},
		{256, 256, 4, 8, 1},
		{256, 256, 64, 8, 1},
		{256, 257, 4, 1, 9},
		{256, 4096, 64, 4, 32},
	} {
		r := SplitRule{Chunk: 32, MinChunks: 1, MaxChunks: 4, MaxParts: 256, BlocksPerCore: 4, Whole: c.whole}
		chunks, parts := r.Split(c.ctx, c.groups, 132)
		if chunks != c.chunks || parts != c.parts || chunks*32*parts < c.ctx || parts > 256 {
			t.Errorf("Whole %d: Split(%d, %d groups) = %d chunks × %d, want %d × %d", c.whole, c.ctx, c.groups, chunks, parts, c.chunks, c.parts)
		}
	}
}

// TestMetalAttnLaunch: Metal decode attention's simdgroups follow the
// partition's keys (at least MetalAttnKeysPerSimdgroup each, at most the
// tuning's), and its partial results meet in as many slots as 32 KiB holds
// beside the query heads and the words one simdgroup shares, or the
// running result. The split-K reduce serves as many heads a threadgroup as
// fill a load of their (m, l) pairs, within the threads and heads there are.
func TestMetalAttnLaunch(t *testing.T) {
	for _, c := range []struct{ parts, head, heads, threads, want int }{
		{2, 64, 32, 1024, 16},  // 32 pairs: 16 heads of 2 simdgroups
		{2, 128, 32, 1024, 8},  // 1,024 threads: 8 heads of 4 simdgroups
		{9, 64, 32, 1024, 3},   // 27 pairs
		{64, 64, 32, 1024, 1},  // two loads of one head's pairs
		{1, 32, 32, 1024, 32},  // a pair a head
		{2, 48, 4, 1024, 4},    // every head there is
		{2, 64, 32, 256, 4},    // a pipeline of 256 threads
		{300, 256, 32, 128, 1}, // fewer threads than a head: one head still
	} {
		if got := MetalAttnReduceHeads(c.parts, c.head, c.heads, c.threads); got != c.want {
			t.Errorf("MetalAttnReduceHeads(%d, %d, %d, %d) = %d, want %d", c.parts, c.head, c.heads, c.threads, got, c.want)
		}
	}
	for _, c := range []struct{ hr, parts, bytes int }{
		{16, 2, 2 * 16 * 2 * 8}, {1, 64, 2 * 64 * 8}, {1, 1000, 2 * MetalAttnReduceChunk * 8},
	} {
		if got := MetalAttnReduceMemory(c.hr, c.parts); got != c.bytes {
			t.Errorf("MetalAttnReduceMemory(%d, %d) = %d, want %d", c.hr, c.parts, got, c.bytes)
		}
	}
	for _, c := range []struct{ most, keys, want int }{
		{32, 1, 1}, {32, 4, 1}, {32, 5, 2}, {32, 9, 4}, {32, 128, 32}, {32, 129, 32}, {32, 512, 32},
		{4, 512, 4}, {8, 20, 8}, {1, 1000, 1}, {3, 1000, 3}, {3, 5, 2}, {6, 20, 6},
	} {
		if got := MetalAttnSimdgroups(c.most, c.keys); got != c.want {
			t.Errorf("MetalAttnSimdgroups(%d, %d) = %d, want %d", c.most, c.keys, got, c.want)
		}
	}
	// Past the slots, 16 bytes aligned: the query heads and the shared
	// words, or, with rounds, the running result where it is larger.
	past := func(slots, heads, head int) int {
		return (4*slots*heads*(head+2)+15)&^15 + 4*(heads*head+MetalAttnShared)
	}
	for _, c := range []struct{ nsg, heads, head, bytes, slots int }{
		{4, 8, 128, past(4, 8, 128), 4},                // all at once
		{7, 8, 128, past(6, 8, 128), 6},                // 7 slots would fit alone, not with the query heads
		{32, 8, 128, past(6, 8, 128), 6},               // six slots and the query heads, later the running result
		{32, 8, 64, past(14, 8, 64), 14},               // heads of 64
		{32, 8, 256, past(2, 8, 256), 2},               // heads of 256: two slots
		{32, 1, 64, past(32, 1, 64), 32},               // one head: all at once
		{2, 32, 256, 4*32*258 + 4*32*260, 0},           // not even one slot fits
		{1, 1, 64, 272 + 4*(64+MetalAttnShared), 1},    // one slot of 264 bytes, aligned to 272
		{2, 1, 32, 2*4*34 + 4*(32+MetalAttnShared), 2}, // two slots of 136 bytes: aligned already
	} {
		bytes, slots := MetalAttnMemory(c.nsg, c.heads, c.head, 32<<10)
		if bytes != c.bytes || slots != c.slots {
			t.Errorf("MetalAttnMemory(%d, %d, %d) = %d bytes, %d slots; want %d, %d", c.nsg, c.heads, c.head, bytes, slots, c.bytes, c.slots)
		}
		if slots > 0 && bytes > 32<<10 {
			t.Errorf("MetalAttnMemory(%d, %d, %d) = %d bytes, past 32 KiB", c.nsg, c.heads, c.head, bytes)
		}
	}
}
