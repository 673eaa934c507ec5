package emu_test

import (
	"encoding/binary"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// A closed Options.Stop ends a dispatch in flight at its next threadgroup
// (an interrupted run need not wait out an emulated step of minutes), and
// every command buffer after it fails at once.
func TestStopEndsADispatch(t *testing.T) {
	stop := make(chan struct{})
	dev := newDevice(t, emu.Options{Stop: stop})
	p := pipe(t, testLibrary(t, dev, "idioms.metal"), "bump_first", nil)
	const groups, threads = 1 << 17, 32
	before, counts := newBuf(t, dev, 4*groups*threads), newBuf(t, dev, 4)
	ran := (*uint32)(unsafe.Pointer(&counts.Contents()[0]))
	errc := make(chan error, 1)
	go func() {
		errc <- run(t, dev, p, [3]int{groups, 1, 1}, [3]int{threads, 1, 1}, arg{buf: before}, arg{buf: counts})
	}()
	for atomic.LoadUint32(ran) == 0 {
		runtime.Gosched()
	}
	close(stop)
	if err := <-errc; !errors.Is(err, emu.ErrStopped) {
		t.Fatalf("stopped dispatch: %v, want ErrStopped", err)
	}
	if n := atomic.LoadUint32(ran); n >= groups*threads {
		t.Errorf("all %d threads ran: the stop did not end the dispatch", n)
	}
	if err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{threads, 1, 1}, arg{buf: before}, arg{buf: counts}); !errors.Is(err, emu.ErrStopped) {
		t.Errorf("a dispatch after the stop: %v, want ErrStopped", err)
	}
}

// A kernel stuck in an endless loop fails its dispatch once
// Options.DispatchTimeout passes without progress, naming the kernel and
// the loop, as a GPU's watchdog fails its command buffer; the device runs
// the next dispatch as usual.
func TestDispatchTimeLimit(t *testing.T) {
	const src = `#include <metal_stdlib>
using namespace metal;
kernel void spin_while(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  while (out[0] == 0) {
  }
  out[i] = 1;
}
kernel void spin_for(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  for (uint n = 0;; n++) { out[i] = n; }
}
kernel void spin_do(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  do { out[i] += 1; } while (true);
}
kernel void spin_barrier(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  for (;;)
    threadgroup_barrier(mem_flags::mem_threadgroup);
}
kernel void spin_one(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]],
                     uint g [[threadgroup_position_in_grid]]) {
  while (g == 3 && i % 64 == 5) out[i]++;
  out[i] = 7;
}
constexpr int steps(int n) { int s = 0; while (n > 1) { n /= 2; s++; } return s; }
kernel void finite(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  uint s = 0;
  for (uint k = 0; k < 10; k++) s += k;
  const uint two[2] = {1u, 2u};
  for (auto v : two) s += v;
  constexpr int n = steps(64);
  uint m = 3;
  while (uint d = m) { s += d; m--; }
  for (uint k = 2; const uint d{k}; k--) s += d;
  out[i] = s + n;
}
kernel void spin_while_decl(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  while (uint x = out[0] + 1) { out[i] = x; }
}
kernel void spin_for_decl(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  for (uint n = 0; device uint* p = out + (n & 1); n++) *p = n;
}
kernel void spin_for_decl_brace(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  for (; bool b{i < 100000u}; ) out[i] = 0;
}
struct Forever { struct It { uint n; uint operator*() const { return n; } void operator++() { n++; } bool operator!=(It) const { return true; } }; It begin() const { return {0}; } It end() const { return {0}; } };
kernel void spin_range(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  Forever f;
  for (uint v : f) out[i] = v;
}
`
	dev := newDevice(t, emu.Options{DispatchTimeout: 300 * time.Millisecond, Workers: 2})
	lib, err := dev.NewLibrary(map[string]string{"k.metal": src}, mtl.CompileOptions{LanguageVersion: "3.1"})
	if err != nil {
		t.Fatal(err)
	}
	out := newBuf(t, dev, 4*256)
	// The barrier of spin_barrier is on line 16, its loop on line 15.
	waiting := map[string]string{"spin_barrier": "stopped waiting at a threadgroup barrier at k.metal:16 (thread ("}
	for _, tc := range []struct {
		kernel, loop string
	}{
		{"spin_while", "k.metal:4 (thread (0,0,0)"},
		{"spin_for", "k.metal:9"},
		{"spin_do", "k.metal:12"},
		{"spin_barrier", "k.metal:15"},
		{"spin_one", "k.metal:20 (thread (5,0,0) of threadgroup (3,0,0))"},
		{"spin_while_decl", "k.metal:36"},
		{"spin_for_decl", "k.metal:39"},
		{"spin_for_decl_brace", "k.metal:42"},
	} {
		err := runWithin(t, 20*time.Second, dev, lib, tc.kernel, [3]int{4, 1, 1}, [3]int{64, 1, 1}, arg{buf: out})
		where := "stopped in the loop at " + tc.loop
		// Every thread may be waiting at the barrier when the limit
		// comes: the message then names the barrier, on the same line.
		if w := waiting[tc.kernel]; w != "" && err != nil && strings.Contains(err.Error(), w) {
			where = w
		}
		wantExecError(t, err, "kernel "+tc.kernel+": no progress within the dispatch time limit of 300ms", where)
		t.Log(err)
	}
	// A range-based for stops in its range's functions.
	err = runWithin(t, 20*time.Second, dev, lib, "spin_range", [3]int{4, 1, 1}, [3]int{64, 1, 1}, arg{buf: out})
	wantExecError(t, err, "kernel spin_range: no progress within the dispatch time limit of 300ms",
		"stopped in a call of operator", " at k.metal:44 (thread (")
	// The device and library stay usable.
	if err := run(t, dev, pipe(t, lib, "finite", nil), [3]int{4, 1, 1}, [3]int{64, 1, 1}, arg{buf: out}); err != nil {
		t.Fatalf("a dispatch after the time limit: %v", err)
	}
	if got := u32s(out)[255]; got != 45+3+6+6+3 {
		t.Errorf("finite: out[255] = %d, want 63", got)
	}
	// A limit shorter than the watch's tick still works.
	dev = newDevice(t, emu.Options{DispatchTimeout: time.Nanosecond})
	lib, err = dev.NewLibrary(map[string]string{"k.metal": src}, mtl.CompileOptions{LanguageVersion: "3.1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := run(t, dev, pipe(t, lib, "spin_for", nil), [3]int{1, 1, 1}, [3]int{32, 1, 1}, arg{buf: out}); err == nil {
		t.Error("spin_for with a 1ns limit: no error")
	}
}

// The time limit counts only time the process ran: a group that runs past
// it fails its dispatch, but one the machine stalls for as long (a loaded
// machine, the process given no CPU) is no stuck kernel and runs to its
// end. A stalled process is a CPU clock that stands still.
func TestDispatchTimeLimitCountsTimeRun(t *testing.T) {
	const src = `#include <metal_stdlib>
using namespace metal;
kernel void long_loop(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  uint s = 0;
  for (uint k = 0; k < out[0]; k++)
    s += k;
  out[1] = s;
}
`
	dev := newDevice(t, emu.Options{DispatchTimeout: 10 * time.Millisecond, Workers: 1})
	lib, err := dev.NewLibrary(map[string]string{"k.metal": src}, mtl.CompileOptions{LanguageVersion: "3.1"})
	if err != nil {
		t.Fatal(err)
	}
	p := pipe(t, lib, "long_loop", nil)
	// Rounds enough for far more than the limit's 10 ms, of CPU and wall time.
	const rounds = 100_000_000
	for _, tc := range []struct {
		name    string
		stalled bool
	}{
		{"running", false},
		{"stalled", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.stalled {
				defer emu.SetProcessCPU(func() time.Duration { return 0 })()
			}
			out := newBuf(t, dev, 8)
			binary.LittleEndian.PutUint32(out.Contents(), rounds)
			start := time.Now()
			err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{1, 1, 1}, arg{buf: out})
			took := time.Since(start)
			if !tc.stalled {
				wantExecError(t, err, "kernel long_loop: no progress within the dispatch time limit of 10ms", "stopped in the loop at k.metal:5")
				return
			}
			if err != nil {
				t.Fatalf("after %v: %v", took, err)
			}
			if took < 10*time.Millisecond {
				t.Fatalf("the dispatch took %v, within the limit: the case tests nothing", took)
			}
			if got, want := u32s(out)[1], uint32(uint64(rounds)*(rounds-1)/2%(1<<32)); got != want {
				t.Errorf("out[1] = %d, want %d", got, want)
			}
		})
	}
}

