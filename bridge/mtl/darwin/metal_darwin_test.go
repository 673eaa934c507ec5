//go:build darwin && arm64

package darwin

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/applegpu"
)

var (
	devOnce sync.Once
	devVal  mtl.Device
	devErr  error
)

// testDevice opens the GPU once per test binary, or skips where there is
// none (a VM, a CI runner without a GPU).
func testDevice(t testing.TB) mtl.Device {
	t.Helper()
	devOnce.Do(func() { devVal, devErr = New() })
	if devErr != nil {
		t.Skipf("skipping: no Metal device: %v", devErr)
	}
	return devVal
}

const testKernels = `#include <metal_stdlib>
#include "args.h"
using namespace metal;

constant bool has_bias [[function_constant(0)]];
constant float scale [[function_constant(1)]];
constant bool has_scale = is_function_constant_defined(scale);

// y = x * scale + bias, the parts present or not by function constants.
kernel void axpb(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                 device const float* bias [[buffer(2), function_constant(has_bias)]],
                 constant Args& a [[buffer(3)]],
                 uint i [[thread_position_in_grid]]) {
  if (i >= a.n) return;
  float v = x[i];
  if (has_scale) v *= scale;
  if (has_bias) v += bias[i];
  y[i] = v + OFFSET;
}

// Each threadgroup sums its slice with simd_sum and a threadgroup array.
kernel void group_sum(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                      threadgroup float* partial [[threadgroup(0)]],
                      uint tid [[thread_index_in_threadgroup]], uint tg [[threadgroup_position_in_grid]],
                      uint ntg [[threads_per_threadgroup]], uint lane [[thread_index_in_simdgroup]],
                      uint sg [[simdgroup_index_in_threadgroup]]) {
  float s = simd_sum(x[tg * ntg + tid]);
  if (lane == 0) partial[sg] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid == 0) {
    float t = 0;
    for (uint i = 0; i < ntg / 32; i++) t += partial[i];
    out[tg] = t;
  }
}

#if defined(__HAVE_BFLOAT__)
kernel void to_bf16(device const float* x [[buffer(0)]], device bfloat* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  y[i] = bfloat(x[i]);
}
#endif
`

const testArgs = `#pragma once
struct Args {
  uint n;
};
`

