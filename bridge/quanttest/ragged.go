package quanttest

import "github.com/mtlbench/mtlbench/bridge"

// RaggedMeta is the step of a ragged batch: seqs are each sequence's
// (cached, new) tokens, the new ones at positions cached.. on; sequence i
// holds blocks perm[i*maxBlocks:(i+1)*maxBlocks] of blockSize slots, so
// its cache is scattered as a paged cache's is.
func RaggedMeta(seqs [][2]int, maxBlocks, blockSize int, perm []int) *bridge.StepMeta {
	meta := &bridge.StepMeta{NumSeqs: len(seqs), MaxBlocks: maxBlocks, BlockSize: blockSize, QueryStartLoc: []int32{0}}
	for i, s := range seqs {
		for j := range maxBlocks {
			meta.BlockTable = append(meta.BlockTable, int32(perm[i*maxBlocks+j]))
		}
		tab := meta.BlockTable[i*maxBlocks:]
		for p := s[0]; p < s[0]+s[1]; p++ {
			meta.SlotMapping = append(meta.SlotMapping, tab[p/blockSize]*int32(blockSize)+int32(p%blockSize))
			meta.Positions = append(meta.Positions, int32(p))
		}
		meta.NumTokens += s[1]
		meta.QueryStartLoc = append(meta.QueryStartLoc, int32(meta.NumTokens))
		meta.SeqLens = append(meta.SeqLens, int32(s[0]+s[1]))
		meta.MaxQueryLen = max(meta.MaxQueryLen, s[1])
		meta.MaxSeqLen = max(meta.MaxSeqLen, s[0]+s[1])
	}
	return meta
}
