package cuda

// SetGraphedBeginMax sets the longest list whose step_begin is a node of its
// graph, and returns what restores it.
func SetGraphedBeginMax(n int) func() {
	old := graphedBeginMax
	graphedBeginMax = n
	return func() { graphedBeginMax = old }
}

var DecodeSplit = decodeSplit

// SetDecodeMergeGroup sets the partitions paged_decode merges in one block,
// and returns what restores it.
func SetDecodeMergeGroup(n int) func() {
	old := decodeMergeGroup
	decodeMergeGroup = n
	return func() { decodeMergeGroup = old }
}
