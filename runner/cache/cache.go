// Package cache manages a paged KV cache: fixed-size blocks handed out from
// a free list, a block table per sequence, and the slot mapping of new
// tokens. It holds no tensors, only the bookkeeping; the backend's K/V
// tensors are indexed by the slots it computes.
package cache

import (
	"errors"
	"fmt"
)

// ErrNoBlocks is returned (wrapped) when the cache cannot hold more tokens.
var ErrNoBlocks = errors.New("KV cache out of blocks")

// Manager tracks which blocks each sequence owns.
type Manager struct {
	blockSize int
	free      []int32 // stack of free block ids
	numBlocks int
	seqs      map[int]*seqState
}

type seqState struct {
	blocks []int32
	tokens int // tokens whose slots are allocated
}

// New returns a manager of numBlocks blocks of blockSize token slots.
func New(numBlocks, blockSize int) (*Manager, error) {
	if numBlocks <= 0 || blockSize <= 0 {
		return nil, fmt.Errorf("KV cache needs a positive block count and size, got %d blocks of %d", numBlocks, blockSize)
	}
	m := &Manager{blockSize: blockSize, numBlocks: numBlocks, seqs: map[int]*seqState{}}
	m.free = make([]int32, numBlocks)
	for i := range m.free {
		// Hand out low block ids first: it makes dumps easier to read.
		m.free[i] = int32(numBlocks - 1 - i)
	}
	return m, nil
}

func (m *Manager) BlockSize() int  { return m.blockSize }
func (m *Manager) NumBlocks() int  { return m.numBlocks }
func (m *Manager) FreeBlocks() int { return len(m.free) }

// BlocksFor is the number of blocks n tokens occupy.
func (m *Manager) BlocksFor(n int) int { return (n + m.blockSize - 1) / m.blockSize }

// Tokens is the number of tokens with slots for seq.
func (m *Manager) Tokens(seq int) int {
	if s := m.seqs[seq]; s != nil {
		return s.tokens
	}
	return 0
}

// CanGrow reports whether seq can take n more tokens.
func (m *Manager) CanGrow(seq, n int) bool {
	return m.BlocksNeeded(seq, n) <= len(m.free)
}

// BlocksNeeded is the number of free blocks seq takes to grow by n tokens.
func (m *Manager) BlocksNeeded(seq, n int) int {
	have, tokens := 0, 0
	if s := m.seqs[seq]; s != nil {
		have, tokens = len(s.blocks), s.tokens
	}
	return max(m.BlocksFor(tokens+n)-have, 0)
}

// Grow allocates slots for n more tokens of seq and returns their slot ids
// (block*blockSize + offset), appended to slots. It allocates all or nothing:
// on ErrNoBlocks no block has been taken, so no other sequence is touched.
func (m *Manager) Grow(seq, n int, slots []int32) ([]int32, error) {
	need := m.BlocksNeeded(seq, n)
	if need > len(m.free) {
		return slots, fmt.Errorf("%w: sequence %d needs %d more blocks of %d tokens, %d of %d are free", ErrNoBlocks, seq, need, m.blockSize, len(m.free), m.numBlocks)
	}
	s := m.seqs[seq]
	if s == nil {
		s = &seqState{}
		m.seqs[seq] = s
	}
	for range need {
		b := m.free[len(m.free)-1]
		m.free = m.free[:len(m.free)-1]
		s.blocks = append(s.blocks, b)
	}
	for i := 0; i < n; i++ {
		p := s.tokens + i
		slots = append(slots, s.blocks[p/m.blockSize]*int32(m.blockSize)+int32(p%m.blockSize))
	}
	s.tokens += n
	return slots, nil
}

// BlockTable returns seq's block ids in order.
func (m *Manager) BlockTable(seq int) []int32 {
	if s := m.seqs[seq]; s != nil {
		return s.blocks
	}
	return nil
}

// Free returns seq's blocks to the free list.
func (m *Manager) Free(seq int) {
	s := m.seqs[seq]
	if s == nil {
		return
	}
	for i := len(s.blocks) - 1; i >= 0; i-- {
		m.free = append(m.free, s.blocks[i])
	}
	delete(m.seqs, seq)
}
