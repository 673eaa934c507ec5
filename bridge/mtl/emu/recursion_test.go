package emu_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// A kernel that recurses without end (or deeper than a thread's stack
// holds) fails its dispatch naming the kernel, the function and the
// thread, instead of running off its fiber's stack and taking the process
// down; so does a tail recursion, which clang turned into a loop that
// stopped at the time limit before the kernels made no call a jump
// (TestDivergentHelper). The device runs the next dispatch as
// usual, and a recursion of modest depth gives its result
// (docs/msl-subset.md, "The time limit").
func TestEndlessRecursion(t *testing.T) {
	const src = `#include <metal_stdlib>
using namespace metal;
uint down(device uint* out, uint n) {
  uint r = down(out, n + 1);
  out[n & 255] = r;
  return r + 1;
}
uint pong(device uint* out, uint n);
uint ping(device uint* out, uint n) {
  uint r = pong(out, n + 1);
  out[n & 255] = r;
  return r;
}
uint pong(device uint* out, uint n) { return ping(out, n * 3) + 2; }
uint heavy(device uint* out, uint n) {
  float local[4096];
  for (uint k = 0; k < 4096; k++) local[k] = float(out[(n + k) & 255]);
  return heavy(out, n + 1) + uint(local[n & 4095]);
}
uint forever(uint n, uint stop) { return n == stop ? n : forever(n + 2, stop); }
uint chain(thread const uint* up, uint n) {
  uint mine[2] = {up[0] + 1, n};
  return n == 0 ? mine[0] : chain(mine, n - 1);
}
uint fib(uint n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
kernel void rec_direct(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[i] = down(out, i);
}
kernel void rec_mutual(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[i] = ping(out, i);
}
kernel void rec_heavy(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[i] = heavy(out, i);
}
kernel void rec_tail(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[i] = forever(i * 2, 1);
}
kernel void rec_fine(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  const uint zero = 0;
  out[i] = fib(i % 16) + chain(&zero, 1000);
}
`
	// Both fiber switches: the assembly one of Linux x86-64, and the
	// ucontext one other systems use.
	for _, cflags := range [][]string{nil, {"-DMSL_EMU_UCONTEXT"}} {
		t.Run(strings.Join(append([]string{"switch"}, cflags...), " "), func(t *testing.T) {
			checkRecursion(t, emu.Options{DispatchTimeout: 500 * time.Millisecond, Workers: 2, CFlags: cflags}, src)
		})
	}
}

func checkRecursion(t *testing.T, opts emu.Options, src string) {
	t.Helper()
	dev := newDevice(t, opts)
	lib, err := dev.NewLibrary(map[string]string{"k.metal": src}, mtl.CompileOptions{LanguageVersion: "3.1"})
	if err != nil {
		t.Fatal(err)
	}
	out := newBuf(t, dev, 4*256)
	const overflow = "KiB of stack ran out (msl-emu's limit: endless or too deep recursion, or local arrays too large) (thread ("
	for _, tc := range []struct {
		kernel string
		want   []string
	}{
		{"rec_direct", []string{"stack overflow in down at k.metal:3: the thread's 192 " + overflow}},
		{"rec_mutual", []string{"stack overflow in p", overflow}},
		{"rec_heavy", []string{"stack overflow in heavy at k.metal:15: ", overflow}},
		{"rec_tail", []string{"stack overflow in forever at k.metal:20: the thread's 192 " + overflow}},
	} {
		err := runWithin(t, 60*time.Second, dev, lib, tc.kernel, [3]int{4, 1, 1}, [3]int{64, 1, 1}, arg{buf: out})
		wantExecError(t, err, append([]string{"kernel " + tc.kernel + ": "}, tc.want...)...)
		t.Log(err)
	}
	if err := run(t, dev, pipe(t, lib, "rec_fine", nil), [3]int{4, 1, 1}, [3]int{64, 1, 1}, arg{buf: out}); err != nil {
		t.Fatalf("a dispatch after the failed ones: %v", err)
	}
	fib := []uint32{0, 1}
	for len(fib) < 16 {
		fib = append(fib, fib[len(fib)-1]+fib[len(fib)-2])
	}
	for i, got := range u32s(out) {
		if want := fib[i%16] + 1001; got != want {
			t.Fatalf("rec_fine: out[%d] = %d, want %d", i, got, want)
		}
	}
}

// A function whose locals take more of a thread's stack than the stack
// check's margin leaves fails to build, at its line, rather than running
// past the stack's end before any check could see it.
func TestFrameLimit(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const head = "#include <metal_stdlib>\nusing namespace metal;\n"
	for _, tc := range []struct {
		what, src string
		ok        bool
		line      int
		says      []string
	}{
		{"a function's 400 KB array", head + `uint huge(device uint* out, uint n) {
  float local[100000];
  for (uint k = 0; k < 100000; k++) local[k] = float(out[(n + k) & 255]);
  return uint(local[n % 100000]) + (n > 0 ? huge(out, n - 1) : 0);
}
kernel void k(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) { out[i] = huge(out, 3); }
`, false, 3, []string{"stack frame size (", "exceeds limit (57344) in 'huge(", "may take 56 KiB"}},
		{"a kernel's 80 KB array", head + `kernel void big(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float acc[20000];
  for (uint k = 0; k < 20000; k++) acc[k] = out[(i + k) & 255];
  out[i] = acc[i % 20000];
}
`, false, 3, []string{"in 'big(", "msl-emu runs each thread on a 256 KiB stack"}},
		{"a kernel's 16 KB array", head + `kernel void fits(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float acc[4096];
  for (uint k = 0; k < 4096; k++) acc[k] = out[(i + k) & 255];
  out[i] = acc[i % 4096];
}
`, true, 0, nil},
	} {
		checkBuild(t, dev, tc.what, tc.src, mtl.CompileOptions{LanguageVersion: "3.1"}, tc.ok, tc.line, tc.says...)
	}
}
