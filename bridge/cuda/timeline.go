package cuda

import (
	"fmt"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
)

// tlNote is one block's entry in the timeline's log (common.cu's tl_note):
// when the wait let it go (ns on the GPU's global clock), how long it had
// waited there, and its launch's shape (tlShape).
type tlNote struct {
	released, waited uint64
	shape            uint32
}

// decodeNotes unpacks the log's two words an entry.
func decodeNotes(words []uint64) []tlNote {
	out := make([]tlNote, len(words)/2)
	for i := range out {
		w := words[2*i+1]
		out[i] = tlNote{released: words[2*i], waited: w >> 32, shape: uint32(w)}
	}
	return out
}

// tlShape packs a launch's blocks and warps a block as tl_note does.
func tlShape(blocks, threads uint64) uint32 {
	return uint32(blocks&0xffffff)<<8 | uint32((threads+31)>>5)
}

// tlIssued is one launch as the host issued it (blocks 0: a cuBLAS GEMM).
type tlIssued struct {
	kernel          string
	blocks, threads uint64
	at              bridge.OpTiming
}

// matchTimeline groups the log's notes, in the order taken, into the
// launches the host issued: a launch's notes are the next ones of its
// shape, at most one a block. A cuBLAS GEMM notes nothing. A launch none of
// whose blocks reached a wait leaves none, seen when the next note is the
// next launch's shape; notes of a shape the launch does not have before its
// own are a launch the host did not log. The launches after the last note
// are past the window, and so are the notes after the last launch when the
// host's log is full. More than a few of either kind means the two lists
// do not describe the same launches, and that is an error.
func matchTimeline(issued []tlIssued, notes []tlNote, full bool) ([]bridge.TimelineLaunch, error) {
	var out []bridge.TimelineLaunch
	var t0 uint64
	extra, missing := 0, 0
	next := func(seq int) (uint32, bool) { // the shape of the next launch that notes
		for _, l := range issued[seq+1:] {
			if l.blocks > 0 {
				return tlShape(l.blocks, l.threads), true
			}
		}
		return 0, false
	}
	j := 0
	for seq, l := range issued {
		if l.blocks == 0 {
			continue
		}
		if j == len(notes) {
			break
		}
		shape := tlShape(l.blocks, l.threads)
		if notes[j].shape != shape {
			if s, ok := next(seq); ok && s == notes[j].shape {
				missing++
				continue
			}
			k := j
			for k < len(notes) && k-j < tlLookahead && notes[k].shape != shape {
				k++
			}
			if k == len(notes) || notes[k].shape != shape {
				missing++
				continue
			}
			extra += k - j
			j = k
		}
		first, last, reached := notes[j].released, notes[j].released, notes[j].released-notes[j].waited
		for n := uint64(0); j < len(notes) && notes[j].shape == shape && n < l.blocks; j, n = j+1, n+1 {
			first, last = min(first, notes[j].released), max(last, notes[j].released)
			reached = min(reached, notes[j].released-notes[j].waited)
		}
		if len(out) == 0 {
			t0 = first
		}
		out = append(out, bridge.TimelineLaunch{Seq: seq, Kernel: l.kernel, Layer: l.at.Layer, Component: l.at.Component, Op: l.at.Op,
			Blocks: int(l.blocks), Reached: since(reached, t0), Released: since(first, t0), LastReleased: since(last, t0)})
	}
	if !full {
		extra += len(notes) - j
	}
	if missing > 2+len(issued)/100 || extra > 2+len(notes)/100 {
		return nil, fmt.Errorf("cuda: timeline: %d launches issued and %d blocks noted, %d launches with no note and %d notes of no issued launch: they do not describe the same launches",
			len(issued), len(notes), missing, extra)
	}
	return out, nil
}

// tlLookahead is how many notes of other shapes a launch's first note may
// follow (an unlogged launch's blocks).
const tlLookahead = 4096

// since is t - t0 as a duration (negative when t is earlier: a block may
// reach its wait before the first launch is let go).
func since(t, t0 uint64) time.Duration { return time.Duration(int64(t - t0)) }
