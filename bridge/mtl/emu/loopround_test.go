package emu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// loopFunctions hold loops whose rounds run divergent simd operations. REC
// records a lane's result of one operation, at most 8 a lane.
const loopFunctions = `#include <metal_stdlib>
using namespace metal;
#define REC(x) (o[i * 8 + n++] = (x))
uint mask() { return uint(simd_vote::vote_t(simd_ballot(true))); }
uint rounds_of(device uint* o, uint i, uint n, uint a) {
  for (uint k = 0; k < 3; k++)
    if ((i + k + a) % 3 == 0)
      REC(mask());
  return n;
}
__attribute__((noinline)) uint rounds_of_ni(device uint* o, uint i, uint n, uint a) {
  uint k = 0;
  while (k < 3) {
    if ((i + k + a) % 3 == 0)
      REC(mask());
    k++;
  }
  return n;
}
uint one_rec(device uint* o, uint i, uint n) {
  REC(mask());
  return n;
}
struct P {
  uint i;
  P(uint x) : i(x) {}
  uint rec(device uint* o, uint n) const {
    REC(mask());
    return n;
  }
};
uint max(P a, P b) { return a.i > b.i ? a.i : b.i; }
__attribute__((noinline)) uint loop_rec_ni(device uint* o, uint i, uint n) {
  for (uint k = 0; k < 2; k++)
    REC(mask());
  return n;
}
`

// TestLoopRounds runs kernels whose lanes reach one simd operation in
// different rounds of a loop. On a GPU each round's operation sees the
// lanes active in that round; the emulator took a lane that skipped the
// operation in round 0 and reached it in round 1 for one with the lanes
// still at round 0, as both wait at the same line along the same calls.
// An operation is also known by the round of each loop around it, in the
// function and its callers, and a lane waits for those in an earlier round
// of its loop, still in a loop it has left, or not yet in the loop it is
// in; lanes that leave a loop after different trip counts meet after it
// (docs/msl-subset.md, "Synchronisation and SIMD groups"). Each kernel runs on one simdgroup and records each
// operation's result a lane gets, in order; the rounds list, in the order
// a GPU runs them, which lanes run the operation in each. Built as
// TestDivergentHelper builds its kernels.
func TestLoopRounds(t *testing.T) {
	eachBuild(t, checkLoopRounds)
}

