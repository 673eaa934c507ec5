package emu_test

import (
	"reflect"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// witnessRun runs one dispatch like run, and returns its cost witness.
func witnessRun(t *testing.T, dev *emu.Device, p mtl.Pipeline, groups, tpg [3]int, args ...arg) []mtl.DispatchStats {
	t.Helper()
	cb := encode(t, dev, p, groups, tpg, args...)
	w, ok := cb.(mtl.CostWitness)
	if !ok {
		t.Fatalf("%T is not an mtl.CostWitness", cb)
	}
	if w.DispatchStats() != nil {
		t.Errorf("DispatchStats before the command buffer ran: want nil")
	}
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
	return w.DispatchStats()
}

// TestCostWitness checks the counts of kernels whose loads, stores and
// barriers are worked out by hand: 128 threads in two threadgroups of 64
// (four simdgroups), one element each.
func TestCostWitness(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "witness.metal")
	const n = 128
	perm := make([]uint32, n)
	for i := range perm {
		perm[i] = uint32(n - 1 - i)
	}
	two, tpg := [3]int{2, 1, 1}, [3]int{64, 1, 1}
	// The loads of each dispatch's busiest lane: one, but where a lane
	// loads more (copy_quarter_lanes' four, read_twice's two, scatter_add's
	// three).
	critical := map[string]int64{"copy_quarter_lanes": 4, "read_twice": 2, "scatter_add": 3}
	for k, v := range map[string]int64{"copy_f32": 1, "copy_f16": 1, "copy_f32x4": 1, "copy_f16x4": 1, "copy_f16x8": 1,
		"copy_packed": 1, "count_atomic": 1, "tg_reduce": 1, "tile_copy": 1} {
		critical[k] = v
	}
	for _, c := range []struct {
		kernel       string
		inBytes      int // bytes of buffer(0)
		extra        []arg
		groups, tpg  [3]int
		read, wrote  int64
		loads        int64
		stores       int64
		bytesPerLoad float64
		perSimdLoad  float64 // bytes per simdgroup load
		lanes        float64 // lanes per simdgroup load
		barriers     int64
		tgMem        int
		// the footprint: distinct bytes read and written
		fpRead, fpWritten int64
	}{
		{"copy_f32", 4 * n, nil, two, tpg, 4 * n, 4 * n, n, n, 4, 128, 32, 0, 0, 4 * n, 4 * n},
		{"copy_f16", 2 * n, nil, two, tpg, 2 * n, 2 * n, n, n, 2, 64, 32, 0, 0, 2 * n, 2 * n},
		{"copy_f32x4", 16 * n, nil, two, tpg, 16 * n, 16 * n, n, n, 16, 512, 32, 0, 0, 16 * n, 16 * n},
		{"copy_f16x4", 8 * n, nil, two, tpg, 8 * n, 8 * n, n, n, 8, 256, 32, 0, 0, 8 * n, 8 * n},
		{"copy_f16x8", 16 * n, nil, two, tpg, 16 * n, 16 * n, n, n, 16, 512, 32, 0, 0, 16 * n, 16 * n},
		{"copy_packed", 16 * n, nil, two, tpg, 16 * n, 16 * n, n, n, 16, 512, 32, 0, 0, 16 * n, 16 * n},
		// copy_f32's bytes, loaded by a quarter of the lanes: each
		// simdgroup issues 4 loads with 8 lanes busy.
		{"copy_quarter_lanes", 4 * n, nil, two, tpg, 4 * n, 4 * n, n, n, 4, 32, 8, 0, 0, 4 * n, 4 * n},
		// Twice the reads of copy_f32 for the same output, the same
		// footprint.
		{"read_twice", 4 * n, nil, two, tpg, 2 * 4 * n, 4 * n, 2 * n, n, 4, 128, 32, 0, 0, 4 * n, 4 * n},
		// in, idx and the element added to: three loads; one store.
		{"scatter_add", 4 * n, []arg{{buf: u32Buf(t, dev, perm)}}, two, tpg, 3 * 4 * n, 4 * n, 3 * n, n, 4, 128, 32, 0, 0, 3 * 4 * n, 4 * n},
		// n atomics on one counter: 4 bytes read and written.
		{"count_atomic", 4, nil, two, tpg, 4 * n, 4 * n, n, n, 4, 128, 32, 0, 0, 4, 4},
		// 7 barriers per threadgroup; 256 bytes of scratch set by the host
		// plus the 256-byte array.
		{"tg_reduce", 4 * n, []arg{{tg: 256}}, two, tpg, 4 * n, 2 * 4, n, 2, 4, 128, 32, 2 * 7, 512, 4 * n, 2 * 4},
		// An 8x8 float tile per simdgroup: each lane one load of 8 bytes.
		{"tile_copy", 4 * n, nil, two, [3]int{32, 1, 1}, 4 * n, 4 * n, 64, 64, 8, 256, 32, 0, 0, 4 * n, 4 * n},
	} {
		t.Run(c.kernel, func(t *testing.T) {
			in := newBuf(t, dev, c.inBytes)
			args := []arg{{buf: in}}
			if c.kernel != "count_atomic" {
				outBytes := c.inBytes
				if c.kernel == "scatter_add" {
					args = append(args, c.extra[0])
					c.extra = nil
				}
				args = append(args, arg{buf: newBuf(t, dev, outBytes)})
			}
			args = append(args, c.extra...)
			stats := witnessRun(t, dev, pipe(t, lib, c.kernel, nil), c.groups, c.tpg, args...)
			if len(stats) != 1 {
				t.Fatalf("%d dispatch stats, want 1", len(stats))
			}
			s := stats[0]
			threads := int64(c.groups[0] * c.tpg[0])
			want := mtl.DispatchStats{
				Kernel: c.kernel, Grid: [3]int{int(threads), 1, 1}, Groups: c.groups, ThreadsPerGroup: c.tpg,
				ThreadgroupMemory: c.tgMem,
				Cost: mtl.Cost{
					BytesRead: c.read, BytesWritten: c.wrote, Loads: c.loads, Stores: c.stores,
					SimdgroupLoads: s.SimdgroupLoads, CriticalLoads: critical[c.kernel], Barriers: c.barriers, Threadgroups: 2,
					Simdgroups: (threads + 31) / 32, Threads: threads,
					ThreadgroupMemoryLaunched: 2 * int64(c.tgMem),
					FootprintRead:             c.fpRead, FootprintWritten: c.fpWritten,
				},
			}
			ops := s.Operands
			s.Operands = nil
			if !reflect.DeepEqual(s, want) {
				t.Errorf("stats\n got %+v\nwant %+v", s, want)
			}
			// Every access lands in one operand, by the kernel's names.
			var sum mtl.Operand
			for _, o := range ops {
				sum.Read += o.Read
				sum.Written += o.Written
				sum.FootprintRead += o.FootprintRead
				sum.FootprintWritten += o.FootprintWritten
			}
			if sum.Read != c.read || sum.Written != c.wrote || sum.FootprintRead != c.fpRead || sum.FootprintWritten != c.fpWritten {
				t.Errorf("operands %+v add up to %+v", ops, sum)
			}
			if ops[0].Name != "in" && ops[0].Name != "counter" {
				t.Errorf("first operand %q, want the kernel's name for buffer(0)", ops[0].Name)
			}
			if got := s.BytesPerLoad(); got != c.bytesPerLoad {
				t.Errorf("BytesPerLoad = %v, want %v", got, c.bytesPerLoad)
			}
			if got := s.BytesPerSimdgroupLoad(); got != c.perSimdLoad {
				t.Errorf("BytesPerSimdgroupLoad = %v, want %v", got, c.perSimdLoad)
			}
			if got := s.LanesPerLoad(); got != c.lanes {
				t.Errorf("LanesPerLoad = %v, want %v", got, c.lanes)
			}
			if got, want := s.BarriersPerThreadgroup(), float64(c.barriers)/2; got != want {
				t.Errorf("BarriersPerThreadgroup = %v, want %v", got, want)
			}
			if got, want := s.ThreadgroupMemoryPerThreadgroup(), float64(c.tgMem); got != want {
				t.Errorf("ThreadgroupMemoryPerThreadgroup = %v, want %v", got, want)
			}
		})
	}
}

