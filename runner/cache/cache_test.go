package cache

import (
	"errors"
	"testing"
)

func TestSlotsFollowBlockTable(t *testing.T) {
	m, err := New(8, 4)
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.Grow(1, 6, nil) // two blocks
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Grow(2, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := m.Grow(1, 3, nil) // fills block 2 of seq 1, opens a third
	if err != nil {
		t.Fatal(err)
	}
	check := func(seq int, start int, slots []int32) {
		t.Helper()
		tab := m.BlockTable(seq)
		for i, s := range slots {
			p := start + i
			if want := tab[p/4]*4 + int32(p%4); s != want {
				t.Errorf("seq %d pos %d: slot %d, want %d", seq, p, s, want)
			}
		}
	}
	check(1, 0, a)
	check(2, 0, b)
	check(1, 6, a2)
	if got := m.Tokens(1); got != 9 {
		t.Errorf("tokens(1) = %d, want 9", got)
	}
	if got := m.FreeBlocks(); got != 8-3-1 {
		t.Errorf("free = %d, want 4", got)
	}
	// No slot is shared between sequences.
	seen := map[int32]int{}
	for _, s := range append(a, a2...) {
		seen[s] = 1
	}
	for _, s := range b {
		if seen[s] == 1 {
			t.Fatalf("slot %d used by both sequences", s)
		}
	}
}

func TestOutOfBlocksTouchesNothing(t *testing.T) {
	m, _ := New(3, 4)
	if _, err := m.Grow(1, 8, nil); err != nil {
		t.Fatal(err)
	}
	before := append([]int32(nil), m.BlockTable(1)...)
	_, err := m.Grow(2, 9, nil) // needs 3 blocks, 1 free
	if !errors.Is(err, ErrNoBlocks) {
		t.Fatalf("err = %v, want ErrNoBlocks", err)
	}
	if m.FreeBlocks() != 1 || m.Tokens(2) != 0 || len(m.BlockTable(2)) != 0 {
		t.Fatalf("failed grow changed state: free=%d tokens=%d", m.FreeBlocks(), m.Tokens(2))
	}
	for i, b := range m.BlockTable(1) {
		if b != before[i] {
			t.Fatal("failed grow changed another sequence's table")
		}
	}
	m.Free(1)
	if m.FreeBlocks() != 3 {
		t.Fatalf("free after release = %d, want 3", m.FreeBlocks())
	}
	if _, err := m.Grow(2, 9, nil); err != nil {
		t.Fatalf("grow after free: %v", err)
	}
}

func TestNewRejectsBadSizes(t *testing.T) {
	for _, c := range [][2]int{{0, 16}, {4, 0}, {-1, 16}} {
		if _, err := New(c[0], c[1]); err == nil {
			t.Errorf("New(%d, %d) succeeded", c[0], c[1])
		}
	}
}