func checkLoopRounds(t *testing.T, dev *emu.Device) {
	const poison = 0xffffffff
	type in func(l int) bool
	// grid lists rounds 0..n-1 of one loop; grid2 those of two nested, the
	// outer's n1 rounds each running the inner's n2.
	grid := func(n int, run func(l, k int) bool) []in {
		var rs []in
		for k := range n {
			rs = append(rs, func(l int) bool { return run(l, k) })
		}
		return rs
	}
	grid2 := func(n1, n2 int, run func(l, a, b int) bool) []in {
		var rs []in
		for a := range n1 {
			rs = append(rs, grid(n2, func(l, b int) bool { return run(l, a, b) })...)
		}
		return rs
	}
	all := []in{func(int) bool { return true }}
	low16 := func(l int) bool { return l < 16 }
	high16 := func(l int) bool { return l >= 16 }
	// The value of a lane's operation, given the lanes that run it.
	ballot := func(set uint32, _ int) uint32 { return set }
	sum := func(set uint32, _ int) uint32 {
		var s float32
		for l := range 32 {
			if set&(1<<l) != 0 {
				s += float32(l + 1)
			}
		}
		return math.Float32bits(s)
	}
	xor1 := func(set uint32, i int) uint32 {
		if set&(1<<(i^1)) == 0 {
			return poison
		}
		return math.Float32bits(float32(i ^ 1))
	}
	alternate := func(l, k int) bool { return (l+k)&1 == 0 }
	cases := []struct {
		body   string
		rounds []in
		value  func(set uint32, i int) uint32
	}{
		// A branch in a loop: lanes of odd parity skip round 0's operation
		// and take round 1's.
		{"for (uint k = 0; k < 4; k++) if (((i + k) & 1) == 0) REC(mask());", grid(4, alternate), ballot},
		{"for (uint k = 0; k < 4; k++) { if (((i + k) & 1) == 0) REC(as_type<uint>(simd_sum(float(i + 1)))); }", grid(4, alternate), sum},
		{"for (uint k = 0; k < 3; k++) if (((i + k) & 1) == 0) REC(as_type<uint>(simd_shuffle_xor(float(i), 1)));", grid(3, alternate), xor1},
		// Round 1 has every lane: those that skipped round 0 wait for
		// those that ran it.
		{"for (uint k = 0; k < 2; k++) if (i < 16 || k == 1) REC(mask());", grid(2, func(l, k int) bool { return l < 16 || k == 1 }), ballot},
		{"for (uint k = 0; k < 4; k++) { if ((i >> k) & 1) continue; REC(mask()); }", grid(4, func(l, k int) bool { return (l>>k)&1 == 0 }), ballot},
		{"for (uint k = 0; k < 4; k++) { if (k == i % 4) break; if (((i + k) & 1) == 0) REC(mask()); }",
			grid(4, func(l, k int) bool { return k < l%4 && alternate(l, k) }), ballot},
		// Lanes leave a while loop after different numbers of rounds.
		{"uint k = 0; while (k < i % 5) { if ((i + k) % 3 == 0) REC(mask()); k++; }",
			grid(4, func(l, k int) bool { return k < l%5 && (l+k)%3 == 0 }), ballot},
		{"uint k = 0; do { if (((i + k) & 1) == 0) REC(mask()); k++; } while (k < 1 + i % 3);",
			grid(3, func(l, k int) bool { return k < 1+l%3 && alternate(l, k) }), ballot},
		{"uint ks[4] = {0, 1, 2, 3}; for (uint k : ks) if (((i + k) & 1) == 0) REC(mask());", grid(4, alternate), ballot},
		{"uint ks[3] = {2, 1, 0}; for (uint k : ks) { if (k == i % 3) continue; REC(mask()); }",
			grid(3, func(l, k int) bool { return 2-k != l%3 }), ballot},
		// Nested loops, the inner's trip count by lane.
		{"for (uint a = 0; a < 3; a++) for (uint b = 0; b < (i + a) % 3; b++) if (((i + a + b) & 1) == 0) REC(mask());",
			grid2(3, 3, func(l, a, b int) bool { return b < (l+a)%3 && (l+a+b)&1 == 0 }), ballot},
		// A function's loop called from a loop.
		{"for (uint a = 0; a < 2; a++) n = rounds_of(o, i, n, a);", grid2(2, 3, func(l, a, k int) bool { return (l+k+a)%3 == 0 }), ballot},
		{"for (uint a = 0; a < 2; a++) n = rounds_of_ni(o, i, n, a);", grid2(2, 3, func(l, a, k int) bool { return (l+k+a)%3 == 0 }), ballot},
		// After loops of trip counts by lane, every lane meets at one
		// operation, and lanes that skipped an operation before a loop
		// meet the others in its rounds.
		{"for (uint k = 0; k < i % 4; k++) REC(mask()); REC(mask());", append(grid(3, func(l, k int) bool { return k < l%4 }), all...), ballot},
		{"for (uint k = 0; k < 4; k++) { if (k == i % 4) break; REC(mask()); } n = rounds_of_ni(o, i, n, 0); REC(mask());",
			append(append(grid(3, func(l, k int) bool { return k < l%4 }), grid(3, func(l, k int) bool { return (l+k)%3 == 0 })...), all...), ballot},
		{"for (uint k = 0; k < i % 3; k++) REC(mask()); for (uint k = 0; k < 2; k++) if (((i + k) & 1) == 0) REC(mask());",
			append(grid(2, func(l, k int) bool { return k < l%3 }), grid(2, alternate)...), ballot},
		{"if (i < 16) REC(mask()); for (uint k = 0; k < 2; k++) REC(mask());", append([]in{func(l int) bool { return l < 16 }}, grid(2, func(int, int) bool { return true })...), ballot},
		{"float acc = 0; for (uint k = i; k < 70; k += 32) acc += 1.0f; REC(as_type<uint>(simd_sum(acc)));", all,
			func(uint32, int) uint32 { return math.Float32bits(70) }},
		{"uint k = i; while (k < 40) k += 32; for (uint a = 0; a < 2; a++) { uint j = a; do { j++; } while (j < i % 3); } REC(mask());", all, ballot},
		// Lanes at two operations in the same rounds complete in program
		// order: those of a branch's one side run its operations, then
		// every lane meets after the branch, as a GPU rejoins them.
		{"float s = 0; if (i < 16) { for (uint k = 0; k < 2; k++) s += simd_sum(1.0f); } REC(as_type<uint>(simd_sum(s)));", all,
			func(uint32, int) uint32 { return math.Float32bits(16 * 32) }},
		{"float s = 0; if (i < 16) s = simd_sum(1.0f); REC(as_type<uint>(simd_sum(s)));", all,
			func(uint32, int) uint32 { return math.Float32bits(16 * 16) }},
		{"if (i < 16) { for (uint k = 0; k < 2; k++) REC(mask()); } REC(mask());", append(grid(2, func(l, _ int) bool { return l < 16 }), all...), ballot},
		{"if (i < 16) REC(mask()); REC(mask());", []in{low16, all[0]}, ballot},
		{"if (i < 16) { REC(mask()); REC(mask()); } else REC(mask()); REC(mask());", []in{low16, low16, high16, all[0]}, ballot},
		{"if (i >= 16) { REC(mask()); } else { for (uint k = 0; k < 2; k++) REC(mask()); } REC(mask());",
			append([]in{high16}, append(grid(2, func(l, _ int) bool { return l < 16 }), all...)...), ballot},
		// Nested branches.
		{"if (i < 16) { if (i & 1) REC(mask()); REC(mask()); } else if (i < 24) REC(mask()); REC(mask());",
			[]in{func(l int) bool { return l < 16 && l&1 == 1 }, low16, func(l int) bool { return l >= 16 && l < 24 }, all[0]}, ballot},
		// A branch in a loop, then an operation after it in the same round.
		{"for (uint k = 0; k < 2; k++) { if (((i + k) & 1) == 0) REC(mask()); REC(mask()); }",
			[]in{func(l int) bool { return alternate(l, 0) }, all[0], func(l int) bool { return alternate(l, 1) }, all[0]}, ballot},
		// A function called on one side, inlined or not.
		{"if (i < 16) n = one_rec(o, i, n); REC(mask());", []in{low16, all[0]}, ballot},
		{"if (i < 16) n = loop_rec_ni(o, i, n); REC(mask());", append(grid(2, func(l, _ int) bool { return l < 16 }), all...), ballot},
		{"if (i < 16) { REC(mask()); REC(mask()); } else n = one_rec(o, i, n); REC(mask());", []in{low16, low16, high16, all[0]}, ballot},
		{"if (i < 16) n = one_rec(o, i, n); else n = loop_rec_ni(o, i, n); REC(mask());", []in{low16, high16, high16, all[0]}, ballot},
		// A member function, and a function whose argument calls another
		// of a name the unit defines (metal's max, not the unit's).
		{"P p(i); if (i < 16) n = p.rec(o, n); REC(mask());", []in{low16, all[0]}, ballot},
		{"if (i < 16) n = one_rec(o, max(i, 1u) - max(i, 1u) + i, n); REC(mask());", []in{low16, all[0]}, ballot},
		// Lanes that returned block no one.
		{"if (i % 4 == 0) return; if (i < 16) REC(mask()); REC(mask());",
			[]in{func(l int) bool { return l%4 != 0 && l < 16 }, func(l int) bool { return l%4 != 0 }}, ballot},
		{"if (i < 16) { REC(mask()); if (i & 1) return; } REC(mask());", []in{low16, func(l int) bool { return l >= 16 || l&1 == 0 }}, ballot},
	}
	lib := caseLibrary(t, dev, loopFunctions, len(cases), func(name string, j int) string {
		return fmt.Sprintf("kernel void %s(device uint* o [[buffer(0)]], uint i [[thread_position_in_grid]]) { uint n = 0; %s }\n", name, cases[j].body)
	})
	for j, c := range cases {
		var want [32][]uint32
		for _, r := range c.rounds {
			var set uint32
			for l := range 32 {
				if r(l) {
					set |= 1 << l
				}
			}
			for l := range 32 {
				if r(l) {
					want[l] = append(want[l], c.value(set, l))
				}
			}
		}
		o := u32Buf(t, dev, make([]uint32, 32*8))
		if err := runCase(t, dev, lib, j, 32, arg{buf: o}); err != nil {
			t.Errorf("%s: %v", c.body, err)
			continue
		}
		got := u32s(o)
	lanes:
		for i := range 32 {
			w := want[i]
			if len(w) > 8 {
				t.Fatalf("%s: lane %d records %d results, room for 8", c.body, i, len(w))
			}
			for n := range 8 {
				var v uint32
				if n < len(w) {
					v = w[n]
				}
				if g := got[i*8+n]; g != v {
					t.Errorf("%s: lane %d's result %d = %#x, want %#x", c.body, i, n, g, v)
					break lanes
				}
			}
		}
	}
}