// copyDispatches runs witness.metal's kernels, each over n elements in
// threadgroups of 64 (buffer(0) in, buffer(1) out), in one command buffer,
// and returns its cost witness.
func copyDispatches(t *testing.T, dev *emu.Device, n int, kernels ...string) []mtl.DispatchStats {
	t.Helper()
	lib := testLibrary(t, dev, "witness.metal")
	in, out := newBuf(t, dev, 4*n), newBuf(t, dev, 4*n)
	q, _ := dev.NewCommandQueue()
	cb, _ := q.CommandBuffer()
	enc, _ := cb.ComputeEncoder()
	for _, k := range kernels {
		enc.SetPipeline(pipe(t, lib, k, nil))
		enc.SetBuffer(in, 0, 0)
		enc.SetBuffer(out, 0, 1)
		enc.DispatchThreads([3]int{n, 1, 1}, [3]int{64, 1, 1})
	}
	enc.End()
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
	return cb.(mtl.CostWitness).DispatchStats()
}

// TestCriticalLoads: the busiest simdgroup's loads, the most over every
// threadgroup, and their sum over a command buffer's dispatches.
func TestCriticalLoads(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const n = 128
	stats := copyDispatches(t, dev, n, "one_walks", "copy_f32")
	if len(stats) != 2 {
		t.Fatalf("%d dispatch stats, want 2", len(stats))
	}
	walk := stats[0]
	if walk.Loads != n-1+n || walk.SimdgroupLoads != 3+n || walk.CriticalLoads != n {
		t.Errorf("one_walks: %d loads, %d by simdgroup, %d critical; want %d, %d, %d", walk.Loads, walk.SimdgroupLoads,
			walk.CriticalLoads, n-1+n, 3+n, n)
	}
	if got := mtl.Sum(stats).CriticalLoads; got != n+1 {
		t.Errorf("the two dispatches' critical loads add up to %d, want %d", got, n+1)
	}
}