func testLibrary(t testing.TB, dev mtl.Device) mtl.Library {
	t.Helper()
	lib, err := dev.NewLibrary(map[string]string{"k.metal": testKernels, "args.h": testArgs},
		mtl.CompileOptions{LanguageVersion: "3.1", Defines: map[string]string{"OFFSET": "0.5f"}})
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

func newBuf(t testing.TB, dev mtl.Device, n int) mtl.Buffer {
	t.Helper()
	b, err := dev.NewBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

func putF32(b mtl.Buffer, v []float32) {
	for i, x := range v {
		binary.LittleEndian.PutUint32(b.Contents()[4*i:], math.Float32bits(x))
	}
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func TestDeviceProperties(t *testing.T) {
	dev := testDevice(t)
	d := dev.(*device)
	t.Logf("%s: unified %v, working set %d MiB, max buffer %d MiB, threadgroup memory %d, threads %d, Apple family %d, timing %s",
		dev.Name(), dev.UnifiedMemory(), dev.RecommendedMaxWorkingSetSize()>>20, dev.MaxBufferLength()>>20,
		dev.MaxThreadgroupMemoryLength(), dev.MaxThreadsPerThreadgroup(), d.AppleFamily(), d.TimingMode())
	if dev.Name() == "" || dev.Emulated() {
		t.Errorf("name %q, emulated %v", dev.Name(), dev.Emulated())
	}
	if dev.MaxThreadsPerThreadgroup() < 256 || dev.MaxThreadgroupMemoryLength() < 16<<10 {
		t.Errorf("implausible limits: %d threads, %d bytes", dev.MaxThreadsPerThreadgroup(), dev.MaxThreadgroupMemoryLength())
	}
	if dev.MaxBufferLength() < 256<<20 || dev.RecommendedMaxWorkingSetSize() <= 0 {
		t.Errorf("implausible sizes: max buffer %d, working set %d", dev.MaxBufferLength(), dev.RecommendedMaxWorkingSetSize())
	}
	if d.AppleFamily() >= 7 && !dev.UnifiedMemory() {
		t.Error("Apple silicon without unified memory")
	}
}

func TestBufferRoundTrip(t *testing.T) {
	dev := testDevice(t)
	b := newBuf(t, dev, 1<<20)
	if b.Length() != 1<<20 || len(b.Contents()) != 1<<20 {
		t.Fatalf("length %d, contents %d", b.Length(), len(b.Contents()))
	}
	for i, c := range b.Contents() {
		if c != 0 {
			t.Fatalf("byte %d of a new buffer is %d", i, c)
		}
	}
	for i := range b.Contents() {
		b.Contents()[i] = byte(i * 7)
	}
	for i, c := range b.Contents() {
		if c != byte(i*7) {
			t.Fatalf("byte %d reads back %d", i, c)
		}
	}
	b.Release()
	if b.Contents() != nil {
		t.Error("Contents after Release")
	}
	if _, err := dev.NewBuffer(0); err == nil {
		t.Error("zero-length buffer accepted")
	}
}

// run encodes one pass with encode and waits.
func run(t testing.TB, dev mtl.Device, encode func(mtl.ComputeEncoder)) (mtl.CommandBuffer, error) {
	t.Helper()
	q, err := dev.NewCommandQueue()
	if err != nil {
		t.Fatal(err)
	}
	cb, err := q.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	enc, err := cb.ComputeEncoder()
	if err != nil {
		t.Fatal(err)
	}
	encode(enc)
	enc.End()
	cb.Commit()
	return cb, cb.Wait()
}

func u32Bytes(v ...uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

func TestDispatchAndFunctionConstants(t *testing.T) {
	dev := testDevice(t)
	lib := testLibrary(t, dev)
	names := strings.Join(lib.FunctionNames(), " ")
	for _, n := range []string{"axpb", "group_sum", "to_bf16"} {
		if !strings.Contains(names, n) {
			t.Errorf("FunctionNames %q lacks %s (to_bf16 needs MSL 3.1's bfloat)", names, n)
		}
	}
	const n = 1000
	x, bias := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], bias[i] = float32(i), float32(2*i)
	}
	xb, bb, y := newBuf(t, dev, 4*n), newBuf(t, dev, 4*n), newBuf(t, dev, 4*n)
	putF32(xb, x)
	putF32(bb, bias)

	p, err := lib.Pipeline("axpb", mtl.FunctionConstants{0: true, 1: float32(3)})
	if err != nil {
		t.Fatal(err)
	}
	if p.ThreadExecutionWidth() != 32 || p.MaxTotalThreadsPerThreadgroup() < 256 {
		t.Errorf("pipeline: width %d, max threads %d", p.ThreadExecutionWidth(), p.MaxTotalThreadsPerThreadgroup())
	}
	cb, err := run(t, dev, func(e mtl.ComputeEncoder) {
		e.SetPipeline(p)
		e.SetBuffer(xb, 0, 0)
		e.SetBuffer(y, 0, 1)
		e.SetBuffer(bb, 0, 2)
		e.SetBytes(u32Bytes(n), 3)
		e.DispatchThreadgroups([3]int{(n + 255) / 256, 1, 1}, [3]int{256, 1, 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range f32s(y.Contents()) {
		if want := 3*x[i] + bias[i] + 0.5; v != want {
			t.Fatalf("axpb with bias and scale: y[%d] = %v, want %v", i, v, want)
		}
	}
	start, end := cb.GPUTime()
	if start <= 0 || end < start {
		t.Errorf("GPUTime %v, %v", start, end)
	}

	// Without bias or scale, through dispatchThreads with a ragged edge and
	// at an offset into x.
	pn, err := lib.Pipeline("axpb", mtl.FunctionConstants{0: false})
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := lib.Pipeline("axpb", mtl.FunctionConstants{0: false}); again != pn {
		t.Error("the pipeline was not cached")
	}
	if _, err := run(t, dev, func(e mtl.ComputeEncoder) {
		e.SetPipeline(pn)
		e.SetBuffer(xb, 4, 0)
		e.SetBuffer(y, 0, 1)
		e.SetBytes(u32Bytes(n-1), 3)
		e.DispatchThreads([3]int{n - 1, 1, 1}, [3]int{64, 1, 1})
		e.MemoryBarrier()
	}); err != nil {
		t.Fatal(err)
	}
	for i, v := range f32s(y.Contents())[:n-1] {
		if want := x[i+1] + 0.5; v != want {
			t.Fatalf("plain axpb at offset 4: y[%d] = %v, want %v", i, v, want)
		}
	}

	if _, err := lib.Pipeline("axpb", nil); err == nil || !strings.Contains(err.Error(), "needs function constant 0 (bool has_bias") {
		t.Errorf("missing constant: %v", err)
	}
	if _, err := lib.Pipeline("axpb", mtl.FunctionConstants{0: int32(1)}); err == nil || !strings.Contains(err.Error(), "cannot take int32") {
		t.Errorf("wrong type: %v", err)
	}
	if _, err := lib.Pipeline("nope", nil); err == nil || !strings.Contains(err.Error(), `no kernel "nope"`) {
		t.Errorf("unknown kernel: %v", err)
	}
}

func TestThreadgroupMemoryAndSimd(t *testing.T) {
	dev := testDevice(t)
	p, err := testLibrary(t, dev).Pipeline("group_sum", nil)
	if err != nil {
		t.Fatal(err)
	}
	const groups, tpg = 64, 256
	x := make([]float32, groups*tpg)
	for i := range x {
		x[i] = float32(i % 7)
	}
	xb, out := newBuf(t, dev, 4*len(x)), newBuf(t, dev, 4*groups)
	putF32(xb, x)
	if _, err := run(t, dev, func(e mtl.ComputeEncoder) {
		e.SetPipeline(p)
		e.SetBuffer(xb, 0, 0)
		e.SetBuffer(out, 0, 1)
		e.SetThreadgroupMemoryLength(tpg/32*4, 0)
		e.DispatchThreadgroups([3]int{groups, 1, 1}, [3]int{tpg, 1, 1})
	}); err != nil {
		t.Fatal(err)
	}
	for g, v := range f32s(out.Contents()) {
		var want float32
		for i := 0; i < tpg; i++ {
			want += x[g*tpg+i]
		}
		if v != want {
			t.Fatalf("group %d: %v, want %v", g, v, want)
		}
	}
}

func TestCompileErrorsNameFileAndLine(t *testing.T) {
	dev := testDevice(t)
	for _, c := range []struct {
		files map[string]string
		want  string
	}{
		{map[string]string{"bad.metal": "#include <metal_stdlib>\nusing namespace metal;\n\nkernel void bad(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  x[i] = undefined_thing;\n}\n"}, "bad.metal:5:"},
		{map[string]string{"bad.metal": "#include <metal_stdlib>\n#include \"h.h\"\nkernel void ok(device float* x [[buffer(0)]]) { x[0] = 1; }\n", "h.h": "// header\nconstant float oops = nope;\n"}, "h.h:2:"},
		{map[string]string{"bad.metal": "#include <metal_stdlib>\n#include \"missing.h\"\n"}, "bad.metal:2:"},
	} {
		_, err := dev.NewLibrary(c.files, mtl.CompileOptions{})
		var ce *CompileError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want a CompileError with %q", err, c.want)
		}
	}
	// Two files defining one kernel, as the emulator rejects.
	src := "kernel void same(device float* x [[buffer(0)]]) { x[0] = 1; }\n"
	if _, err := dev.NewLibrary(map[string]string{"a.metal": src, "b.metal": src}, mtl.CompileOptions{}); err == nil || !strings.Contains(err.Error(), "kernel same is also defined in a.metal") {
		t.Errorf("duplicate kernel: %v", err)
	}
}

func TestEncodingErrors(t *testing.T) {
	dev := testDevice(t)
	p, err := testLibrary(t, dev).Pipeline("group_sum", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := newBuf(t, dev, 4096)
	_, err = run(t, dev, func(e mtl.ComputeEncoder) {
		e.SetPipeline(p)
		e.SetBuffer(b, 0, 0)
		e.SetBuffer(b, 0, 1)
		e.SetThreadgroupMemoryLength(64, 0)
		e.DispatchThreadgroups([3]int{1, 1, 1}, [3]int{4096, 1, 1})
	})
	if err == nil || !strings.Contains(err.Error(), "4096 threads per threadgroup exceed") {
		t.Errorf("too many threads: %v", err)
	}
	_, err = run(t, dev, func(e mtl.ComputeEncoder) { e.SetBytes(make([]byte, 5000), 0) })
	if err == nil || !strings.Contains(err.Error(), "SetBytes: 5000 bytes") {
		t.Errorf("big SetBytes: %v", err)
	}
	_, err = run(t, dev, func(e mtl.ComputeEncoder) { e.DispatchThreadgroups([3]int{1, 1, 1}, [3]int{1, 1, 1}) })
	if err == nil || !strings.Contains(err.Error(), "dispatch without SetPipeline") {
		t.Errorf("no pipeline: %v", err)
	}
}

func TestNoCopyBuffer(t *testing.T) {
	dev := testDevice(t)
	nc, ok := dev.(NoCopyDevice)
	if !ok {
		t.Fatal("the Metal device does not implement NoCopyDevice")
	}
	page := os.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	b, err := nc.NewBufferNoCopy(mem)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if _, err := nc.NewBufferNoCopy(mem[:page+1]); err == nil {
		t.Error("a length that is not a whole number of pages was accepted")
	}
	if _, err := nc.NewBufferNoCopy(mem[1 : page+1]); err == nil {
		t.Error("an unaligned address was accepted")
	}
	p, err := testLibrary(t, dev).Pipeline("axpb", mtl.FunctionConstants{0: false})
	if err != nil {
		t.Fatal(err)
	}
	n := 2 * page / 4 / 2
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(mem[4*i:], math.Float32bits(float32(i)))
	}
	// x is the first half of the mapping, y the second: the GPU writes
	// where the host reads.
	if _, err := run(t, dev, func(e mtl.ComputeEncoder) {
		e.SetPipeline(p)
		e.SetBuffer(b, 0, 0)
		e.SetBuffer(b, 4*n, 1)
		e.SetBytes(u32Bytes(uint32(n)), 3)
		e.DispatchThreads([3]int{n, 1, 1}, [3]int{256, 1, 1})
	}); err != nil {
		t.Fatal(err)
	}
	for i, v := range f32s(mem[4*n:]) {
		if want := float32(i) + 0.5; v != want {
			t.Fatalf("y[%d] = %v, want %v", i, v, want)
		}
	}
}

func TestTimedPasses(t *testing.T) {
	dev := testDevice(t)
	ti := dev.(TimingInfo)
	if ti.TimingMode() != TimingCounters {
		t.Skipf("timing mode %s (stage-boundary sampling %v)", ti.TimingMode(), ti.SupportsStageBoundaryCounters())
	}
	p, err := testLibrary(t, dev).Pipeline("axpb", mtl.FunctionConstants{0: false})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 22
	x, y := newBuf(t, dev, 4*n), newBuf(t, dev, 4*n)
	q, _ := dev.NewCommandQueue()
	for round := 0; round < 2; round++ { // the second reuses the sample buffer
		cb, _ := q.CommandBuffer()
		tcb := cb.(TimedCommandBuffer)
		for pass := 0; pass < 3; pass++ {
			e, err := tcb.TimedComputeEncoder()
			if err != nil {
				t.Fatal(err)
			}
			e.SetPipeline(p)
			e.SetBuffer(x, 0, 0)
			e.SetBuffer(y, 0, 1)
			e.SetBytes(u32Bytes(n), 3)
			e.DispatchThreads([3]int{n, 1, 1}, [3]int{256, 1, 1})
			e.End()
		}
		cb.Commit()
		if err := cb.Wait(); err != nil {
			t.Fatal(err)
		}
		times, err := tcb.PassTimes()
		if err != nil {
			t.Fatal(err)
		}
		start, end := cb.GPUTime()
		t.Logf("command buffer %.1f µs; passes %v", (end-start)*1e6, times)
		if len(times) != 3 {
			t.Fatalf("%d pass times", len(times))
		}
		const slack = 1e-3 // the two clocks are sampled, not shared
		// The GPU's ticks are converted at the rate the clock readings give
		// (calibrate): at a wrong rate, a 24 MHz tick taken as a nanosecond
		// say, the passes would come out 40 times too short or too long.
		// Each moves 32 MiB, which no Apple GPU does at 8 TB/s, and run one
		// after another inside the command buffer.
		const least = 8 * n / 8e12
		busy := 0.0
		for i, pt := range times {
			if pt.End < pt.Start || pt.Start < start-slack || pt.End > end+slack || i > 0 && pt.Start < times[i-1].Start {
				t.Errorf("pass %d at [%.6f, %.6f] outside the command buffer's [%.6f, %.6f] or out of order", i, pt.Start, pt.End, start, end)
			}
			if d := pt.End - pt.Start; d < least {
				t.Errorf("pass %d took %.2f µs, less than its 32 MiB take at 8 TB/s (%.2f µs)", i, d*1e6, least*1e6)
			}
			busy += pt.End - pt.Start
		}
		if span := end - start; busy > span*1.1+50e-6 {
			t.Errorf("the passes took %.1f µs in all, more than the command buffer's %.1f µs", busy*1e6, span*1e6)
		}
	}
}

// TestEmulatorKernelsCompile compiles the emulator's test kernels with
// Metal's own compiler: what the emulator accepts, Metal must accept too.
func TestEmulatorKernelsCompile(t *testing.T) {
	dev := testDevice(t)
	dir := filepath.Join("..", "emu", "testdata")
	common, err := os.ReadFile(filepath.Join(dir, "common.h"))
	if err != nil {
		t.Skipf("no emulator testdata: %v", err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.metal"))
	for _, path := range names {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(path)
		lib, err := dev.NewLibrary(map[string]string{name: string(src), "common.h": string(common)}, mtl.CompileOptions{LanguageVersion: "3.1"})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, k := range lib.FunctionNames() {
			if _, err := lib.Pipeline(k, mtl.FunctionConstants{0: true, 1: float32(1), 100: true, 101: int16(0)}); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

func BenchmarkEncodeCommitWait(b *testing.B) {
	dev := testDevice(b)
	p, err := testLibrary(b, dev).Pipeline("axpb", mtl.FunctionConstants{0: false})
	if err != nil {
		b.Fatal(err)
	}
	x, y := newBuf(b, dev, 4096), newBuf(b, dev, 4096)
	q, _ := dev.NewCommandQueue()
	args := u32Bytes(1024)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cb, _ := q.CommandBuffer()
		e, _ := cb.ComputeEncoder()
		for d := 0; d < 100; d++ { // a decode step is a few hundred dispatches
			e.SetPipeline(p)
			e.SetBuffer(x, 0, 0)
			e.SetBuffer(y, 0, 1)
			e.SetBytes(args, 3)
			e.DispatchThreadgroups([3]int{4, 1, 1}, [3]int{256, 1, 1})
		}
		e.End()
		cb.Commit()
		if err := cb.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGPUCores reads the GPU's core count from the IORegistry: every Apple
// silicon Mac publishes it, and its chip has a bin of that many cores.
func TestGPUCores(t *testing.T) {
	dev := testDevice(t)
	n := mtl.GPUCores(dev)
	if n <= 0 {
		t.Fatalf("GPUCores of %s = %d: the IORegistry's AGXAccelerator gpu-core-count was not read", dev.Name(), n)
	}
	if _, ok := applegpu.LookupCores(dev.Name(), n); !ok {
		t.Logf("%s has %d GPU cores, a bin bridge/mtl/applegpu's table lacks", dev.Name(), n)
	}
}