// A dispatch whose threadgroups all finished is not failed by a time limit
// that fires after the last group's last progress and before the dispatch's
// end is seen: the limit fires here once the workers have returned.
func TestFinishedDispatchIsNotTimedOut(t *testing.T) {
	const src = `#include <metal_stdlib>
using namespace metal;
kernel void twice(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[i] = 2 * i;
}
`
	for _, workers := range []int{1, 2} {
		t.Run(strconv.Itoa(workers), func(t *testing.T) {
			dev := newDevice(t, emu.Options{DispatchTimeout: 10 * time.Millisecond, Workers: workers})
			lib, err := dev.NewLibrary(map[string]string{"k.metal": src}, mtl.CompileOptions{LanguageVersion: "3.1"})
			if err != nil {
				t.Fatal(err)
			}
			p := pipe(t, lib, "twice", nil)
			// Wall time as CPU time, so the limit runs while the test waits.
			start := time.Now()
			defer emu.SetProcessCPU(func() time.Duration { return time.Since(start) })()
			fired := false
			defer emu.SetAfterWork(func(timedOut func() bool) {
				for end := time.Now().Add(10 * time.Second); !fired && time.Now().Before(end); time.Sleep(time.Millisecond) {
					fired = timedOut()
				}
			})()
			const groups, threads = 4, 32
			out := newBuf(t, dev, 4*groups*threads)
			if err := run(t, dev, p, [3]int{groups, 1, 1}, [3]int{threads, 1, 1}, arg{buf: out}); err != nil {
				t.Fatalf("finished dispatch: %v", err)
			}
			if !fired {
				t.Fatal("the time limit never fired: the case tests nothing")
			}
			for i, v := range u32s(out) {
				if v != uint32(2*i) {
					t.Fatalf("out[%d] = %d, want %d", i, v, 2*i)
				}
			}
		})
	}
}