// TestFootprintOverlap: a buffer bound twice, at offsets whose ranges
// overlap, counts its bytes once; with the footprint off nothing is
// counted.
func TestFootprintOverlap(t *testing.T) {
	const n = 128
	for _, off := range []bool{false, true} {
		dev := newDevice(t, emu.Options{NoFootprint: off})
		lib := testLibrary(t, dev, "witness.metal")
		in, out := newBuf(t, dev, 4*2*n), newBuf(t, dev, 4*n)
		q, _ := dev.NewCommandQueue()
		cb, _ := q.CommandBuffer()
		enc, _ := cb.ComputeEncoder()
		enc.SetPipeline(pipe(t, lib, "add_two", nil))
		enc.SetBuffer(in, 0, 0)
		enc.SetBuffer(in, 4*n/2, 1) // floats n/2 .. 3n/2
		enc.SetBuffer(out, 0, 2)
		enc.DispatchThreads([3]int{n, 1, 1}, [3]int{64, 1, 1})
		enc.End()
		cb.Commit()
		if err := cb.Wait(); err != nil {
			t.Fatal(err)
		}
		s := cb.(mtl.CostWitness).DispatchStats()[0]
		var wantRead, wantWritten int64 = 4 * 3 * n / 2, 4 * n
		if off {
			wantRead, wantWritten = 0, 0
		}
		if s.BytesRead != 4*2*n || s.FootprintRead != wantRead || s.FootprintWritten != wantWritten {
			t.Errorf("NoFootprint %v: read %d (footprint %d, written %d), want %d (%d, %d)",
				off, s.BytesRead, s.FootprintRead, s.FootprintWritten, 4*2*n, wantRead, wantWritten)
		}
		if got, want := s.FootprintEfficiency(4*2*n), float64(4*2*n)/float64(wantRead+wantWritten); !off && got != want {
			t.Errorf("FootprintEfficiency = %v, want %v", got, want)
		}
		// One buffer bound at two offsets: a byte belongs to the argument
		// bound nearest below it, so a has the first n/2 floats and b the
		// rest, which both read from n/2 to n; out is written once.
		wantOps := []mtl.Operand{{Name: "a", Read: 4 * n / 2, FootprintRead: 4 * n / 2},
			{Name: "b", Read: 4 * 3 * n / 2, FootprintRead: 4 * n}, {Name: "out", Written: 4 * n, FootprintWritten: 4 * n}}
		if off {
			wantOps = nil
		}
		if !reflect.DeepEqual(s.Operands, wantOps) {
			t.Errorf("NoFootprint %v: operands %+v, want %+v", off, s.Operands, wantOps)
		}
	}
}

