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