// BenchmarkLoopRounds times what a loop's scope costs: a long loop of
// scalar work, whose every round ticks it, a loop running a simd_sum a
// round, which block_simd keys by the round, and a loop calling a function
// a round, whose call notes its place and whose frame takes it, in CPU
// time as well as wall time, which a shared machine makes noisy.
func BenchmarkLoopRounds(b *testing.B) {
	dev := newDevice(b, emu.Options{})
	lib := newLibrary(b, dev, `#include <metal_stdlib>
using namespace metal;
kernel void scalar_loop(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float acc = 0;
  for (uint k = 0; k < 4096; k++)
    acc = acc * 0.999f + float(k ^ i);
  o[i] = acc;
}
float step(float acc, uint k, uint i) { return acc * 0.999f + float(k ^ i); }
kernel void call_loop(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float acc = 0;
  for (uint k = 0; k < 4096; k++)
    acc = step(acc, k, i);
  o[i] = acc;
}
kernel void simd_loop(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float acc = 0;
  for (uint k = 0; k < 64; k++)
    acc += simd_sum(float(k + i));
  o[i] = acc;
}
`)
	for _, name := range []string{"scalar_loop", "call_loop", "simd_loop"} {
		b.Run(name, func(b *testing.B) {
			p := pipe(b, lib, name, nil)
			o := newBuf(b, dev, 4*2048)
			b.ResetTimer()
			cpu := emu.ProcessCPU()
			for range b.N {
				if err := run(b, dev, p, [3]int{8, 1, 1}, [3]int{256, 1, 1}, arg{buf: o}); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time tells more than wall time on a shared machine.
			b.ReportMetric(float64(emu.ProcessCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