// TestCostWitnessSums checks a command buffer of several dispatches, its
// sums by step and by kernel, traffic efficiency, and that counting can be
// switched off.
func TestCostWitnessSums(t *testing.T) {
	for _, off := range []bool{false, true} {
		dev := newDevice(t, emu.Options{NoCostWitness: off})
		const n = 128
		stats := copyDispatches(t, dev, n, "copy_f32", "read_twice", "copy_f32")
		if off {
			if stats != nil {
				t.Errorf("NoCostWitness: got %d dispatch stats, want none", len(stats))
			}
			continue
		}
		if len(stats) != 3 {
			t.Fatalf("%d dispatch stats, want 3", len(stats))
		}
		step := mtl.Sum(stats)
		if step.Dispatches != 3 || step.BytesRead != 4*4*n || step.BytesWritten != 3*4*n || step.Threadgroups != 6 {
			t.Errorf("step sum %+v", step)
		}
		// The ideal is one read of the input and one write of the output per
		// dispatch: copy_f32 is at 1, read_twice at 2/3.
		for i, want := range []float64{1, 2.0 / 3, 1} {
			if got := stats[i].TrafficEfficiency(2 * 4 * n); got != want {
				t.Errorf("dispatch %d (%s): TrafficEfficiency = %v, want %v", i, stats[i].Kernel, got, want)
			}
		}
		if got, want := step.TrafficEfficiency(3*2*4*n), 6.0/7; got != want {
			t.Errorf("step TrafficEfficiency = %v, want %v", got, want)
		}
		if got := step.SimdgroupsPerCore(3); got != 4 {
			t.Errorf("SimdgroupsPerCore(3) = %v, want 4 (12 simdgroups)", got)
		}
		ks := mtl.SumByKernel(stats)
		mtl.SortByBytes(ks)
		if len(ks) != 2 || ks[0].Kernel != "copy_f32" || ks[0].Dispatches != 2 || ks[1].Kernel != "read_twice" {
			t.Errorf("SumByKernel = %+v", ks)
		}
	}
}

// BenchmarkCostWitness times a memory-bound and a barrier-bound kernel with
// counting off, on without the footprint, and on (docs/msl-subset.md quotes
// the differences).
func BenchmarkCostWitness(b *testing.B) {
	for _, mode := range []struct {
		name string
		opts emu.Options
	}{
		{"witness", emu.Options{}},
		{"nofootprint", emu.Options{NoFootprint: true}},
		{"off", emu.Options{NoCostWitness: true}},
	} {
		mode.opts.NoRaceCheck = true
		dev := newDevice(b, mode.opts)
		lib := testLibrary(b, dev, "witness.metal")
		const n = 1 << 16
		in, out := newBuf(b, dev, 4*n), newBuf(b, dev, 4*n)
		for _, k := range []string{"read_twice", "tg_reduce"} {
			name := k + "/" + mode.name
			p := pipe(b, lib, k, nil)
			b.Run(name, func(b *testing.B) {
				for range b.N {
					if err := run(b, dev, p, [3]int{n / 64, 1, 1}, [3]int{64, 1, 1}, arg{buf: in}, arg{buf: out}, arg{tg: 16}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
