package ops

// ContextBucket is the context length a decode launch is shaped and tuned
// for: n rounded up to a power of two, at least min. Steps whose longest
// context falls in one bucket share a launch shape (and a CUDA graph), and
// a tuned config is looked up by the bucket (Context is a Log dimension).
func ContextBucket(n, min int) int {
	b := max(min, 1)
	for b < n {
		b *= 2
	}
	return b
}

// SplitRule is how a backend's decode attention splits a context by
// default, so that the partition count follows the context: about
// BlocksPerCore blocks on each of the device's cores (a block per partition
// and group of heads sharing keys), each partition MinChunks to MaxChunks
// chunks of Chunk positions, and at most MaxParts partitions (what one
// launch merges). A context of at most Whole positions (when set) is one
// partition, for a kernel that holds such a context in one block: the
// partitions of a split must then be merged, a dependent round that costs
// a short context more than its parallelism saves. A tuned part (KnobPart)
// for the context bucket replaces the rule; CUDA's paged_decode uses {32,
// 1, 4, 256, 4}, and paged_decode_mma adds Whole, the longest context it
// holds in one block on the device (256 or 128; docs/cuda.md); a
// Metal decode kernel that splits the context can use the same rule with
// its own numbers.
type SplitRule struct {
	Chunk, MinChunks, MaxChunks, MaxParts, BlocksPerCore int
	Whole                                                int
}

// Split returns the chunks per partition and the partitions for a context
// of ctx positions, groups independent (sequence, KV head) pairs and cores
// compute units. Every position is covered: chunks·Chunk·parts >= ctx.
func (r SplitRule) Split(ctx, groups, cores int) (chunks, parts int) {
	chunk := max(r.Chunk, 1)
	if ctx <= r.Whole {
		return max((ctx+chunk-1)/chunk, 1), 1
	}
	want := max(r.BlocksPerCore*cores/max(groups, 1), 1)
	lo := (ctx + max(r.MaxChunks, 1)*chunk - 1) / (max(r.MaxChunks, 1) * chunk)
	hi := (ctx + max(r.MinChunks, 1)*chunk - 1) / (max(r.MinChunks, 1) * chunk)
	n := max(min(max(want, lo), hi, max(r.MaxParts, 1)), 1)
	chunks = (ctx + n*chunk - 1) / (n * chunk)
	return chunks, (ctx + chunks*chunk - 1) / (chunks * chunk)
}
