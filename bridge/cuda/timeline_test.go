package cuda

import (
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
)

// The host groups the log's notes into the launches it issued: one note a
// block, in order; a cuBLAS GEMM notes nothing, a launch none of whose
// blocks waited leaves no note, an unlogged launch's notes are passed
// over, the window ends with the notes, and a log that does not describe
// the issued launches is an error.
func TestMatchTimeline(t *testing.T) {
	at := bridge.OpTiming{Layer: 0, Component: "attention", Op: "qkv"}
	issue := func(kernel string, blocks, threads uint64) tlIssued {
		return tlIssued{kernel: kernel, blocks: blocks, threads: threads, at: at}
	}
	// notes of a launch of blocks×threads, released at t, t+1, ..., each
	// having waited 3 ns
	notes := func(blocks, threads, t uint64) []tlNote {
		var out []tlNote
		for i := range blocks {
			out = append(out, tlNote{released: t + i, waited: 3, shape: tlShape(blocks, threads)})
		}
		return out
	}
	cat := func(ns ...[]tlNote) []tlNote {
		var out []tlNote
		for _, n := range ns {
			out = append(out, n...)
		}
		return out
	}
	a, b, c, gemm := issue("a", 4, 256), issue("b", 2, 128), issue("c", 1, 256), tlIssued{}
	cases := []struct {
		name    string
		issued  []tlIssued
		notes   []tlNote
		full    bool
		seqs    []int
		wantErr string
	}{
		{"one note a block", []tlIssued{a, b, a}, cat(notes(4, 256, 1000), notes(2, 128, 2000), notes(4, 256, 3000)), false, []int{0, 1, 2}, ""},
		{"the same shape twice running", []tlIssued{a, a, b}, cat(notes(4, 256, 1000), notes(4, 256, 2000), notes(2, 128, 3000)), false, []int{0, 1, 2}, ""},
		{"a GEMM's gap", []tlIssued{a, gemm, b}, cat(notes(4, 256, 1000), notes(2, 128, 3000)), false, []int{0, 2}, ""},
		{"a launch that never waited", []tlIssued{a, c, b}, cat(notes(4, 256, 1000), notes(2, 128, 3000)), false, []int{0, 2}, ""},
		{"an unlogged launch between", []tlIssued{a, b}, cat(notes(4, 256, 1000), notes(2, 64, 1500), notes(2, 128, 2000)), false, []int{0, 1}, ""},
		{"past the window", []tlIssued{a, b, a, b}, cat(notes(4, 256, 1000), notes(2, 128, 2000)), false, []int{0, 1}, ""},
		{"the host's log full", []tlIssued{a, b}, cat(notes(4, 256, 1000), notes(2, 128, 2000), notes(4, 256, 3000), notes(4, 256, 4000), notes(4, 256, 5000)), true, []int{0, 1}, ""},
		{"notes past the last launch", []tlIssued{a, b}, cat(notes(4, 256, 1000), notes(2, 128, 2000), notes(4, 256, 3000), notes(4, 256, 4000), notes(4, 256, 5000)), false, nil, "do not describe the same launches"},
		{"other launches", []tlIssued{a, a, a, a, a, a}, cat(notes(5, 256, 1000), notes(5, 256, 2000), notes(5, 256, 3000)), false, nil, "do not describe the same launches"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := matchTimeline(c.issued, c.notes, c.full)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var seqs []int
			for _, l := range got {
				seqs = append(seqs, l.Seq)
				if l.Kernel != c.issued[l.Seq].kernel || l.Op != "qkv" || l.Blocks != int(c.issued[l.Seq].blocks) {
					t.Errorf("launch %d is %s (%s, %d blocks), issued as %s", l.Seq, l.Kernel, l.Op, l.Blocks, c.issued[l.Seq].kernel)
				}
			}
			if len(seqs) != len(c.seqs) {
				t.Fatalf("launches %v, want %v", seqs, c.seqs)
			}
			for i := range seqs {
				if seqs[i] != c.seqs[i] {
					t.Fatalf("launches %v, want %v", seqs, c.seqs)
				}
			}
			// times from the first launch's first release: its four
			// blocks go at 0-3 ns, each having waited 3
			if f := got[0]; f.Released != 0 || f.LastReleased != 3 || f.Reached != -3 {
				t.Errorf("first launch's times %+v", f)
			}
			if l := got[len(got)-1]; l.Released < 1000*time.Nanosecond {
				t.Errorf("last launch released at %v", l.Released)
			}
		})
	}
	if got := decodeNotes([]uint64{12345, 7<<32 | uint64(tlShape(264, 256))}); len(got) != 1 || got[0] != (tlNote{12345, 7, tlShape(264, 256)}) {
		t.Errorf("decodeNotes: %+v", got)
	}
}
