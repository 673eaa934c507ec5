package kbench

import (
	"context"
	"fmt"
	"math"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// A case's memory is worked out before anything is allocated: the same
// prepare code runs once as a plan (b.plan), where every tensor, piece of
// step metadata, rotated copy and check buffer is counted and nothing is
// allocated or filled, so what is checked is what will be used. `run`'s
// kernel cases and `tune`'s candidates both go through it (Prepare, Need).

// Memory is what a kernel case needs, as its plan counted it.
type Memory struct {
	Case    string // the case, as Describe names it
	Backend string
	// Tensors is its tensors and step metadata, with one copy of the
	// inputs it rotates through.
	Tensors int64
	// Scratch is what its reference check (or MoE routing) allocates on
	// the host on top of the tensors, short-lived buffers included: next to
	// a large heap they are collected late, so they add up as if live.
	Scratch int64
	// Copy is one more copy of the inputs a call rotates through; Copies
	// how many copies rotation asks for, the first included (1: none), and
	// Fit how many of them memory allows.
	Copy        int64
	Copies, Fit int
	Available   int64 // what the backend said it can give (0: unknown)
}

// Total is what the case holds at its peak: tensors, the copies that fit
// and the check's scratch.
func (m Memory) Total() int64 {
	return addSat(addSat(m.Tensors, m.Scratch), mulSat(int64(m.Fit-1), m.Copy))
}

// Err is a *MemoryError when the case cannot fit, even with no copies.
func (m Memory) Err() error {
	if m.Available > 0 && addSat(m.Tensors, m.Scratch) > m.Available {
		return &MemoryError{m}
	}
	return nil
}

// String is a line for progress output.
func (m Memory) String() string {
	s := fmt.Sprintf("%s of tensors, %s for the reference check", size(m.Tensors), size(m.Scratch))
	if m.Copies > 1 {
		s += fmt.Sprintf(", inputs rotated through %d copies of %s", m.Fit, size(m.Copy))
		if m.Fit < m.Copies {
			s += fmt.Sprintf(" (%d wanted: fewer copies time a warmer cache, more would pass half the memory available)", m.Copies)
		}
	}
	if m.Available > 0 {
		s += fmt.Sprintf("; %s available", size(m.Available))
	}
	return s
}

// MemoryError is a case too large for the memory its backend has.
type MemoryError struct{ Memory }

func (e *MemoryError) Error() string {
	return fmt.Sprintf("%s needs ~%s (%s of tensors, %s for the reference check), the %s backend has %s available",
		e.Case, size(addSat(e.Tensors, e.Scratch)), size(e.Tensors), size(e.Scratch), e.Backend, size(e.Available))
}

// Need works out what the kernel case a needs on be without allocating
// it, validating its parameters as Prepare does (the same errors).
func Need(be bridge.Backend, a ops.Args) (Memory, error) {
	b, err := newBench(context.Background(), be, a.Op)
	if err != nil {
		return Memory{}, err
	}
	b.plan = true
	if err := b.prepare(a); err != nil {
		return Memory{}, err
	}
	info := be.Info()
	m := Memory{Case: b.desc, Backend: info.Backend, Tensors: b.used, Scratch: b.scratch,
		Copy: b.perCopy, Copies: max(b.want, 1), Available: info.AvailableBytes}
	m.Fit = fitCopies(m)
	return m, nil
}

// fitCopies is how many of the copies m wants fit: copies only buy a colder
// cache, so they may take the case to half of what is available and no
// further, leaving the rest to the machine; at least the one copy.
func fitCopies(m Memory) int {
	if m.Copies <= 1 || m.Available <= 0 || m.Copy <= 0 {
		return m.Copies
	}
	room := m.Available/2 - addSat(m.Tensors, m.Scratch)
	if room < m.Copy {
		return 1
	}
	return int(min(int64(m.Copies-1), room/m.Copy)) + 1
}

// Memory is what the case was planned to need, as PrepareContext checked
// it: the copies it cycles through included.
func (b *Bench) Memory() Memory { return b.mem }

// reserve counts n bytes of tensors or step metadata the case holds.
func (b *Bench) reserve(n int64) { b.used = addSat(b.used, n) }

// needScratch records what a phase (the reference check, routing)
// allocates on top of the case's tensors: the largest counts.
func (b *Bench) needScratch(n int64) { b.scratch = max(b.scratch, n) }

// f32 is the bytes of an f32 buffer of the product of dims elements: what
// reading a tensor back or widening one costs.
func f32(dims ...int) int64 { return mulSat(elems(dims), 4) }

// elems is the product of a shape's sizes, saturating rather than wrapping
// (a plan of absurd sizes must come out too large, not small).
func elems(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n = mulSat(n, int64(d))
	}
	return n
}

func mulSat(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// size is n bytes for people: "8.0 GiB", "32 MiB", "12 KiB".
func size(n int64) string {
	switch {
	case n == math.MaxInt64:
		return "more than 8 EiB"
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%.0f KiB", math.Ceil(float64(n)/(1<<10)))
	}
}
