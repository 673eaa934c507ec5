//go:build linux

package cuda

import (
	"hash/maphash"
	"math"
	"slices"
	"unsafe"
)

type graph struct {
	key  []uint64
	exec uintptr
	used uint64
}

const maxGraphs = 64

// graphedBeginMax is the longest list whose step_begin is a node of its
// graph; a longer one's runs as a kernel of its own before the graph. On an
// H100, step_begin in the graph took 41 µs off TinyLlama's 116-kernel step
// but added about 70 µs to Qwen3-30B-A3B's (48 layers, about 390 kernels):
// the longer a graph, the longer its first node waits for the launch, which
// work queued ahead of the graph overlaps. On an H200 with a graph a step
// slot, Qwen3-30B-A3B at 4 bits (293 kernels) gained nothing from it
// either (docs/cuda.md, "Gate/up rows in one round").
var graphedBeginMax = 256

var graphSeed = maphash.MakeSeed()

// listKey encodes the entries (kernels, grids, arguments) as one slice.
func (b *Backend) listKey(ents []entry, args []uint64) []uint64 {
	k := b.keyBuf[:0]
	for _, e := range ents {
		if e.kind == entMark {
			k = append(k, uint64(e.kind)|uint64(e.a0)<<8)
			continue
		}
		k = append(k, uint64(e.kind)|uint64(e.block)<<8|uint64(e.a1-e.a0)<<40, uint64(e.fn),
			uint64(e.grid[0])|uint64(e.grid[1])<<32, uint64(e.grid[2]))
		k = append(k, args[e.a0:e.a1]...)
	}
	b.keyBuf = k
	return k
}

func hashKey(k []uint64) uint64 {
	if len(k) == 0 {
		return 0
	}
	return maphash.Bytes(graphSeed, unsafe.Slice((*byte)(unsafe.Pointer(&k[0])), len(k)*8))
}

// runGraph replays the graph of this exact list, captures one when the list
// is seen for the second time, and otherwise launches directly.
func (b *Backend) runGraph(ents []entry, args []uint64) error {
	a := b.api
	b.tlRecord(ents)
	if b.opts.NoGraphs {
		return b.runDirect(ents, args, nil)
	}
	if len(ents) > graphedBeginMax && ents[0].fn == b.fns["step_begin"] {
		if err := b.runDirect(ents[:1], args, nil); err != nil {
			return err
		}
		ents = ents[1:]
	}
	k := b.listKey(ents, args)
	h := hashKey(k)
	b.useCount++
	if g := b.graphs[h]; g != nil && slices.Equal(g.key, k) {
		g.used = b.useCount
		return b.check("cuGraphLaunch", call(a.cuGraphLaunch, g.exec, b.stream))
	}
	b.misses++
	b.seen[h]++
	if b.seen[h] < 2 {
		if len(b.seen) > 4096 {
			clear(b.seen)
		}
		return b.runDirect(ents, args, nil)
	}
	if err := b.check("cuStreamBeginCapture", call(a.cuStreamBeginCapture, b.stream, 2 /* relaxed */)); err != nil {
		return b.runDirect(ents, args, nil)
	}
	runErr := b.runDirect(ents, args, nil)
	var gr uintptr
	endErr := b.check("cuStreamEndCapture", call(a.cuStreamEndCapture, b.stream, uintptr(unsafe.Pointer(&gr))))
	if runErr != nil || endErr != nil {
		if gr != 0 {
			call(a.cuGraphDestroy, gr)
		}
		b.seen[h] = math.MinInt32 // do not try this list again
		return b.runDirect(ents, args, nil)
	}
	g := &graph{key: append([]uint64(nil), k...), used: b.useCount}
	err := b.check("cuGraphInstantiate", call(a.cuGraphInstantiate, uintptr(unsafe.Pointer(&g.exec)), gr, 0))
	call(a.cuGraphDestroy, gr)
	if err != nil {
		b.dropGraph(g)
		b.seen[h] = math.MinInt32
		return b.runDirect(ents, args, nil)
	}
	if len(b.graphs) >= maxGraphs {
		var oldest uint64
		var og *graph
		for kh, g := range b.graphs {
			if og == nil || g.used < og.used {
				oldest, og = kh, g
			}
		}
		b.dropGraph(og)
		delete(b.graphs, oldest)
	}
	if old := b.graphs[h]; old != nil { // a hash collision: keep the newest
		b.dropGraph(old)
	}
	b.graphs[h] = g
	return b.check("cuGraphLaunch", call(a.cuGraphLaunch, g.exec, b.stream))
}

func (b *Backend) dropGraph(g *graph) {
	if g.exec != 0 {
		call(b.api.cuGraphExecDestroy, g.exec)
	}
}

// runDirect issues the entries on the stream (thread only). events, in
// profile mode, are recorded at each mark (events[i+1] for mark i).
func (b *Backend) runDirect(ents []entry, args []uint64, events []uintptr) error {
	a := b.api
	for _, e := range ents {
		switch e.kind {
		case entMark:
			if events != nil {
				if err := b.check("cuEventRecord", call(a.cuEventRecord, events[e.a0+1], b.stream)); err != nil {
					return err
				}
			}
		case entLaunch:
			n := int(e.a1 - e.a0)
			for i := 0; i < n; i++ {
				b.params[i] = uintptr(unsafe.Pointer(&args[int(e.a0)+i]))
			}
			var r int32
			if b.pdl {
				c := &b.lcfg
				c.gridX, c.gridY, c.gridZ, c.blockX, c.blockY, c.blockZ = e.grid[0], e.grid[1], e.grid[2], e.block, 1, 1
				c.smem = e.smem
				r = call(a.cuLaunchKernelEx, uintptr(unsafe.Pointer(c)), e.fn, uintptr(unsafe.Pointer(&b.params[0])), 0)
				if r != 0 && r != cudaErrorLaunchFailure && r != cudaErrorIllegalAddress {
					b.pdl = false // the attribute was refused: plain launches from now on
				}
			}
			if !b.pdl {
				r = call(a.cuLaunchKernel, e.fn, uintptr(e.grid[0]), uintptr(e.grid[1]), uintptr(e.grid[2]),
					uintptr(e.block), 1, 1, uintptr(e.smem), b.stream, uintptr(unsafe.Pointer(&b.params[0])), 0)
			}
			if r != 0 {
				return b.check("cuLaunchKernel "+b.fnName(e.fn), r)
			}
		case entGemm:
			if err := b.runGemm(args[e.a0:e.a1]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *Backend) fnName(fn uintptr) string {
	for n, f := range b.fns {
		if f == fn {
			return n
		}
	}
	return "?"
}

// GraphCount is the number of CUDA graphs held (for tests).
func (b *Backend) GraphCount() int { return len(b.graphs) }

// GraphMisses is the number of lists run without a graph held for them,
// launched directly or captured (for tests).
func (b *Backend) GraphMisses() int { return b.misses }

// LastStepLaunches is the number of kernels the last step launched (for
// tests of the fusions).
func (b *Backend) LastStepLaunches() int { return b.lastLaunches }

// LastStepSegments is the number of pieces the last step ran in: one, plus
// one for each hand-off while it was recorded (for tests).
func (b *Backend) LastStepSegments() int { return b.lastSegments }
