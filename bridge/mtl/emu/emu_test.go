package emu_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// newDevice returns an emulated device, or skips the test when no clang 16+
// is installed.
func newDevice(t testing.TB, opts emu.Options) *emu.Device {
	t.Helper()
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	return emu.New(opts)
}

// checkBuild builds src as k.metal and holds it to what Metal does with
// it: where ok, a library; else a CompileError at k.metal:line whose text
// holds each of says.
func checkBuild(t *testing.T, dev *emu.Device, what, src string, opts mtl.CompileOptions, ok bool, line int, says ...string) {
	t.Helper()
	_, err := dev.NewLibrary(map[string]string{"k.metal": src}, opts)
	if ok {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		return
	}
	var ce *emu.CompileError
	at := fmt.Sprintf("k.metal:%d:", line)
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), at) {
		t.Errorf("%s: got %v, want a CompileError at %s", what, err, at)
		return
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: got %v, want it to say %q", what, err, s)
		}
	}
}

var (
	libMu   sync.Mutex
	libOnce = map[string]mtl.Library{}
)

// testLibrary compiles testdata files once per test binary (and once per
// machine, through the emulator's cache).
func testLibrary(t testing.TB, dev *emu.Device, names ...string) mtl.Library {
	t.Helper()
	key := fmt.Sprintf("%p %s", dev, strings.Join(names, ","))
	libMu.Lock()
	defer libMu.Unlock()
	if l := libOnce[key]; l != nil {
		return l
	}
	files := map[string]string{}
	for _, n := range append(names, "common.h") {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		files[n] = string(b)
	}
	l, err := dev.NewLibrary(files, mtl.CompileOptions{LanguageVersion: "3.1"})
	if err != nil {
		t.Fatal(err)
	}
	libOnce[key] = l
	return l
}

type arg struct {
	buf   mtl.Buffer
	bytes []byte
	tg    int
}

// encode encodes one dispatch with args bound at indices 0, 1, ... into a
// new command buffer, which it does not commit.
func encode(t testing.TB, dev *emu.Device, p mtl.Pipeline, groups, tpg [3]int, args ...arg) mtl.CommandBuffer {
	t.Helper()
	q, _ := dev.NewCommandQueue()
	cb, _ := q.CommandBuffer()
	enc, err := cb.ComputeEncoder()
	if err != nil {
		t.Fatal(err)
	}
	enc.SetPipeline(p)
	for i, a := range args {
		switch {
		case a.buf != nil:
			enc.SetBuffer(a.buf, 0, i)
		case a.bytes != nil:
			enc.SetBytes(a.bytes, i)
		case a.tg > 0:
			enc.SetThreadgroupMemoryLength(a.tg, 0)
		}
	}
	enc.DispatchThreadgroups(groups, tpg)
	enc.End()
	return cb
}

// run encodes one dispatch with args bound at indices 0, 1, ... and waits.
func run(t testing.TB, dev *emu.Device, p mtl.Pipeline, groups, tpg [3]int, args ...arg) error {
	t.Helper()
	cb := encode(t, dev, p, groups, tpg, args...)
	cb.Commit()
	return cb.Wait()
}

// runWithin runs one dispatch of kernel name of lib as run does and returns
// its error, and fails the test where it has not returned within limit (a
// kernel the time limit did not stop).
func runWithin(t *testing.T, limit time.Duration, dev *emu.Device, lib mtl.Library, name string, groups, tpg [3]int, args ...arg) error {
	t.Helper()
	p := pipe(t, lib, name, nil)
	errc := make(chan error, 1)
	go func() { errc <- run(t, dev, p, groups, tpg, args...) }()
	select {
	case err := <-errc:
		return err
	case <-time.After(limit):
		t.Fatalf("%s: the dispatch still runs after %v", name, limit)
		return nil
	}
}

// newLibrary builds src as k.metal with the default options.
func newLibrary(t testing.TB, dev *emu.Device, src string) mtl.Library {
	t.Helper()
	lib, err := dev.NewLibrary(map[string]string{"k.metal": src}, mtl.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

// caseLibrary builds head and a kernel for each of n cases, named k0, k1,
// ..., as kernel writes it (a blank line for a case with none), into one
// library: each library loaded maps its own fiber stacks.
func caseLibrary(t testing.TB, dev *emu.Device, head string, n int, kernel func(name string, j int) string) mtl.Library {
	t.Helper()
	src := head
	for j := range n {
		src += kernel(fmt.Sprintf("k%d", j), j)
	}
	return newLibrary(t, dev, src)
}

// runCase runs case j's kernel of a caseLibrary on one threadgroup of the
// given number of threads, with args bound as run binds them.
func runCase(t testing.TB, dev *emu.Device, lib mtl.Library, j, threads int, args ...arg) error {
	t.Helper()
	return run(t, dev, pipe(t, lib, fmt.Sprintf("k%d", j), nil), [3]int{1, 1, 1}, [3]int{threads, 1, 1}, args...)
}

// elementCase is a kernel body over x[i], which holds i when it starts,
// and the value it leaves there.
type elementCase struct {
	body string
	want func(i int) float32
}

// runElementCases runs each body as a kernel of one float buffer
// (runBodies) and checks what it leaves.
func runElementCases(t *testing.T, dev *emu.Device, head string, cases []elementCase) {
	t.Helper()
	bodies := make([]string, len(cases))
	for j, c := range cases {
		bodies[j] = c.body
	}
	runBodies(t, dev, head, "device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]", bodies, 1,
		func(j, i int) float32 { return cases[j].want(i) })
}

// runBodies builds, after head, a kernel of params for each body, runs
// each on one threadgroup of 32 threads with each of its nbufs buffers
// holding 0, 1, ..., 31, and holds x, the first, to want(j, i) for body j.
func runBodies(t *testing.T, dev *emu.Device, head, params string, bodies []string, nbufs int, want func(j, i int) float32) {
	t.Helper()
	lib := caseLibrary(t, dev, head, len(bodies), func(name string, j int) string {
		return fmt.Sprintf("kernel void %s(%s) { %s; }\n", name, params, bodies[j])
	})
	for j, body := range bodies {
		args := make([]arg, nbufs)
		for k := range args {
			args[k] = arg{buf: iotaBuf(t, dev, 32)}
		}
		if err := runCase(t, dev, lib, j, 32, args...); err != nil {
			t.Errorf("%s: %v", body, err)
			continue
		}
		for i, v := range f32s(args[0].buf) {
			if w := want(j, i); v != w {
				t.Errorf("%s: x[%d] = %v, want %v", body, i, v, w)
				break
			}
		}
	}
}

// iotaBuf is a buffer of the floats 0, 1, ..., n-1.
func iotaBuf(t testing.TB, dev *emu.Device, n int) mtl.Buffer {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)
	}
	return f32Buf(t, dev, v)
}

func pipe(t testing.TB, l mtl.Library, name string, fc mtl.FunctionConstants) mtl.Pipeline {
	t.Helper()
	p, err := l.Pipeline(name, fc)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newBuf(t testing.TB, dev *emu.Device, n int) mtl.Buffer {
	t.Helper()
	b, err := dev.NewBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

func f32Buf(t testing.TB, dev *emu.Device, v []float32) mtl.Buffer {
	b := newBuf(t, dev, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b.Contents()[4*i:], math.Float32bits(x))
	}
	return b
}

func u32Buf(t testing.TB, dev *emu.Device, v []uint32) mtl.Buffer {
	b := newBuf(t, dev, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b.Contents()[4*i:], x)
	}
	return b
}

func f16Buf(t testing.TB, dev *emu.Device, v []float32) mtl.Buffer {
	b := newBuf(t, dev, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b.Contents()[2*i:], f32ToF16(x))
	}
	return b
}

func f32s(b mtl.Buffer) []float32 {
	c := b.Contents()
	out := make([]float32, len(c)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(c[4*i:]))
	}
	return out
}

func u32s(b mtl.Buffer) []uint32 {
	c := b.Contents()
	out := make([]uint32, len(c)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(c[4*i:])
	}
	return out
}

func f16s(b mtl.Buffer) []float32 {
	c := b.Contents()
	out := make([]float32, len(c)/2)
	for i := range out {
		out[i] = f16ToF32(binary.LittleEndian.Uint16(c[2*i:]))
	}
	return out
}

func u32Bytes(v ...uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

// f32ToF16 rounds to nearest even; the tests use normal values only.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	man := b & 0x7fffff
	if f == 0 {
		return sign
	}
	if exp <= 0 || exp >= 31 {
		panic("f32ToF16: out of the normal half range")
	}
	h := uint32(exp)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++
	}
	return sign | uint16(h)
}

func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		return float32(math.Ldexp(float64(man), -24)) * float32(1-2*int(h>>15))
	case exp == 31:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

func rmsInputs(rows, dim int) (x, w []float32) {
	x = make([]float32, rows*dim)
	w = make([]float32, dim)
	for i := range x {
		x[i] = f16ToF32(f32ToF16(float32(i%17)*0.1 - 0.8))
	}
	for i := range w {
		w[i] = float32(1 + float64(i%3)*0.5)
	}
	return x, w
}

func TestRMSNorm(t *testing.T) {
	for _, workers := range []int{1, 0} {
		dev := newDevice(t, emu.Options{Workers: workers})
		p := pipe(t, testLibrary(t, dev, "reduce.metal"), "rms_norm", nil)
		const rows, dim = 64, 4096
		x, w := rmsInputs(rows, dim)
		out := newBuf(t, dev, 2*rows*dim)
		args := u32Bytes(dim, math.Float32bits(1e-6))
		for _, tpg := range []int{256, 1024} {
			start := time.Now()
			err := run(t, dev, p, [3]int{rows, 1, 1}, [3]int{tpg, 1, 1},
				arg{buf: f16Buf(t, dev, x)}, arg{buf: f32ToF16Buf(t, dev, w)}, arg{buf: out}, arg{bytes: args})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("rms_norm %dx%d, %d threads per group, workers %d: %v", rows, dim, tpg, workers, time.Since(start))
			got := f16s(out)
			for r := 0; r < rows; r++ {
				var ss float64
				for i := 0; i < dim; i++ {
					ss += float64(x[r*dim+i]) * float64(x[r*dim+i])
				}
				inv := 1 / math.Sqrt(ss/dim+1e-6)
				for i := 0; i < dim; i++ {
					want := float64(x[r*dim+i]) * inv * float64(w[i])
					if d := math.Abs(want - float64(got[r*dim+i])); d > 2e-3*math.Max(1, math.Abs(want)) {
						t.Fatalf("row %d col %d: got %v, want %v", r, i, got[r*dim+i], want)
					}
				}
			}
		}
		if n := p.StaticThreadgroupMemoryLength(); n != 128 {
			t.Errorf("StaticThreadgroupMemoryLength = %d, want 128", n)
		}
	}
}

func f32ToF16Buf(t testing.TB, dev *emu.Device, v []float32) mtl.Buffer { return f16Buf(t, dev, v) }

func TestSimdOps(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	p := pipe(t, testLibrary(t, dev, "reduce.metal"), "simd_ops", nil)
	const n = 128
	in := make([]float32, n)
	for i := range in {
		in[i] = float32((i*37)%23) - 11
	}
	out := newBuf(t, dev, 4*8*n)
	if err := run(t, dev, p, [3]int{2, 1, 1}, [3]int{64, 1, 1}, arg{buf: f32Buf(t, dev, in)}, arg{buf: out}); err != nil {
		t.Fatal(err)
	}
	got := f32s(out)
	for sg := 0; sg < n/32; sg++ {
		v := in[sg*32 : sg*32+32]
		var sum float32
		mx, mn := v[0], v[0]
		pos := 0
		for _, x := range v {
			sum += x
			mx = max(mx, x)
			mn = min(mn, x)
			if x > 0 {
				pos++
			}
		}
		for l := 0; l < 32; l++ {
			down, up := v[l], v[l]
			if l+1 < 32 {
				down = v[l+1]
			}
			if l >= 2 {
				up = v[l-2]
			}
			want := []float32{sum, sum, mx, mn, v[3], down, up, float32(pos)}
			o := got[(sg*32+l)*8 : (sg*32+l)*8+8]
			for k := range want {
				if o[k] != want[k] {
					t.Fatalf("simdgroup %d lane %d op %d: got %v, want %v", sg, l, k, o[k], want[k])
				}
			}
		}
	}
}

func TestPrefixSum(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	p := pipe(t, testLibrary(t, dev, "reduce.metal"), "scan", nil)
	const groups, tpg = 4, 256
	in := make([]uint32, groups*tpg)
	for i := range in {
		in[i] = uint32(i*7) % 13
	}
	out := newBuf(t, dev, 4*len(in))
	if err := run(t, dev, p, [3]int{groups, 1, 1}, [3]int{tpg, 1, 1}, arg{buf: u32Buf(t, dev, in)}, arg{buf: out}); err != nil {
		t.Fatal(err)
	}
	got := u32s(out)
	for g := 0; g < groups; g++ {
		var acc uint32
		for i := 0; i < tpg; i++ {
			if got[g*tpg+i] != acc {
				t.Fatalf("group %d element %d: got %d, want %d", g, i, got[g*tpg+i], acc)
			}
			acc += in[g*tpg+i]
		}
	}
}

func TestAtomics(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	p := pipe(t, testLibrary(t, dev, "reduce.metal"), "histogram", nil)
	const n = 1000
	in := make([]uint32, n)
	var want [16]uint32
	var total float32
	for i := range in {
		in[i] = uint32(i*7) % 50
		want[in[i]%16]++
		total += float32(in[i])
	}
	hist := newBuf(t, dev, 64)
	tot := newBuf(t, dev, 4)
	q, _ := dev.NewCommandQueue()
	cb, _ := q.CommandBuffer()
	enc, _ := cb.ComputeEncoder()
	enc.SetPipeline(p)
	enc.SetBuffer(u32Buf(t, dev, in), 0, 0)
	enc.SetBuffer(hist, 0, 1)
	enc.SetBytes(u32Bytes(n), 2)
	enc.SetBuffer(tot, 0, 3)
	enc.DispatchThreads([3]int{n, 1, 1}, [3]int{128, 1, 1}) // the last group has 104 threads
	enc.End()
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := u32s(hist); [16]uint32(got) != want {
		t.Errorf("histogram %v, want %v", got, want)
	}
	if got := f32s(tot)[0]; got != total {
		t.Errorf("total %v, want %v", got, total)
	}
	if s, e := cb.GPUTime(); !(e >= s && s > 0) {
		t.Errorf("GPUTime %v, %v", s, e)
	}
}

func TestDynamicThreadgroupMemory(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	p := pipe(t, testLibrary(t, dev, "reduce.metal"), "tg_reverse", nil)
	const groups, tpg = 3, 96
	in := make([]float32, groups*tpg)
	for i := range in {
		in[i] = float32(i)
	}
	out := newBuf(t, dev, 4*len(in))
	if err := run(t, dev, p, [3]int{groups, 1, 1}, [3]int{tpg, 1, 1}, arg{buf: f32Buf(t, dev, in)}, arg{buf: out}, arg{tg: 4 * tpg}); err != nil {
		t.Fatal(err)
	}
	got := f32s(out)
	for g := 0; g < groups; g++ {
		for i := 0; i < tpg; i++ {
			if want := float32(g*tpg + tpg - 1 - i); got[g*tpg+i] != want {
				t.Fatalf("out[%d] = %v, want %v", g*tpg+i, got[g*tpg+i], want)
			}
		}
	}
	err := run(t, dev, p, [3]int{groups, 1, 1}, [3]int{tpg, 1, 1}, arg{buf: f32Buf(t, dev, in)}, arg{buf: out})
	if err == nil || !strings.Contains(err.Error(), "threadgroup(0) 'buf' has no memory") {
		t.Errorf("dispatch without threadgroup memory: %v", err)
	}
	// A length at an index the kernel does not declare (left by an earlier
	// dispatch) takes no memory from it, as on Metal.
	q, _ := dev.NewCommandQueue()
	cb, _ := q.CommandBuffer()
	enc, _ := cb.ComputeEncoder()
	enc.SetPipeline(p)
	enc.SetBuffer(f32Buf(t, dev, in), 0, 0)
	enc.SetBuffer(out, 0, 1)
	enc.SetThreadgroupMemoryLength(32<<10, 5)
	enc.SetThreadgroupMemoryLength(4*tpg, 0)
	enc.DispatchThreadgroups([3]int{groups, 1, 1}, [3]int{tpg, 1, 1})
	enc.End()
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Errorf("a 32 KiB length at an index the kernel does not declare: %v", err)
	}
	if st := cb.(mtl.CostWitness).DispatchStats(); len(st) != 1 || st[0].ThreadgroupMemory != 4*tpg {
		t.Errorf("witness: %+v, want %d bytes of threadgroup memory", st, 4*tpg)
	}
}

func TestVectorConversions(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	p := pipe(t, testLibrary(t, dev, "reduce.metal"), "vec_ops", nil)
	in := []float32{1.7, -2.5, 0.25, 3, -0.5, 4.9, -1.25, 0.75}
	out := newBuf(t, dev, 4*len(in))
	if err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: f32Buf(t, dev, in)}, arg{buf: out}); err != nil {
		t.Fatal(err)
	}
	got := f32s(out)
	for v := 0; v < 2; v++ {
		x := in[4*v : 4*v+4]
		var iv, r [4]float32
		for i := range iv {
			iv[i] = float32(math.Trunc(float64(x[i])))
		}
		r = [4]float32{iv[0], iv[1], 2 * x[2], 2 * x[3]}
		for i := range r {
			if x[i] < 0 {
				r[i] = 0.5
			}
		}
		r[3] = max(-1, min(1, r[3]))
		for i := range r {
			if want := r[i] + 1 + iv[i]; got[4*v+i] != want {
				t.Errorf("vector %d component %d: got %v, want %v", v, i, got[4*v+i], want)
			}
		}
	}
}

func matmulRef(a, b []float32, m, n, k int) []float32 {
	c := make([]float32, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float32
			for l := 0; l < k; l++ {
				s += a[i*k+l] * b[l*n+j]
			}
			c[i*n+j] = s
		}
	}
	return c
}

func TestSimdgroupMatrix(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "matmul.metal")
	const m, n, k = 32, 48, 24
	a := make([]float32, m*k)
	b := make([]float32, k*n)
	for i := range a {
		a[i] = float32((i*5)%9-4) / 4 // exact in half
	}
	for i := range b {
		b[i] = float32((i*3)%7-3) / 2
	}
	want := matmulRef(a, b, m, n, k)
	dims := u32Bytes(m, n, k)

	c := newBuf(t, dev, 4*m*n)
	err := run(t, dev, pipe(t, lib, "matmul8", nil), [3]int{n / 8, m / 8, 1}, [3]int{32, 1, 1},
		arg{buf: f16Buf(t, dev, a)}, arg{buf: f16Buf(t, dev, b)}, arg{buf: c}, arg{bytes: dims})
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range f32s(c) {
		if g != want[i] {
			t.Fatalf("matmul8: C[%d] = %v, want %v", i, g, want[i])
		}
	}

	bt := make([]float32, n*k) // B transposed: N x K
	for l := 0; l < k; l++ {
		for j := 0; j < n; j++ {
			bt[j*k+l] = b[l*n+j]
		}
	}
	c2 := newBuf(t, dev, 4*m*n)
	err = run(t, dev, pipe(t, lib, "matmul16_tg", nil), [3]int{n / 16, m / 16, 1}, [3]int{128, 1, 1},
		arg{buf: f32Buf(t, dev, a)}, arg{buf: f32Buf(t, dev, bt)}, arg{buf: c2}, arg{bytes: dims})
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range f32s(c2) {
		if g != 2*want[i] {
			t.Fatalf("matmul16_tg: C[%d] = %v, want %v", i, g, 2*want[i])
		}
	}
}

func TestFunctionConstants(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "matmul.metal")
	x := []float32{1, 2, 3, 4}
	bias := []float32{10, 20, 30, 40}
	y := newBuf(t, dev, 16)

	pb := pipe(t, lib, "axpb", mtl.FunctionConstants{0: true, 1: float32(3)})
	if err := run(t, dev, pb, [3]int{1, 1, 1}, [3]int{4, 1, 1}, arg{buf: f32Buf(t, dev, x)}, arg{buf: y}, arg{buf: f32Buf(t, dev, bias)}); err != nil {
		t.Fatal(err)
	}
	if got := f32s(y); got[0] != 13 || got[3] != 52 {
		t.Errorf("with bias and scale: %v", got)
	}
	// Without the bias the buffer need not be bound; without scale, the
	// derived constant has_scale is false.
	pn := pipe(t, lib, "axpb", mtl.FunctionConstants{0: false})
	if err := run(t, dev, pn, [3]int{1, 1, 1}, [3]int{4, 1, 1}, arg{buf: f32Buf(t, dev, x)}, arg{buf: y}); err != nil {
		t.Fatal(err)
	}
	if got := f32s(y); got[0] != 1 || got[3] != 4 {
		t.Errorf("plain: %v", got)
	}
	if again := pipe(t, lib, "axpb", mtl.FunctionConstants{0: false}); again != pn {
		t.Error("the pipeline was not cached")
	}
	if _, err := lib.Pipeline("axpb", nil); err == nil || !strings.Contains(err.Error(), "needs function constant 0 (bool has_bias") {
		t.Errorf("missing constant: %v", err)
	}
	if _, err := lib.Pipeline("axpb", mtl.FunctionConstants{0: int32(1)}); err == nil || !strings.Contains(err.Error(), "cannot take int32") {
		t.Errorf("wrong type: %v", err)
	}
}

func TestTemplateHostNames(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "matmul.metal")
	names := strings.Join(lib.FunctionNames(), " ")
	for _, n := range []string{"add_f32", "add_f16", "add_i32"} {
		if !strings.Contains(names, n) {
			t.Errorf("FunctionNames %q lacks %s", names, n)
		}
	}
	a, b := []float32{1, 2.5, -3, 4}, []float32{0.5, 0.5, 1, -8}
	c := newBuf(t, dev, 16)
	if err := run(t, dev, pipe(t, lib, "add_f32", nil), [3]int{1, 1, 1}, [3]int{4, 1, 1}, arg{buf: f32Buf(t, dev, a)}, arg{buf: f32Buf(t, dev, b)}, arg{buf: c}); err != nil {
		t.Fatal(err)
	}
	if got := f32s(c); got[1] != 3 || got[3] != -4 {
		t.Errorf("add_f32: %v", got)
	}
	h := newBuf(t, dev, 8)
	if err := run(t, dev, pipe(t, lib, "add_f16", nil), [3]int{1, 1, 1}, [3]int{4, 1, 1}, arg{buf: f16Buf(t, dev, a)}, arg{buf: f16Buf(t, dev, b)}, arg{buf: h}); err != nil {
		t.Fatal(err)
	}
	if got := f16s(h); got[1] != 3 || got[2] != -2 {
		t.Errorf("add_f16: %v", got)
	}
	ci := newBuf(t, dev, 16)
	if err := run(t, dev, pipe(t, lib, "add_i32", nil), [3]int{1, 1, 1}, [3]int{4, 1, 1}, arg{buf: u32Buf(t, dev, []uint32{1, 2, 3, 4})}, arg{buf: u32Buf(t, dev, []uint32{10, 20, 30, 1 << 31})}, arg{buf: ci}); err != nil {
		t.Fatal(err)
	}
	if got := u32s(ci); got[0] != 11 || got[3] != 1<<31+4 {
		t.Errorf("add_i32: %v", got)
	}
}

func wantExecError(t *testing.T, err error, parts ...string) {
	t.Helper()
	var ee *emu.ExecutionError
	if !errors.As(err, &ee) {
		t.Fatalf("got %v, want an ExecutionError", err)
	}
	if !strings.HasPrefix(ee.Msg, "kernel "+ee.Kernel+": ") {
		t.Errorf("ExecutionError.Kernel %q does not match %q", ee.Kernel, ee.Msg)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q lacks %q", err, p)
		}
	}
}

func TestRaceReported(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	p := pipe(t, testLibrary(t, dev, "faults.metal"), "racy_sum", nil)
	in := make([]float32, 128)
	out := newBuf(t, dev, 4)
	err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{128, 1, 1}, arg{buf: f32Buf(t, dev, in)}, arg{buf: out})
	wantExecError(t, err, "kernel racy_sum: threadgroup memory race on 'partial'", "missing threadgroup_barrier")
	t.Log(err)

	quiet := emu.New(emu.Options{NoRaceCheck: true})
	p = pipe(t, testLibrary(t, quiet, "faults.metal"), "racy_sum", nil)
	if err := run(t, quiet, p, [3]int{1, 1, 1}, [3]int{128, 1, 1}, arg{buf: f32Buf(t, quiet, in)}, arg{buf: out}); err != nil {
		t.Errorf("with NoRaceCheck: %v", err)
	}
}

func TestOutOfBoundsWrite(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	p := pipe(t, testLibrary(t, dev, "faults.metal"), "oob_write", nil)
	out := newBuf(t, dev, 400)
	err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{128, 1, 1}, arg{buf: out})
	wantExecError(t, err, "kernel oob_write: out-of-bounds access to buffer(0) 'out': bytes [400, 404) of a 400-byte binding")
	t.Log(err)
}

func TestDivergentBarrier(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	p := pipe(t, testLibrary(t, dev, "faults.metal"), "early_exit", nil)
	out := newBuf(t, dev, 512)
	err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{128, 1, 1}, arg{buf: out})
	wantExecError(t, err, "kernel early_exit: threadgroup_barrier at faults.metal:", "reached by 96 of 128 threads (divergent barrier")
	t.Log(err)
}

func TestCompileErrors(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	for _, c := range []struct {
		src, want string
	}{
		{"#include <metal_stdlib>\nusing namespace metal;\n\nkernel void bad(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  x[i] = undefined_thing;\n}\n", "bad.metal:5:"},
		{"#include <metal_stdlib>\nusing namespace metal;\nkernel void tex(texture2d<float> t [[texture(0)]]) {}\n", "bad.metal:3: parameter t: [[texture]] is not supported"},
		{"#include <metal_stdlib>\n#include \"missing.h\"\n", "bad.metal:2:10: fatal error: 'missing.h' file not found"},
	} {
		_, err := dev.NewLibrary(map[string]string{"bad.metal": c.src}, mtl.CompileOptions{})
		var ce *emu.CompileError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want a CompileError with %q", err, c.want)
		}
	}
}

// TestBuildTimeout holds a library's build to Options.BuildTimeout: clang
// stopped at the limit failed the build with "signal: killed" alone, which
// named neither the limit nor the step it stopped (a library as large as
// llama.cpp's compiles for longer than the default on two cores).
func TestBuildTimeout(t *testing.T) {
	for _, c := range []struct {
		limit time.Duration
		want  string
	}{
		{time.Nanosecond, "msl-emu: clang did not finish preprocessing slow.metal within 1ns (Options.BuildTimeout"},
	} {
		dev := newDevice(t, emu.Options{BuildTimeout: c.limit})
		// A kernel of its own: a library in the cache is not rebuilt.
		src := "kernel void build_timeout_k(device float* x [[buffer(0)]]) { x[0] = 1; }\n"
		_, err := dev.NewLibrary(map[string]string{"slow.metal": src}, mtl.CompileOptions{})
		var ce *emu.CompileError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("limit %v: got %v, want a CompileError with %q", c.limit, err, c.want)
		}
	}
}

// Metal's min, max, clamp and the other functions the specification
// declares as T f(T x, T y) (fmax, fmin, pow, fmod, mix, step, ...) take
// arguments of one type: Apple's compiler rejects min(uint, int) or
// max(half, float), which C++'s promotions would accept, so the emulator
// rejects them too instead of building a kernel no Mac builds
// (docs/msl-subset.md). The two-argument float functions have a float and a
// half overload alone, so an integer goes with the other argument's type:
// llama.cpp's kernels call pow(float, short). A vector with scalar bounds
// stays.
func TestMixedTypeArguments(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = "#include <metal_stdlib>\nusing namespace metal;\n\nkernel void k(device float* x [[buffer(0)]], constant uint& n [[buffer(1)]], uint i [[thread_position_in_grid]]) {\n  const half h = half(x[i]);\n  const float4 v = float4(x[i]);\n  x[i] = float(%s);\n}\n"
	for _, c := range []struct {
		expr string
		ok   bool
	}{
		{"min(n, 4u)", true},
		{"max(uint(n), uint(i))", true},
		{"clamp(n, 1u, 8u)", true},
		{"max(h, half(1))", true},
		{"min(v, 2.0f).x", true},
		{"min(n, 4)", false},
		{"max(n, i + 1)", true},
		{"max(int(n), i)", false},
		{"min(h, 1.0f)", false},
		{"clamp(n, 1, 8)", false},
		{"clamp(x[i], 0, 1.0f)", false},
		{"fmax(x[i], 0.0f)", true},
		{"fmin(h, half(1))", true},
		{"pow(x[i], 2.0f)", true},
		{"fmax(v, 0.0f).x", true},
		{"fmax(0, v).x", true},
		{"fmin(1.0f, v).y", true},
		{"mix(v, v, 0.5f).x", true},
		{"mix(h, h, half(0.5f))", true},
		{"smoothstep(0.0f, 1.0f, x[i])", true},
		{"fmax(x[i], 0)", true},
		{"pow(x[i], short(i))", true},
		{"fmin(h, 1)", true},
		{"pow(2, 3)", false},
		{"fmin(h, x[i])", false},
		{"pow(x[i], 2)", true},
		{"fmod(float(n), n)", true},
		{"fmod(h, float(n))", false},
		{"atan2(h, 1.0f)", false},
		{"copysign(x[i], h)", false},
		{"step(h, 1.0f)", false},
		{"mix(h, h, 0.5f)", false},
		{"mix(x[i], 1.0f, h)", false},
		{"smoothstep(0.0f, 1.0f, h)", false},
	} {
		checkBuild(t, dev, c.expr, fmt.Sprintf(src, c.expr), mtl.CompileOptions{}, c.ok, 7)
	}
}

// An integer division or remainder by zero traps on the CPU, which ended
// the process; a GPU does not trap. The dispatch fails naming the line (a
// helper's for a division in it) and the thread, and a division by a value
// that is not zero runs.
func TestIntegerDivisionByZero(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = `#include <metal_stdlib>
using namespace metal;
int quot(int a, int b) { return a / b; }
kernel void div(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[i] = x[i] / x[i + 2];
}
kernel void rem(device uint* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[i] = x[i] % uint(x[i + 2]);
}
kernel void helper(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[i] = quot(x[i], x[i + 2]);
}
kernel void barriers(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const int q = x[i] / x[i + 2];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  x[i] = q;
}
`
	lib := newLibrary(t, dev, src)
	for _, c := range []struct {
		kernel string
		line   int
	}{{"div", 5}, {"rem", 8}, {"helper", 3}, {"barriers", 15}} {
		// Thread 0 divides 7 by 1, thread 1 divides 9 by 0.
		b := u32Buf(t, dev, []uint32{7, 9, 1, 0})
		err := run(t, dev, pipe(t, lib, c.kernel, nil), [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: b})
		var ee *emu.ExecutionError
		want := fmt.Sprintf("kernel %s: integer division by zero at k.metal:%d", c.kernel, c.line)
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "thread (1,0,0)") {
			t.Errorf("%s: got %v, want an ExecutionError saying %q of thread (1,0,0)", c.kernel, err, want)
		}
		b = u32Buf(t, dev, []uint32{7, 9, 2, 4})
		if err := run(t, dev, pipe(t, lib, c.kernel, nil), [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: b}); err != nil {
			t.Errorf("%s over 2 and 4: %v", c.kernel, err)
		} else if got := u32s(b)[:2]; got[0] != 7/2 && got[0] != 7%2 || got[1] != 9/4 && got[1] != 9%4 {
			t.Errorf("%s over 2 and 4: %v", c.kernel, got)
		}
	}
}

// An integer vector divided or taken the remainder of with a lane of 0,
// and the lowest value over -1 (scalar or lane), trapped on the CPU and
// ended the process, where a GPU gives a value: the dispatch fails naming
// the line, the lane and the thread, and values that divide run as C++
// divides them; a compound assignment's left side that cannot be read
// twice (`x[2 * min(i, 1u)]`, `s.a[bump(n, 0)]`, a member or component
// of a call's result or of an element a call indexes, `at(s, n).v`,
// `x[2 * bump(n, i)].y`, `*ptr_at(p, n)` and a conditional's) runs once
// and is checked alike.
func TestIntegerDivisionTraps(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = `#include <metal_stdlib>
using namespace metal;
kernel void vdiv(device int4* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[2 * i] = x[2 * i] / x[2 * i + 1];
}
kernel void vrem(device uint4* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[2 * i] = x[2 * i] % x[2 * i + 1];
}
kernel void vscalar(device int4* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[2 * i] = x[2 * i] / x[2 * i + 1].w;
}
kernel void sdiv(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[8 * i] = x[8 * i] / x[8 * i + 4];
}
kernel void srem(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[8 * i] = x[8 * i] % x[8 * i + 4];
}
kernel void ldiv(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  const long a = long(x[8 * i]) << 32;
  x[8 * i] = int((a / long(x[8 * i + 4])) >> 32);
}
kernel void vassign(device int4* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int4 v = x[2 * i];
  v /= x[2 * i + 1];
  x[2 * i] = v;
}
kernel void sassign(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[8 * i] %= x[8 * i + 4];
}
kernel void lane(device int4* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int4 v = x[2 * i];
  v.y /= x[2 * i + 1].y;
  x[2 * i] = v;
}
kernel void opaque(device int4* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[2 * min(i, 1u)] /= x[2 * i + 1];
}
kernel void mixed(device int4* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  const float4 f = float4(x[2 * i]) / float4(x[2 * i + 1]);
  const short4 s = short4(x[2 * i]) / short4(x[2 * i + 1]);
  x[2 * i] = int4(f) + int4(s) - x[2 * i] / x[2 * i + 1];
}
kernel void deref(device int4* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int4 v = x[2 * i];
  thread int4* p = &v;
  *p /= x[2 * i + 1];
  x[2 * i] = v;
}
struct S { int a[2]; };
int bump(thread int& n, int k) { n++; return k; }
kernel void member(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  S s = {{x[8 * i], 0}};
  int n = 0;
  s.a[bump(n, 0)] %= x[8 * i + 4];
  x[8 * i] = s.a[0];
  x[8 * i + 1] = n;
}
kernel void dmember(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int n = 0;
  x[8 * bump(n, i)] /= x[8 * i + 4];
  x[8 * i + 1] = n;
}
kernel void velem(device int4* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int4 v = x[2 * i];
  int n = 0;
  v[bump(n, 1)] /= x[2 * i + 1].y;
  v.x += n - 1;
  x[2 * i] = v;
}
kernel void call_member(device int4* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int n = 0;
  x[2 * bump(n, i)].y /= x[2 * i + 1].y;
  x[2 * i].z = n;
}
struct T { int4 v; int x; };
kernel void call_field(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  T s[1] = {{int4(0), x[8 * i]}};
  int n = 0;
  s[bump(n, 0)].x %= x[8 * i + 4];
  x[8 * i] = s[0].x;
  x[8 * i + 1] = n;
}
thread T& at(thread T* t, thread int& n) { n++; return *t; }
kernel void call_ref(device int4* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  T s[1] = {{x[2 * i], 0}};
  int n = 0;
  at(s, n).v /= x[2 * i + 1];
  s[0].v.w += n - 1;
  x[2 * i] = s[0].v;
}
device int* ptr_at(device int* p, thread int& n) { n++; return p; }
kernel void call_deref(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int n = 0;
  *ptr_at(x + 8 * i, n) /= x[8 * i + 4];
  x[8 * i + 1] = n;
}
kernel void cond(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int b = 100;
  (i < 2 ? x[8 * i] : b) /= x[8 * i + 4];
}
`
	lib := newLibrary(t, dev, src)
	const minInt = -1 << 31
	// Thread 0 divides good by good; thread 1 divides bad by bad.
	good := [8]int32{7, -9, 100, minInt, 2, 3, -7, 1}
	zero := [8]int32{1, 2, 3, 4, 1, 1, 0, 0}
	over := [8]int32{minInt, minInt, 3, 4, -1, -1, 1, -1}
	for _, c := range []struct {
		kernel, want string
		bad          [8]int32
		out          [4]int32 // thread 0's
	}{
		{"vdiv", "integer division by zero in lane 2 at k.metal:4", zero, [4]int32{3, -3, -14, minInt}},
		{"vdiv", "integer division overflow in lane 0: -2147483648 / -1 at k.metal:4", over, [4]int32{3, -3, -14, minInt}},
		{"vrem", "integer division by zero in lane 2 at k.metal:7", zero, [4]int32{1, int32(uint32(1<<32-9) % 3), 100, 0}},
		{"vscalar", "integer division by zero in lane 0 at k.metal:10", zero, [4]int32{7, -9, 100, minInt}},
		{"vscalar", "integer division overflow in lane 0: -2147483648 / -1 at k.metal:10", over, [4]int32{7, -9, 100, minInt}},
		{"sdiv", "integer division overflow: -2147483648 / -1 at k.metal:13", over, [4]int32{3, -9, 100, minInt}},
		{"srem", "integer division overflow: -2147483648 % -1 at k.metal:16", over, [4]int32{1, -9, 100, minInt}},
		{"ldiv", "integer division overflow: -9223372036854775808 / -1 at k.metal:20", over, [4]int32{3, -9, 100, minInt}},
		{"vassign", "integer division by zero in lane 2 at k.metal:24", zero, [4]int32{3, -3, -14, minInt}},
		{"vassign", "integer division overflow in lane 0: -2147483648 / -1 at k.metal:24", over, [4]int32{3, -3, -14, minInt}},
		{"sassign", "integer division overflow: -2147483648 % -1 at k.metal:28", over, [4]int32{1, -9, 100, minInt}},
		{"lane", "integer division overflow: -2147483648 / -1 at k.metal:32", over, [4]int32{7, -3, 100, minInt}},
		{"opaque", "integer division by zero in lane 2 at k.metal:36", zero, [4]int32{3, -3, -14, minInt}},
		{"opaque", "integer division overflow in lane 0: -2147483648 / -1 at k.metal:36", over, [4]int32{3, -3, -14, minInt}},
		{"member", "integer division overflow: -2147483648 % -1 at k.metal:54", over, [4]int32{1, 1, 100, minInt}},
		{"dmember", "integer division overflow: -2147483648 / -1 at k.metal:60", over, [4]int32{3, 1, 100, minInt}},
		{"velem", "integer division overflow: -2147483648 / -1 at k.metal:66", over, [4]int32{7, -3, 100, minInt}},
		{"call_member", "integer division overflow: -2147483648 / -1 at k.metal:72", over, [4]int32{7, -3, 1, minInt}},
		{"call_field", "integer division overflow: -2147483648 % -1 at k.metal:79", over, [4]int32{1, 1, 100, minInt}},
		{"call_ref", "integer division overflow in lane 0: -2147483648 / -1 at k.metal:87", over, [4]int32{3, -3, -14, minInt}},
		{"call_ref", "integer division by zero in lane 2 at k.metal:87", zero, [4]int32{3, -3, -14, minInt}},
		{"call_deref", "integer division overflow: -2147483648 / -1 at k.metal:94", over, [4]int32{3, 1, 100, minInt}},
		{"cond", "integer division overflow: -2147483648 / -1 at k.metal:99", over, [4]int32{3, -9, 100, minInt}},
		{"mixed", "integer division by zero in lane 2 at k.metal:40", zero, [4]int32{3, -3, -14, 0}},
		{"deref", "integer division overflow in lane 0: -2147483648 / -1 at k.metal:46", over, [4]int32{3, -3, -14, minInt}},
	} {
		v := make([]uint32, 16)
		for k := range 8 {
			v[k], v[8+k] = uint32(good[k]), uint32(c.bad[k])
		}
		b := u32Buf(t, dev, v)
		err := run(t, dev, pipe(t, lib, c.kernel, nil), [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: b})
		var ee *emu.ExecutionError
		want := "kernel " + c.kernel + ": " + c.want
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "thread (1,0,0)") {
			t.Errorf("%s: got %v, want an ExecutionError saying %q of thread (1,0,0)", c.kernel, err, want)
		}
		b = u32Buf(t, dev, v[:8])
		if err := run(t, dev, pipe(t, lib, c.kernel, nil), [3]int{1, 1, 1}, [3]int{1, 1, 1}, arg{buf: b}); err != nil {
			t.Errorf("%s of good values: %v", c.kernel, err)
			continue
		}
		var got [4]int32
		for k, x := range u32s(b)[:4] {
			got[k] = int32(x)
		}
		if got != c.out {
			t.Errorf("%s of good values: got %v, want %v", c.kernel, got, c.out)
		}
	}
}

// A thread pointer moved far past its variable read memory no kernel owns,
// faulting and ending the process: where such an address becomes a thread
// pointer (a declaration, an assignment, a parameter), the dispatch fails
// naming the line and the thread, and an address in the variable runs.
func TestWildThreadPointers(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = `#include <metal_stdlib>
using namespace metal;
int get(thread int* p) { return *p; }
kernel void decl(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int local[4] = {1, 2, 3, 4}; thread int* q = local;
  thread int* p = q + x[i];
  x[i] = *p;
}
kernel void assign(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int local[4] = {1, 2, 3, 4}; thread int* q = local;
  thread int* p = q;
  p = q + x[i];
  x[i] = *p;
}
kernel void param(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int local[4] = {1, 2, 3, 4}; thread int* q = local;
  x[i] = get(q + x[i]);
}
`
	lib := newLibrary(t, dev, src)
	for _, c := range []struct {
		kernel string
		line   int
	}{{"decl", 6}, {"assign", 12}, {"param", 3}} {
		// Thread 0 reads local[1]; thread 1 reads 4 GiB past local.
		b := u32Buf(t, dev, []uint32{1, 1 << 30})
		err := run(t, dev, pipe(t, lib, c.kernel, nil), [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: b})
		var ee *emu.ExecutionError
		want := fmt.Sprintf("kernel %s: k.metal:%d: a thread pointer to 0x", c.kernel, c.line)
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "thread (1,0,0)") {
			t.Errorf("%s: got %v, want an ExecutionError saying %q of thread (1,0,0)", c.kernel, err, want)
		}
		b = u32Buf(t, dev, []uint32{1, 3})
		if err := run(t, dev, pipe(t, lib, c.kernel, nil), [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: b}); err != nil {
			t.Errorf("%s in range: %v", c.kernel, err)
		} else if got := u32s(b); got[0] != 2 || got[1] != 4 {
			t.Errorf("%s in range: %v", c.kernel, got)
		}
	}
}

// A thread pointer moved past its variable where no check sees it (`p +=
// n`, then `p[1]`) read or wrote an address no mapping holds, faulting and
// ending the process: the fault fails the dispatch, naming the kernel, the
// address and the thread, and the device runs the next dispatch. A fault in
// Go code stays Go's (a nil pointer's panic).
func TestWildThreadPointerFaults(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("skipping: the wild address is one x86-64 does not map")
	}
	// Both fiber switches leave the handler for the scheduler: the assembly
	// one of Linux x86-64, and the ucontext one other systems use.
	for _, cflags := range [][]string{nil, {"-DMSL_EMU_UCONTEXT"}} {
		t.Run(strings.Join(append([]string{"switch"}, cflags...), " "), func(t *testing.T) {
			checkWildFaults(t, newDevice(t, emu.Options{Workers: 2, CFlags: cflags}))
		})
	}
	var p *int
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("a nil pointer read in Go did not panic")
			}
		}()
		_ = *p
	}()
}

// checkWildFaults runs kernels whose thread 1 reads or writes through a
// thread pointer 32 TiB past its variable on dev.
func checkWildFaults(t *testing.T, dev *emu.Device) {
	const src = `#include <metal_stdlib>
using namespace metal;
kernel void read(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int local[4] = {1, 2, 3, 4};
  thread int* p = local;
  p += long(x[i]) << 43;
  x[i] = p[1];
}
kernel void write(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int local[4] = {1, 2, 3, 4};
  thread int* p = local;
  p += long(x[i]) << 43;
  p[1] = 5;
  x[i] = local[1];
}
`
	lib := newLibrary(t, dev, src)
	for _, c := range []struct{ kernel, want string }{{"read", "2"}, {"write", "5"}} {
		// Thread 1's pointer lies 32 TiB past local, where no address is.
		b := u32Buf(t, dev, []uint32{0, 1})
		err := run(t, dev, pipe(t, lib, c.kernel, nil), [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: b})
		var ee *emu.ExecutionError
		want := "kernel " + c.kernel + ": a read or write through a wild pointer faulted"
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "thread (1,0,0)") {
			t.Errorf("%s: got %v, want an ExecutionError saying %q of thread (1,0,0)", c.kernel, err, want)
		}
		b = u32Buf(t, dev, []uint32{0, 0})
		if err := run(t, dev, pipe(t, lib, c.kernel, nil), [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: b}); err != nil {
			t.Errorf("%s in range: %v", c.kernel, err)
		} else if got := u32s(b); fmt.Sprint(got[0]) != c.want || got[1] != got[0] {
			t.Errorf("%s in range: %v, want %s twice", c.kernel, got, c.want)
		}
	}
	// Every thread of many groups, on every worker, faulting at once.
	all := make([]uint32, 16*32)
	for i := range all {
		all[i] = 1
	}
	err := run(t, dev, pipe(t, lib, "read", nil), [3]int{16, 1, 1}, [3]int{32, 1, 1}, arg{buf: u32Buf(t, dev, all)})
	if want := "kernel read: a read or write through a wild pointer faulted"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("every thread faulting: got %v, want an error saying %q", err, want)
	}
	t.Log(err)
}

// A threadgroup array passed by its name decays to a threadgroup pointer,
// as in Metal, from which a function template's `threadgroup T*`
// parameter deduces T; the emulator's array is a class of its own, and
// clang refused the call. Its size stays the array's.
func TestThreadgroupArrayArguments(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = `#include <metal_stdlib>
using namespace metal;
template <class T> T first(threadgroup T* p, uint k) { return p[k]; }
template <class T> T sum2(threadgroup T* p, threadgroup T* q) { return p[0] + q[1]; }
float plain(threadgroup const float* p) { return p[2]; }
template <class P> float any_ptr(P p) { return p[3]; }
kernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  threadgroup float buf[32];
  threadgroup int ints[32];
  buf[i] = x[i];
  ints[i] = int(i);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const float n = float(sizeof(buf) / sizeof(buf[0]));
  x[i] = first(buf, i) + sum2(buf, buf) + plain(buf) + any_ptr(buf) + float(first(ints, 1u)) + n;
}
`
	lib := newLibrary(t, dev, src)
	in := make([]float32, 32)
	for k := range in {
		in[k] = float32(10 * k)
	}
	b := f32Buf(t, dev, in)
	if err := run(t, dev, pipe(t, lib, "k", nil), [3]int{1, 1, 1}, [3]int{32, 1, 1}, arg{buf: b}); err != nil {
		t.Fatal(err)
	}
	for k, got := range f32s(b) {
		// buf[k] + (buf[0] + buf[1]) + buf[2] + buf[3] + ints[1] + 32
		if want := float32(10*k) + 10 + 20 + 30 + 1 + 32; got != want {
			t.Errorf("x[%d] = %v, want %v", k, got, want)
		}
	}
}

// A function template's `device const T*` or `const threadgroup T*`
// parameter deduces T from a pointer to non-const data, as Metal's does
// (the shim's checked pointer of T is one of const T too); the emulator
// refused the call. Overloads on const and non-const pointers pick as
// Metal's do.
func TestConstPointerTemplates(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = `#include <metal_stdlib>
using namespace metal;
template <class T> T second(device const T* p) { return p[1]; }
template <class T> T ends(const threadgroup T* p) { return p[0] + p[3]; }
template <class T> int kind(device T* p) { return 100; }
template <class T> int kind(device const T* p) { return 1000; }
kernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  threadgroup float buf[4];
  buf[i] = x[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  device const float* y = x;
  const float v = second(x) + second(y) + ends(buf) + ends((threadgroup float*)buf) + float(kind(x) + kind(y));
  threadgroup_barrier(mem_flags::mem_threadgroup);
  x[i] = v;
}
`
	lib := newLibrary(t, dev, src)
	b := f32Buf(t, dev, []float32{1, 2, 3, 4})
	if err := run(t, dev, pipe(t, lib, "k", nil), [3]int{1, 1, 1}, [3]int{4, 1, 1}, arg{buf: b}); err != nil {
		t.Fatal(err)
	}
	for k, got := range f32s(b) {
		if want := float32(2 + 2 + 5 + 5 + 1100); got != want {
			t.Errorf("x[%d] = %v, want %v", k, got, want)
		}
	}
}

// A thread (local) array read or written past its end faulted, or read
// another variable's memory, where a GPU gives an undefined value: the
// dispatch fails naming the line, the index and the array's type, and an
// index in range runs.
func TestThreadArrayIndices(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = `#include <metal_stdlib>
using namespace metal;
struct Acc { float v[3]; float last; };
kernel void read(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int local[4] = {1, 2, 3, 4};
  x[i] = local[x[i]];
}
kernel void write(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int local[2][4] = {};
  local[1][x[i]] = 5;
  x[i] = local[1][x[i] & 3];
}
kernel void member(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  Acc a = {{1, 2, 3}, 4};
  x[i] = int(a.v[x[i]]);
}
`
	lib := newLibrary(t, dev, src)
	for _, c := range []struct {
		kernel, want string
		bad          uint32
	}{
		{"read", "kernel read: thread array index 4194304 out of range of 'int[4]' at k.metal:6", 1 << 22},
		{"write", "kernel write: thread array index 5 out of range of 'int[4]' at k.metal:10", 5},
		{"member", "kernel member: thread array index 3 out of range of 'float[3]' at k.metal:15", 3},
	} {
		b := u32Buf(t, dev, []uint32{2, c.bad})
		err := run(t, dev, pipe(t, lib, c.kernel, nil), [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: b})
		var ee *emu.ExecutionError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "thread (1,0,0)") {
			t.Errorf("%s: got %v, want an ExecutionError saying %q of thread (1,0,0)", c.kernel, err, c.want)
		}
		b = u32Buf(t, dev, []uint32{2, 1})
		if err := run(t, dev, pipe(t, lib, c.kernel, nil), [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: b}); err != nil {
			t.Errorf("%s in range: %v", c.kernel, err)
		}
	}
}

// A vector read or written through a misaligned thread pointer faulted the
// CPU's aligned load and ended the process, as device and threadgroup
// pointers, which check their alignment, do not: the dispatch fails naming
// the line, the type and its alignment, and an aligned one runs.
func TestThreadPointerAlignment(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = `#include <metal_stdlib>
using namespace metal;
kernel void k(device float* x [[buffer(0)]], constant uint& off [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  alignas(16) float local[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  thread float4* v = (thread float4*)(local + off);
  v[1] = v[0] * 2.0f;
  x[i] = local[5];
}
`
	lib := newLibrary(t, dev, src)
	p := pipe(t, lib, "k", nil)
	b := newBuf(t, dev, 8)
	err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: b}, arg{bytes: u32Bytes(1)})
	var ee *emu.ExecutionError
	const want = "needs 16-byte alignment at k.metal:6"
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "misaligned access to thread memory") || !strings.Contains(err.Error(), want) {
		t.Errorf("offset 1: got %v, want an ExecutionError saying %q", err, want)
	}
	if err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: b}, arg{bytes: u32Bytes(0)}); err != nil {
		t.Errorf("offset 0: %v", err)
	} else if got := f32s(b); got[0] != 4 || got[1] != 4 {
		t.Errorf("offset 0: %v, want [4 4]", got)
	}
}

// A packed vector converts to the vector of its type by a constructor, as
// it does implicitly: float3(pf) failed to build, the constructor taking
// the packed vector for one component.
func TestPackedVectorConversions(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = `#include <metal_stdlib>
using namespace metal;
kernel void k(device float* x [[buffer(0)]], device const packed_float3* p [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  const packed_float3 pf = p[i];
  const float3 a = float3(pf), b = (float3)pf, c = pf;
  const packed_half2 ph = packed_half2(half2(1, 2));
  x[i] = a.x + b.y + c.z + float2(ph).y + float(half2(ph).x);
}
`
	lib := newLibrary(t, dev, src)
	b := newBuf(t, dev, 8)
	in := f32Buf(t, dev, []float32{1, 2, 3, 10, 20, 30})
	if err := run(t, dev, pipe(t, lib, "k", nil), [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: b}, arg{buf: in}); err != nil {
		t.Fatal(err)
	}
	if got := f32s(b); got[0] != 1+2+3+2+1 || got[1] != 10+20+30+2+1 {
		t.Errorf("got %v, want [9 63]", got)
	}
}

// metal::array (metal_array) holds values in thread memory or a buffer's
// struct, indexed and sized as a C array: it failed to build ("no template
// named 'array'").
func TestMetalArray(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = `#include <metal_stdlib>
#include <metal_array>
using namespace metal;
struct Row { array<float, 3> v; };
float total(thread const array<float, 4>& a) {
  float s = 0;
  for (uint k = 0; k < a.size(); k++) s += a[k];
  return s;
}
kernel void k(device float* x [[buffer(0)]], device const Row* rows [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  array<float, 4> a = {1, 2, 3, 4};
  a[i & 3] += rows[i].v[2];
  const metal::array<int, 0> none = {};
  x[i] = total(a) + float(none.empty()) + float(none.size());
}
`
	lib := newLibrary(t, dev, src)
	b := newBuf(t, dev, 8)
	rows := f32Buf(t, dev, []float32{0, 0, 10, 0, 0, 20})
	if err := run(t, dev, pipe(t, lib, "k", nil), [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: b}, arg{buf: rows}); err != nil {
		t.Fatal(err)
	}
	if got := f32s(b); got[0] != 10+10+1 || got[1] != 10+20+1 {
		t.Errorf("got %v, want [21 31]", got)
	}
}

// MSL has no double: an unsuffixed floating literal is a float, where C++
// makes it a double, so arithmetic with one rounds to float at each step,
// as on a Mac (docs/msl-subset.md).
func TestFloatLiterals(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	cases := []struct {
		expr string
		x    float32
		want float32
	}{
		{"sizeof(0.1) + sizeof(1e-5) + sizeof(2.) + sizeof(.5e1) + sizeof(0x1p-3)", 0, 20},
		{"x[i] * 0.1", 9, 9 * float32(0.1)}, // 0.90000004; in double, 0.9
		{"16777216.0 + 1.0 + x[i]", 1, 16777216},
		{"x[i] + 0x1p-24 + 0x1p-24", 1, 1},
		{"x[i] * 1.5h + 0x10 + 1.5f + 2", 2, 2*1.5 + 16 + 1.5 + 2},
	}
	lib := caseLibrary(t, dev, "#include <metal_stdlib>\nusing namespace metal;\n", len(cases), func(name string, j int) string {
		return fmt.Sprintf("kernel void %s(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { auto v = %s; x[i] = v; }\n", name, cases[j].expr)
	})
	for j, c := range cases {
		b := f32Buf(t, dev, []float32{c.x})
		if err := runCase(t, dev, lib, j, 1, arg{buf: b}); err != nil {
			t.Fatal(err)
		}
		if got := f32s(b)[0]; got != c.want {
			t.Errorf("%s with x = %g: %.9g, want %.9g", c.expr, c.x, got, c.want)
		}
	}
}

// Metal has no variable-length arrays, and a function constant is no
// constant expression (its value comes with the pipeline): an array sized
// by either does not build on a Mac, and clang's C++ extension must not
// build it here (docs/msl-subset.md).
func TestVariableLengthArrays(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = "#include <metal_stdlib>\nusing namespace metal;\nconstant int fc_n [[function_constant(0)]];\n\nkernel void k(device float* x [[buffer(0)]], constant uint& n [[buffer(1)]], uint i [[thread_position_in_grid]]) {\n  %s;\n  x[i] = a[0];\n}\n"
	for _, c := range []struct {
		decl string
		ok   bool
	}{
		{"float a[4] = {1}", true},
		{"float a[MTL_TEST_N] = {1}", true},
		{"float a[n]; a[0] = 1", false},
		{"float a[fc_n]; a[0] = 1", false},
	} {
		checkBuild(t, dev, c.decl, fmt.Sprintf(src, c.decl), mtl.CompileOptions{Defines: map[string]string{"MTL_TEST_N": "8"}}, c.ok, 6)
	}
}

// What MSL leaves out of C++14 (goto, new and delete, noexcept,
// dynamic_cast, thread_local, virtual functions, lambdas), its scalar types (no double, no long long) and variables of
// the whole program outside the constant address space (at program scope
// or static in a function) do not build on a Mac: the emulator refuses
// them at their line instead of running them as C++.
func TestUnsupportedCxx(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = "#include <metal_stdlib>\nusing namespace metal;\n%s\nkernel void k(device float* x [[buffer(0)]], constant uint& n [[buffer(1)]], uint i [[thread_position_in_grid]]) {\n  %s;\n}\n"
	const notConstant = "must be declared constant"
	for _, c := range []struct {
		global, body string
		line         int    // 0: builds
		want         string // the error's words; "" for "not supported"
	}{
		{"", "const float d = x[i]; x[i] = d * 2.0f", 0, ""},
		{"", "const long v = long(n); x[i] = float(v)", 0, ""},
		{"struct S { int a; };", "x[i] = float(sizeof(S))", 0, ""},
		{"", "double d = x[i]; x[i] = float(d)", 5, ""},
		{"", "x[i] = float(double(n))", 5, ""},
		{"", "long long v = 1; x[i] = float(v)", 5, ""},
		{"", "if (n) goto end; x[i] = 1; end: x[i] += 1", 5, ""},
		{"", "float* p = new float[2]; x[i] = p[0]", 5, ""},
		{"", "thread_local float q = 0; x[i] = q", 5, ""},
		{"", "float* p = nullptr; delete p; x[i] = 1", 5, ""},
		{"struct N { N() {} N(const N&) = delete; };", "N a; x[i] = 1", 0, ""},
		{"", "x[i] = noexcept(x[i] + 1) ? 1 : 0", 5, ""},
		{"float f(float v) noexcept { return v; }", "x[i] = f(x[i])", 3, ""},
		{"struct A { float v; };", "A a = {1}; A* p = dynamic_cast<A*>(&a); x[i] = p->v", 5, ""},
		{"struct B { virtual float f() { return 1; } };", "x[i] = 1", 3, ""},
		// Lambdas; subscripts, array declarations and attributes are not.
		{"", "auto f = [](float v) { return v * 2; }; x[i] = f(x[i])", 5, ""},
		{"", "x[i] = [&]() { return float(n); }()", 5, ""},
		{"", "float a[2] = {1, 2}; x[i] = a[n & 1] + x[(i + 1) & 0]", 0, ""},
		// Program-scope variables and function-scope statics.
		{"constant float scale = 2.0f;", "x[i] *= scale", 0, ""},
		{"constexpr constant static float t[2] = {1, 2};", "x[i] = t[n & 1]", 0, ""},
		{"constant float w[2] = {1, 2}; struct S { float a; }; float f(float v) { return v; }", "x[i] = f(w[n & 1])", 0, ""},
		{"", "static constant float k[2] = {1, 2}; x[i] = k[n & 1]", 0, ""},
		{"", "constant static float k[2] = {1, 2}; x[i] = k[n & 1]", 0, ""},
		{"float scale = 2.0f;", "x[i] *= scale", 3, notConstant},
		{"float w[2] = {1, 2};", "x[i] = w[n & 1]", 3, notConstant},
		{"static float g;", "x[i] = g", 3, notConstant},
		{"device float* p;", "x[i] = 1", 3, notConstant},
		{"threadgroup float tg[4];", "x[i] = 1", 3, notConstant},
		{"struct S { float a; } s;", "x[i] = s.a", 3, notConstant},
		{"namespace a { float g = 1; }", "x[i] = a::g", 3, notConstant},
		{"", "static float acc = 0; acc += x[i]; x[i] = acc", 5, notConstant},
		{"", "static uint calls; x[i] = float(calls++)", 5, notConstant},
	} {
		want := c.want
		if want == "" {
			want = "not supported"
		}
		checkBuild(t, dev, c.global+" "+c.body, fmt.Sprintf(src, c.global, c.body), mtl.CompileOptions{}, c.line == 0, c.line, want)
	}
}

// Metal's thread-position arguments are ushort or uint (the grid and
// threadgroup positions and sizes also their 2- and 3-vectors), their
// vectors of one size, and some of them of one type (the MSL
// specification's notes on kernel function attributes): a kernel declared
// otherwise does not build on a Mac, nor here (docs/msl-subset.md).
func TestThreadPositionTypes(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = "#include <metal_stdlib>\nusing namespace metal;\nkernel void k(device float* x [[buffer(0)]],\n  %s) {\n  x[0] = 1;\n}\n"
	for _, c := range []struct {
		params string
		ok     bool
	}{
		{"uint i [[thread_position_in_grid]]", true},
		{"ushort2 i [[thread_position_in_grid]], uint2 g [[threadgroup_position_in_grid]]", true},
		{"uint3 i [[thread_position_in_grid]], uint3 n [[threads_per_grid]], ushort3 t [[thread_position_in_threadgroup]]", true},
		{"uint g [[threadgroup_position_in_grid]], ushort2 t [[threads_per_threadgroup]]", true},
		{"const uint i [[thread_position_in_grid]], vec<uint, 2> g [[threadgroup_position_in_grid]], vec<ushort, 2> t [[thread_position_in_threadgroup]]", true},
		{"uint2 t [[thread_position_in_threadgroup]], uint s [[thread_index_in_threadgroup]]", true},
		{"ushort2 t [[thread_position_in_threadgroup]], ushort s [[thread_index_in_threadgroup]], ushort l [[thread_index_in_simdgroup]]", true},
		{"int i [[thread_position_in_grid]]", false},
		{"short l [[thread_index_in_simdgroup]]", false},
		{"uint2 l [[simdgroup_index_in_threadgroup]]", false},
		{"uint4 i [[thread_position_in_grid]]", false},
		{"float i [[thread_position_in_grid]]", false},
		{"uint2 i [[thread_position_in_grid]], uint3 g [[threadgroup_position_in_grid]]", false},
		{"ushort2 t [[threads_per_threadgroup]], uint3 g [[threadgroup_position_in_grid]]", false},
		{"uint2 i [[thread_position_in_grid]], ushort2 n [[threads_per_grid]]", false},
		{"uint i [[thread_position_in_grid]], uint2 n [[threads_per_grid]]", false},
		{"ushort t [[thread_position_in_threadgroup]], uint n [[threads_per_threadgroup]]", false},
		{"uint2 t [[thread_position_in_threadgroup]], ushort s [[thread_index_in_threadgroup]]", false},
	} {
		checkBuild(t, dev, c.params, fmt.Sprintf(src, c.params), mtl.CompileOptions{}, c.ok, 4)
	}
	// The same rules hold for a type named through an alias or a template
	// parameter, which the rewriter cannot read: clang's resolved types
	// are checked, and the message names the parameter's line.
	const aliases = "#include <metal_stdlib>\nusing namespace metal;\ntypedef int idx_t; typedef uint2 pos2; using spos2 = vec<ushort, 2>; typedef uint4 pos4; typedef uint3 pos3;\nkernel void k(device float* x [[buffer(0)]],\n  %s) {\n  x[0] = 1;\n}\n"
	for _, c := range []struct {
		params string
		ok     bool
	}{
		{"pos2 i [[thread_position_in_grid]], pos2 n [[threads_per_grid]], uint32_t l [[thread_index_in_simdgroup]]", true},
		{"spos2 t [[thread_position_in_threadgroup]], pos2 g [[threadgroup_position_in_grid]], ushort s [[thread_index_in_threadgroup]]", true},
		{"idx_t i [[thread_position_in_grid]]", false},
		{"pos4 i [[thread_position_in_grid]]", false},
		{"pos2 l [[simdgroup_index_in_threadgroup]]", false},
		{"pos2 i [[thread_position_in_grid]], spos2 n [[threads_per_grid]]", false},
		{"pos2 i [[thread_position_in_grid]], uint s [[thread_index_in_simdgroup]], pos3 g [[threadgroup_position_in_grid]]", false},
		{"pos2 t [[thread_position_in_threadgroup]], ushort s [[thread_index_in_threadgroup]]", false},
	} {
		checkBuild(t, dev, "aliased "+c.params, fmt.Sprintf(aliases, c.params), mtl.CompileOptions{}, c.ok, 5, "parameter ")
	}
	const tmpl = "#include <metal_stdlib>\nusing namespace metal;\ntemplate <typename T> kernel void k(device float* x [[buffer(0)]],\n  T i [[thread_position_in_grid]]) {\n  x[0] = 1;\n}\ntypedef decltype(k<%s>) k_t;\ntemplate [[host_name(\"k1\")]] kernel k_t k<%[1]s>;\n"
	for _, c := range []struct {
		typ string
		ok  bool
	}{{"uint", true}, {"ushort3", true}, {"int", false}, {"float2", false}} {
		checkBuild(t, dev, "template "+c.typ, fmt.Sprintf(tmpl, c.typ), mtl.CompileOptions{}, c.ok, 4, "[[thread_position_in_grid]] must be declared")
	}
}

// A [[max_total_threads_per_threadgroup]] over the device's 1024 threads
// per threadgroup fails the pipeline's creation on Metal (the MSL
// specification on the attribute): the emulator refuses it there too,
// naming the kernel's line, instead of capping it.
func TestMaxTotalThreadsAttribute(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = "#include <metal_stdlib>\nusing namespace metal;\n[[max_total_threads_per_threadgroup(%d)]]\nkernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = 1; }\n"
	for _, c := range []struct {
		n, want int // want: the pipeline's limit; 0: refused
	}{
		{256, 256},
		{1024, 1024},
		{1025, 0},
		{4096, 0},
	} {
		lib := newLibrary(t, dev, fmt.Sprintf(src, c.n))
		p, err := lib.Pipeline("k", nil)
		switch {
		case c.want != 0 && err != nil:
			t.Errorf("%d: %v", c.n, err)
		case c.want != 0 && p.MaxTotalThreadsPerThreadgroup() != c.want:
			t.Errorf("%d: the pipeline allows %d threads, want %d", c.n, p.MaxTotalThreadsPerThreadgroup(), c.want)
		case c.want == 0 && (err == nil || !strings.Contains(err.Error(), "k.metal:4:") || !strings.Contains(err.Error(), "exceeds the device's 1024")):
			t.Errorf("%d: got %v, want an error at k.metal:4 (more threads than the device has)", c.n, err)
		}
	}
}

// Metal's atomic functions take device or threadgroup atomics, and add to
// or subtract from an atomic_float only in device memory (the MSL
// specification's atomic functions): an atomic in thread memory, or a
// threadgroup atomic_float added to, fails the dispatch at the call's line.
func TestAtomicAddressSpaces(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const head = "#include <metal_stdlib>\nusing namespace metal;\nvoid tg_add(threadgroup atomic_float* a) { atomic_fetch_add_explicit(a, 1.0f, memory_order_relaxed); }\n"
	kernel := func(name, body string) string {
		return "kernel void " + name + "(device atomic_uint* u [[buffer(0)]], device atomic_float* f [[buffer(1)]], uint i [[thread_position_in_grid]]) { threadgroup atomic_uint tu[1]; threadgroup atomic_float tf[1]; if (i == 0) { atomic_store_explicit(&tu[0], 0u, memory_order_relaxed); atomic_store_explicit(&tf[0], 0.0f, memory_order_relaxed); } threadgroup_barrier(mem_flags::mem_threadgroup); " + body + "; }\n"
	}
	cases := []struct {
		body string
		ok   bool
	}{
		{"atomic_fetch_add_explicit(u, 1u, memory_order_relaxed)", true},
		{"atomic_fetch_add_explicit(&u[0], 1u, memory_order_relaxed)", true},
		{"atomic_fetch_add_explicit(f, 1.0f, memory_order_relaxed)", true},
		{"atomic_fetch_max_explicit(&tu[0], i, memory_order_relaxed)", true},
		{"atomic_store_explicit(u, atomic_load_explicit(&tf[0], memory_order_relaxed) > 0 ? 1u : 0u, memory_order_relaxed)", true},
		{"atomic_uint a; atomic_store_explicit(&a, 0u, memory_order_relaxed); atomic_fetch_add_explicit(u, atomic_load_explicit(&a, memory_order_relaxed), memory_order_relaxed)", false},
		{"atomic_int c; atomic_fetch_add_explicit(&c, 1, memory_order_relaxed)", false},
		{"atomic_fetch_add_explicit(&tf[0], 1.0f, memory_order_relaxed)", false},
		{"atomic_fetch_sub_explicit(&tf[0], 1.0f, memory_order_relaxed)", false},
		{"tg_add(&tf[0])", false},
	}
	lib := caseLibrary(t, dev, head, len(cases), func(name string, j int) string { return kernel(name, cases[j].body) })
	for j, c := range cases {
		err := runCase(t, dev, lib, j, 32, arg{buf: newBuf(t, dev, 4)}, arg{buf: newBuf(t, dev, 4)})
		at := fmt.Sprintf("k.metal:%d:", 4+j)
		if c.body == "tg_add(&tf[0])" {
			at = "k.metal:3:" // the atomic call, in the helper
		}
		var ee *emu.ExecutionError
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v", c.body, err)
		case !c.ok && (!errors.As(err, &ee) || !strings.Contains(err.Error(), at)):
			t.Errorf("%s: got %v, want an ExecutionError at %s (an atomic Metal refuses)", c.body, err, at)
		}
	}
}

// bfloat came with MSL 3.1 (the specification's scalar types): a library
// built for 3.0 that names it, its vectors, matrices or simdgroup matrix
// does not build on a Mac, nor here (docs/msl-subset.md).
func TestBFloatNeedsMSL31(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = "#include <metal_stdlib>\nusing namespace metal;\nkernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  %s;\n}\n"
	for _, c := range []struct {
		lang, body string
		ok         bool
	}{
		{"3.1", "bfloat b = bfloat(x[i]); x[i] = float(b)", true},
		{"3.1", "bfloat4 v = bfloat4(x[i]); x[i] = float(v.y)", true},
		{"3.0", "half h = half(x[i]); x[i] = float(h)", true},
		{"3.0", "bfloat b = bfloat(x[i]); x[i] = float(b)", false},
		{"3.0", "bfloat4 v = bfloat4(x[i]); x[i] = float(v.y)", false},
		{"3.0", "vec<bfloat, 2> v = vec<bfloat, 2>(x[i]); x[i] = float(v.x)", false},
		{"3.0", "simdgroup_bfloat8x8 m; x[i] = 0", false},
		{"2.4", "x[i] = float(bfloat(x[i]))", false},
	} {
		checkBuild(t, dev, fmt.Sprintf("MSL %s: %s", c.lang, c.body), fmt.Sprintf(src, c.body), mtl.CompileOptions{LanguageVersion: c.lang}, c.ok, 4, "bfloat types need MSL 3.1")
	}
}

// Metal converts no vector implicitly to a vector of another element type
// (the specification's type conversions): int4 + uint4 or ushort2 + short2
// fails to build on a Mac ("cannot convert between vector values"), where
// clang's lax vector conversions take same-sized vectors as a bit cast.
// static_cast converts a vector by value, as the specification's type
// conversions have it, where clang refuses it between vectors.
func TestImplicitVectorConversions(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = "#include <metal_stdlib>\nusing namespace metal;\nkernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  const int4 i4 = int4(int(i)); const uint4 u4 = uint4(i); const float4 f4 = float4(x[i]); const short2 s2 = short2(1); const ushort2 us2 = ushort2(2);\n  %s;\n}\n"
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{"x[i] = float((i4 + int4(u4)).x)", true},
		{"x[i] = float((u4 / uint4(i4)).y)", true},
		{"x[i] = (f4 * 2).x + float((i4 * 3).z)", true},
		{"x[i] = float(as_type<uint4>(i4).x)", true},
		{"x[i] = static_cast<float4>(i4).x + float(static_cast<vec<uint, 4>>(f4).y + static_cast<int4>(i4 < 2).x)", true},
		{"x[i] = float((i4 + u4).x)", false},
		{"x[i] = float((u4 / i4).x)", false},
		{"x[i] = float((us2 + s2).x)", false},
		{"x[i] = float((i4 == u4).x)", false},
		{"uint4 a = i4 * 2; x[i] = float(a.x)", false},
	} {
		checkBuild(t, dev, c.body, fmt.Sprintf(src, c.body), mtl.CompileOptions{}, c.ok, 5)
	}
}

// MSL's boolN is a type of its own (the specification's "Vector Data
// Types"): a comparison of vectors yields one, and, as no vector converts
// implicitly to one of another element type (its type conversions), a bool
// vector becomes an int or float vector only explicitly (int2(b),
// static_cast, select): `int2 a = bool2(true, false)`, a bool vector added
// to an int vector or passed as one does not build on a Mac, where the
// emulator's bool vectors were int vectors and built them. Converted, a
// true component is 1, also from a half comparison or a comparison
// converted straight to a number vector (`int4(a < b)`, `int4 d(a < b)`,
// where clang's is -1) (docs/msl-subset.md). isnan and the other classification functions
// give one for a vector.
func TestBoolVectors(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const values = `#include <metal_stdlib>
using namespace metal;
kernel void k(device const float* in [[buffer(0)]], device int* out [[buffer(1)]]) {
  const float4 a = float4(in[0], in[1], in[2], in[3]);
  const bool4 m = a < 0.0f;
  const bool4 h = half4(a) > half4(0);
  const float4 s = select(a, float4(9), m);
  const int4 d(a > 0.0f);
  const bool2 b2 = bool2(true, false);
  const vec<bool, 4> c = vec<bool, 4>(b2, m.z, h[0]);
  const int4 r[] = {int4(m), int4(float4(h)), int4(s), int4(c), static_cast<int4>(m ^ h), int4(bool4(int4(2, 0, -1, 0))),
                    int4(all(m || h), any(m && h), all(!m == h), any(b2 != bool2(true))),
                    int4(sizeof(bool2), sizeof(bool3), sizeof(bool4), alignof(bool3)),
                    int4(a < 0.0f), (int4)(half4(a) > half4(0)), int4(int4(2, 4, 6, 8) >> 1), int4(!(a < 0.0f) && a > -3.0f),
                    int4(isnan(a / float4(1, 0, 0, 1) * 0.0f)), int4(signbit(half4(a)) || isinf(a / float4(0, 1, 1, 1))),
                    int4(all(isfinite(a)), any(isnan(a)), isnormal(a.x), all(isnormal(float2(0, 1)))), d};
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 4; j++)
      out[4 * i + j] = r[i][j];
}
`
	lib := newLibrary(t, dev, values)
	out := newBuf(t, dev, 4*64)
	if err := run(t, dev, pipe(t, lib, "k", nil), [3]int{1, 1, 1}, [3]int{1, 1, 1}, arg{buf: f32Buf(t, dev, []float32{1, -2, 3, -4})}, arg{buf: out}); err != nil {
		t.Fatal(err)
	}
	want := []int32{0, 1, 0, 1, 1, 0, 1, 0, 1, 9, 3, 9, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0, 1, 1, 2, 4, 4, 4,
		0, 1, 0, 1, 1, 0, 1, 0, 1, 2, 3, 4, 1, 0, 1, 0,
		0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 0, 1, 0, 1, 0}
	for i, u := range u32s(out) {
		if int32(u) != want[i] {
			t.Errorf("out[%d] (row %d): got %d, want %d", i, i/4, int32(u), want[i])
		}
	}

	const src = "#include <metal_stdlib>\nusing namespace metal;\nint first(int4 v) { return v.x; } bool both(bool4 p, bool4 q) { return all(p == q); } int sum2(int4 p, int4 q) { return p.x + q.x; }\nkernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  const float4 f4 = float4(x[i], -1, 2, 0); const int4 i4 = int4(f4); const half4 h4 = half4(f4); const bool4 m = f4 < 1.0f;\n  %s;\n}\n"
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{"bool4 n = f4 < 1.0f; x[i] = float(int4(n).x)", true},
		{"bool4 n = h4 >= half4(0); x[i] = select(f4, float4(0), n).y", true},
		{"x[i] = float(all(f4 == f4) && any(i4 != 0))", true},
		{"bool2 b = bool2(true, false); x[i] = float2(b).x + float(uint2(b).y)", true},
		{"bool4 n = bool4(i4); x[i] = float(static_cast<int4>(!n).w + first(int4(m)))", true},
		{"bool3 n = true; n.y = f4.y > 0; n = n || f4.xyz == 2.0f; x[i] = float(n[1] || n.z)", true},
		{"vec<bool, 2> n = bool2(m.x, m.y); bool2 o = n; x[i] = float(o.y)", true},
		{"int2 a = bool2(true, false); x[i] = float(a.x)", false},
		{"int4 a = m; x[i] = float(a.x)", false},
		{"x[i] = float((i4 + m).x)", false},
		{"x[i] = float(first(m))", false},
		{"x[i] = (f4 * m).x", false},
		{"float2 f = f4.xy == f4.zw; x[i] = f.x", false},
		{"bool4 n = f4; x[i] = float(n.x)", false},
		{"bool4 n = uint4(i); x[i] = float(n.x)", false},
		// A comparison of vectors is a bool vector ("Scalar and Vector
		// Operators"), which converts to no other vector implicitly.
		{"int4 a = f4 < 1.0f; x[i] = float(a.x)", false},
		{"int4 a; a = f4 != f4; x[i] = float(a.x)", false},
		{"x[i] = float(((f4 < 1.0f) + 1).x)", false},
		{"x[i] = float((i4 * (i4 == 0)).y)", false},
		{"x[i] = float(first(f4 >= 0.0f))", false},
		{"short4 s = h4 < h4; x[i] = float(s.x)", false},
		{"bool4 n = i4; x[i] = float(n.x)", false},
		{"bool4 n = m & i4; x[i] = float(n.x)", false},
		{"bool4 n = m; n = i4 != 0 && m || !(f4 < f4); x[i] = float(n.w)", true},
		{"x[i] = float(all(f4 < 1.0f) || any(h4 == h4 & m)) + select(f4, f4, i4 > 0).x", true},
		{"x[i] = float(int4(f4 < 1.0f).x + ((int4)(i4 == 0)).y + static_cast<int4>(h4 > 0).z + int4(bool4(i4)).w)", true},
		{"x[i] = f4.x < 1.0f ? 1 : 2; if (i4.y > 0 && f4.z != 0) x[i] += (f4.x < 1.0f) + 1", true},
		{"constexpr bool big = sizeof(int) > 2; x[i] = float(big) + float(sizeof(f4 < 1.0f) == 4)", true},
		{"for (int k = 0; k < 4 && m[k] > 0; k++) x[i] += f4[k] >= 0 ? 1 : 0", true},
		// Two comparisons among a call's arguments, whose '<' and '>' could
		// enclose template arguments.
		{"x[i] = float(both(f4 < 1.0f, i4 > 0) && both(f4 < x[i], h4 > h4))", true},
		{"x[i] = float(sum2(f4 < 1.0f, i4 > 0))", false},
	} {
		checkBuild(t, dev, c.body, fmt.Sprintf(src, c.body), mtl.CompileOptions{}, c.ok, 6)
	}
}

// Metal's bool vectors have the swizzles of other vectors ("Vector Data
// Types"): two to four components read as a bool vector, and those that
// name no component twice are assigned one; an auto variable one
// initialises is a bool vector.
func TestBoolVectorSwizzles(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const values = `#include <metal_stdlib>
using namespace metal;
kernel void k(device int* out [[buffer(0)]]) {
  const bool4 m = bool4(true, false, false, true);
  bool4 n = m;
  n.xy = m.zw;
  bool3 o = m.wzy;
  bool2 p = m.rg;
  p.yx = p;
  bool4 q = bool4(false);
  q.zx = m.xw && !m.yz;
  q.yw = q.xz;
  bool2 s = bool2(true, false);
  s.xy = s.yx;
  auto a = m.wy;
  const int4 r[] = {int4(n), int4(o.xyzz), int4(int2(p), int2(m.xx)), int4(q), int4(s.xyxy),
                    int4(all(m.xw), any(m.yz), all(select(bool2(false), bool2(true), m.xw)), int(all(m.xy == m.wz))),
                    int4(int2(a), int(a.x), int(sizeof(a)))};
  for (int i = 0; i < 7; i++)
    for (int j = 0; j < 4; j++)
      out[4 * i + j] = r[i][j];
}
`
	lib := newLibrary(t, dev, values)
	out := newBuf(t, dev, 4*28)
	if err := run(t, dev, pipe(t, lib, "k", nil), [3]int{1, 1, 1}, [3]int{1, 1, 1}, arg{buf: out}); err != nil {
		t.Fatal(err)
	}
	want := []int32{0, 1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 2}
	for i, u := range u32s(out) {
		if int32(u) != want[i] {
			t.Errorf("out[%d] (row %d): got %d, want %d", i, i/4, int32(u), want[i])
		}
	}

	const src = "#include <metal_stdlib>\nusing namespace metal;\nkernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  const float4 f4 = float4(x[i], -1, 2, 0); const bool4 m = f4 < 1.0f; bool4 n = m;\n\n  %s;\n}\n"
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{"n.xyz = m.zyx; n.gb = !n.rg; x[i] = float(n.z) + float(any(n.ww))", true},
		{"n.xy = true; x[i] = float(all(n.xyzw == m))", true},
		{"auto s = m.xy; const auto t = n.zwx; bool2 b = s; x[i] = float(s.x) + float(t.z) + float(b.y)", true},
		{"auto s = f4.xy; float2 g = s; x[i] = g.x + s.y", true},
		{"n.xx = bool2(true, false); x[i] = float(n.x)", false},
		{"int2 a = m.xy; x[i] = float(a.x)", false},
		{"x[i] = n.xyz.x", false},
		{"bool3 b = m.xyzw; x[i] = float(b.x)", false},
		{"bool2 b = m.xq; x[i] = float(b.x)", false},
	} {
		checkBuild(t, dev, c.body, fmt.Sprintf(src, c.body), mtl.CompileOptions{}, c.ok, 6)
	}
}

// Metal allocates threadgroup variables in kernel functions only (the
// specification's threadgroup address space): a helper that declares one
// does not build on a Mac; the kernel declares it and passes a pointer.
func TestThreadgroupVariablesInKernels(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = "#include <metal_stdlib>\nusing namespace metal;\n%s\nkernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  %s;\n}\n"
	for _, c := range []struct {
		helper, body string
		line         int // 0: builds
	}{
		{"float f(threadgroup float* t, uint i) { return t[i]; }", "threadgroup float t[32]; t[i] = x[i]; x[i] = f(t, i)", 0},
		{"template <typename T> T g(threadgroup T* t, uint i) { return t[i]; }", "threadgroup float t[32]; t[i & 31] = 1; x[i] = g((threadgroup float*)t, i & 31)", 0},
		{"float f(uint i) { threadgroup float t[32]; t[i] = 1; return t[i]; }", "x[i] = f(i & 31)", 3},
		{"template <typename T> T g(uint i) { threadgroup T t[32]; t[i] = 1; return t[i]; }", "x[i] = g<float>(i & 31)", 3},
		{"struct S { float get(uint i) { threadgroup float t[32]; t[i] = 1; return t[i]; } };", "S s; x[i] = s.get(i & 31)", 3},
	} {
		checkBuild(t, dev, c.helper+" "+c.body, fmt.Sprintf(src, c.helper, c.body), mtl.CompileOptions{}, c.line == 0, c.line, "outside a kernel")
	}
}

// The specification's function qualifiers: a kernel function returns void,
// and no function calls one (the host dispatches it). Either does not build
// on a Mac, nor here, at the kernel's or the call's line.
func TestKernelFunctionRules(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const kp = "(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]])"
	for _, c := range []struct {
		src  string
		line int // 0: builds
	}{
		{"kernel void k" + kp + " { x[i] = 1; }\nkernel void k2" + kp + " { x[i] = 2; }", 0},
		{"struct S { float k() { return 1; } };\nkernel void k" + kp + " { S s; x[i] = s.k(); }", 0},
		{"float h(float v) { return v; }\nkernel void k" + kp + " { x[i] = h(x[i]); }", 0},
		{"kernel float k" + kp + " { x[i] = 1; return 1; }", 3},
		{"\n[[kernel]] int k" + kp + " { return 0; }", 4},
		{"kernel void k" + kp + " { x[i] = 1; }\nkernel void k2" + kp + " {\n  k(x, i);\n}", 5},
		{"kernel void k" + kp + ";\nvoid h(device float* x, uint i) { k(x, i); }", 4},
		{"template <typename T> kernel void k(device T* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = 1; }\nkernel void k2" + kp + " { k<float>(x, i); }", 4},
	} {
		checkBuild(t, dev, c.src, "#include <metal_stdlib>\nusing namespace metal;\n"+c.src+"\n", mtl.CompileOptions{}, c.line == 0, c.line)
	}
}

// Metal's SIMD-group matrices hold half, bfloat or float, 8 by 8 (the
// specification's SIMD-group matrix data types): another element type does
// not build on a Mac, nor here.
func TestSimdgroupMatrixTypes(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = "#include <metal_stdlib>\nusing namespace metal;\nkernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  %s;\n}\n"
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{"simdgroup_float8x8 m = make_filled_simdgroup_matrix<float, 8>(1.0f); simdgroup_store(m, x, 8)", true},
		{"simdgroup_half8x8 m = make_filled_simdgroup_matrix<half, 8>(half(1)); x[i] = 0", true},
		{"simdgroup_matrix<int, 8, 8> m; x[i] = 0", false},
		{"simdgroup_matrix<uint, 8, 8> m = make_filled_simdgroup_matrix<uint, 8>(1u); x[i] = 0", false},
		{"simdgroup_matrix<float, 4, 4> m; x[i] = 0", false},
	} {
		checkBuild(t, dev, c.body, fmt.Sprintf(src, c.body), mtl.CompileOptions{}, c.ok, 4)
	}
}

// Metal's atomic fetch-and-modify functions take atomic_int and
// atomic_uint, and add and sub also atomic_float (the specification's
// atomic fetch and modify functions): atomic_fetch_max_explicit on an
// atomic_float, or any of them on an atomic_bool or atomic_ulong, does not
// build on a Mac, nor here.
func TestAtomicFetchTypes(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = "#include <metal_stdlib>\nusing namespace metal;\nkernel void k(device atomic_uint* u [[buffer(0)]], device atomic_int* n [[buffer(1)]], device atomic_float* f [[buffer(2)]], device atomic_bool* b [[buffer(3)]], device atomic_ulong* l [[buffer(4)]], uint i [[thread_position_in_grid]]) {\n  %s;\n}\n"
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{"atomic_fetch_max_explicit(u, i, memory_order_relaxed)", true},
		{"atomic_fetch_xor_explicit(n, int(i), memory_order_relaxed)", true},
		{"atomic_fetch_sub_explicit(f, 1.0f, memory_order_relaxed)", true},
		{"atomic_store_explicit(b, true, memory_order_relaxed)", true},
		{"atomic_fetch_max_explicit(f, 1.0f, memory_order_relaxed)", false},
		{"atomic_fetch_min_explicit(f, 1.0f, memory_order_relaxed)", false},
		{"atomic_fetch_or_explicit(b, true, memory_order_relaxed)", false},
		{"atomic_fetch_add_explicit(l, 1ul, memory_order_relaxed)", false},
	} {
		checkBuild(t, dev, c.body, fmt.Sprintf(src, c.body), mtl.CompileOptions{}, c.ok, 4)
	}
}

// A kernel's pointer and reference arguments are declared in the device,
// constant or threadgroup address space (the specification's
// restrictions): a buffer declared `float*` or `thread float&` does not
// build on a Mac, nor here, at the parameter's line.
func TestKernelPointerArguments(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = "#include <metal_stdlib>\nusing namespace metal;\nstruct P { uint n; };\nkernel void k(device float* x [[buffer(0)]],\n  %s, uint i [[thread_position_in_grid]]) {\n  x[i] = 0;\n}\n"
	for _, c := range []struct {
		param string
		ok    bool
	}{
		{"device const float* y [[buffer(1)]]", true},
		{"constant P& p [[buffer(1)]]", true},
		{"const device float* y [[buffer(1)]]", true},
		{"threadgroup float* t [[threadgroup(0)]]", true},
		{"float* y [[buffer(1)]]", false},
		{"thread float* y [[buffer(1)]]", false},
		{"const P& p [[buffer(1)]]", false},
		{"device float* t [[threadgroup(0)]]", false},
	} {
		checkBuild(t, dev, c.param, fmt.Sprintf(src, c.param), mtl.CompileOptions{}, c.ok, 5)
	}
}

// Metal converts no pointer between address spaces: a thread variable's
// address passed as a device or threadgroup pointer, threadgroup memory's
// as a device pointer, device memory's as a threadgroup pointer, or either
// held in a thread pointer or reference (a declaration, a cast, a
// reinterpret_cast, a function's thread parameter) does not build on a
// Mac. Where the emulator's types cannot tell (an address taken with & is a
// plain pointer there, as is a thread pointer), the conversion fails the
// dispatch, naming its line (docs/msl-subset.md).
func TestAddressSpaceConversions(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const head = "#include <metal_stdlib>\nusing namespace metal;\nfloat first(device float* p) { return p[0]; }\nfloat tg_first(threadgroup float* p) { return p[0]; }\nfloat t_first(thread const float* p) { return p[0]; } float p_first(const float* p) { return p[0]; } void p_inc(float& r) { r += 1; }\n"
	kernel := func(name, body string) string {
		return "kernel void " + name + "(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { threadgroup float tg[32]; float local[4] = {1, 2, 3, 4}; tg[i] = x[i]; threadgroup_barrier(mem_flags::mem_threadgroup); " + body + "; }\n"
	}
	const (
		ok    = iota
		fails // fails the dispatch
		build // fails to build
	)
	cases := []struct {
		body string
		want int
	}{
		{"x[i] = first(&x[i])", ok},
		{"device float* p = x + i; x[i] = *p + local[i & 3]", ok},
		{"x[i] = first((device float*)&x[i])", ok},
		{"device float4* v = (device float4*)x; x[i] = v[0].x", ok},
		{"x[i] = tg_first(&tg[i])", ok},
		{"threadgroup float* t = tg; x[i] = t[i]", ok},
		{"constant float k[2] = {1, 2}; constant float* c = k; x[i] = c[i & 1]", ok},
		{"x[i] = first(local)", fails},
		{"device float* p = (device float*)&local[1]; x[i] = *p", fails},
		{"x[i] = first(&tg[i])", fails},
		{"x[i] = tg_first(&x[i])", fails},
		{"x[i] = tg_first(local)", fails},
		{"device float* p = (device float*)tg; x[i] = *p", build},
		{"threadgroup float* t = (threadgroup float*)x; x[i] = t[i]", build},
		{"float* q = x; x[i] = q[i]", build},
		{"constant float* c = x; x[i] = c[i]", build},
		{"thread float* p = local, *q = &local[1]; thread float& r = local[2]; x[i] = *p + *q + r", ok},
		{"thread const float4* v = (thread const float4*)local; x[i] = v->y + t_first(local) + t_first(&local[1])", ok},
		{"thread float* w = reinterpret_cast<thread float*>(&local[1]); thread const float& c = x[i] + 1; x[i] = *w + c", ok},
		{"thread float* p = &x[i]; x[i] = *p", fails},
		{"thread float* p = local, *q = &x[i]; x[i] = *p + *q", fails},
		{"thread float& r = x[i]; x[i] = r + 1", fails},
		{"thread float* p = (thread float*)&x[i]; x[i] = *p", fails},
		{"thread float* p = reinterpret_cast<thread float*>(&x[i]); x[i] = *p", fails},
		{"thread float* p = &tg[i]; x[i] = *p", fails},
		{"x[i] = t_first(&x[i])", fails},
		{"x[i] = t_first(&tg[i])", fails},
		{"thread float* p = reinterpret_cast<thread float*>(x); x[i] = p[0]", build},
		{"thread float* p = (thread float*)x; x[i] = p[0]", build},
		{"thread float* p = (thread float*)tg; x[i] = p[0]", build},
		{"thread float* p = local; if (i > 0) p = &local[1]; else p = nullptr; x[i] = p ? *p : 0", ok},
		{"thread float* p = local; p = &x[i]; x[i] = *p", fails},
		{"thread float *p = local, *q = p; q = &tg[i]; x[i] = *q", fails},
		{"thread float* p; p = x; x[i] = p[0]", build},
		{"float* p = local; const float4* v = (const float4*)local; x[i] = *p + v->y", ok},
		{"float* p = &x[i]; x[i] = *p", fails},
		{"const float* p = local, *q = &tg[i]; x[i] = *p + *q", fails},
		{"float* p = local; p = &x[i]; x[i] = *p", fails},
		{"auto* p = &x[i]; x[i] = *p", ok},
		{"x[i] = p_first(local) + p_first(&local[2])", ok},
		{"x[i] = p_first(&x[i])", fails},
		{"x[i] = p_first(&tg[i])", fails},
		{"float& r = local[2]; float& s = r, &u = local[1]; p_inc(local[3]); x[i] = r + s + u + local[3]", ok},
		{"const float& c = x[i]; float const& d = tg[i]; x[i] = c + d", ok},
		{"float& r = x[i]; x[i] = r + 1", fails},
		{"float& r = local[2], &s = tg[i]; x[i] = r + s", fails},
		{"vec<float, 4> v = 0; vec<float, 4>& w = v; w = *(device float4*)x; x[i] = w.x", ok},
		{"x[i] = 1; p_inc(x[i])", fails},
		{"p_inc(tg[i]); x[i] = tg[i]", fails},
	}
	// The cases that build share one library: each library loaded maps its
	// own fiber stacks.
	lib := caseLibrary(t, dev, head, len(cases), func(name string, j int) string {
		if cases[j].want == build {
			return "\n"
		}
		return kernel(name, cases[j].body)
	})
	for j, c := range cases {
		at := fmt.Sprintf("k.metal:%d:", 6+j)
		if strings.HasPrefix(c.body, "x[i] = t_first(&") || strings.HasPrefix(c.body, "x[i] = p_first(&") || strings.Contains(c.body, "p_inc(x") ||
			strings.HasPrefix(c.body, "p_inc(tg") {
			at = "k.metal:5:" // the thread pointer parameter's line
		}
		if c.want == build {
			_, err := dev.NewLibrary(map[string]string{"k.metal": head + strings.Repeat("\n", j) + kernel("k", c.body)}, mtl.CompileOptions{})
			var ce *emu.CompileError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), at) {
				t.Errorf("%s: got %v, want a CompileError at %s", c.body, err, at)
			}
			continue
		}
		err := runCase(t, dev, lib, j, 32, arg{buf: newBuf(t, dev, 4*32)})
		var ee *emu.ExecutionError
		switch {
		case c.want == ok && err != nil:
			t.Errorf("%s: %v", c.body, err)
		case c.want == fails && (!errors.As(err, &ee) || !strings.Contains(err.Error(), at) || !strings.Contains(err.Error(), "converted to a")):
			t.Errorf("%s: got %v, want an ExecutionError at %s (a pointer converted between address spaces)", c.body, err, at)
		}
	}
}

func TestEncodingErrors(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "reduce.metal")
	p := pipe(t, lib, "tg_reverse", nil)
	err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{32, 1, 1}, arg{buf: newBuf(t, dev, 128)})
	if err == nil || !strings.Contains(err.Error(), "buffer(1) 'out' is not bound") {
		t.Errorf("unbound buffer: %v", err)
	}
	err = run(t, dev, p, [3]int{1, 1, 1}, [3]int{2048, 1, 1}, arg{buf: newBuf(t, dev, 128)}, arg{buf: newBuf(t, dev, 128)}, arg{tg: 64})
	if err == nil || !strings.Contains(err.Error(), "2048 threads per threadgroup exceed") {
		t.Errorf("too many threads: %v", err)
	}
	if _, err := lib.Pipeline("nope", nil); err == nil || !strings.Contains(err.Error(), "no kernel \"nope\"") {
		t.Errorf("unknown kernel: %v", err)
	}
}

func BenchmarkRMSNorm64x4096(b *testing.B) {
	dev := newDevice(b, emu.Options{})
	p := pipe(b, testLibrary(b, dev, "reduce.metal"), "rms_norm", nil)
	const rows, dim = 64, 4096
	x, w := rmsInputs(rows, dim)
	xb, wb, out := f16Buf(b, dev, x), f16Buf(b, dev, w), newBuf(b, dev, 2*rows*dim)
	args := u32Bytes(dim, math.Float32bits(1e-6))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := run(b, dev, p, [3]int{rows, 1, 1}, [3]int{256, 1, 1}, arg{buf: xb}, arg{buf: wb}, arg{buf: out}, arg{bytes: args}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLlamaStyleIdioms runs a dequantize-and-multiply kernel written the
// way llama.cpp writes them (see testdata/idioms.metal).
func TestLlamaStyleIdioms(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "idioms.metal")
	const m, k = 16, 32
	for _, c := range []struct {
		kernel string
		n      int
		bounds bool
	}{{"mm_q8_f16", 12, true}, {"mm_f16_f16", 16, false}, {"mm_q8_f16", 16, false}} {
		a := make([]float32, m*k) // dequantized A
		var src0 []byte
		for r := 0; r < m; r++ {
			for blk := 0; blk < k/16; blk++ {
				if c.kernel == "mm_q8_f16" {
					src0 = binary.LittleEndian.AppendUint16(src0, f32ToF16(0.5))
					for i := 0; i < 16; i++ {
						q := int8((r*3+blk*5+i*7)%16 - 8)
						src0 = append(src0, byte(q))
						a[r*k+blk*16+i] = float32(q) * 0.5
					}
				} else {
					for i := 0; i < 16; i++ {
						v := float32((r+blk*3+i*5)%9-4) / 2
						src0 = binary.LittleEndian.AppendUint16(src0, f32ToF16(v))
						a[r*k+blk*16+i] = v
					}
				}
			}
		}
		b := make([]float32, c.n*k)
		for i := range b {
			b[i] = float32((i*11)%13-6) / 4
		}
		s0 := newBuf(t, dev, len(src0))
		copy(s0.Contents(), src0)
		dst := newBuf(t, dev, 4*m*c.n)
		args := make([]byte, 24)
		binary.LittleEndian.PutUint32(args[0:], m)
		binary.LittleEndian.PutUint32(args[4:], uint32(c.n))
		binary.LittleEndian.PutUint32(args[8:], k)
		binary.LittleEndian.PutUint64(args[16:], uint64(len(src0)/m))
		p := pipe(t, lib, c.kernel, mtl.FunctionConstants{100: c.bounds, 101: int16(1)})
		err := run(t, dev, p, [3]int{(c.n + 7) / 8, m / 8, 1}, [3]int{32, 1, 1},
			arg{bytes: args}, arg{buf: s0}, arg{buf: f16Buf(t, dev, b)}, arg{buf: dst}, arg{tg: 512})
		if err != nil {
			t.Fatal(err)
		}
		got := f32s(dst)
		for i := 0; i < m; i++ {
			for j := 0; j < c.n; j++ {
				var want float32
				for l := 0; l < k; l++ {
					want += a[i*k+l] * b[j*k+l]
				}
				want *= 0.5
				if got[i*c.n+j] != want {
					t.Fatalf("%s n=%d: dst[%d][%d] = %v, want %v", c.kernel, c.n, i, j, got[i*c.n+j], want)
				}
			}
		}
	}
}

func TestCoverage(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "coverage.metal")
	in := make([]float32, 64)
	for i := range in {
		in[i] = float32(i%7) - 2
	}
	out := newBuf(t, dev, 4*8*64)
	if err := run(t, dev, pipe(t, lib, "lanes", nil), [3]int{1, 1, 1}, [3]int{64, 1, 1}, arg{buf: f32Buf(t, dev, in)}, arg{buf: out}); err != nil {
		t.Fatal(err)
	}
	got := f32s(out)
	for i := 0; i < 64; i++ {
		q := i &^ 3
		sg := i &^ 31
		var incl float32
		for l := sg; l <= i; l++ {
			incl += in[l]
		}
		want := []float32{in[q] + in[q+1] + in[q+2] + in[q+3], in[i^1], in[sg+(i+1)%32], 1, 0, 0, incl, in[sg]}
		if i == sg {
			want[5] = 1
		}
		for k, w := range want {
			if got[i*8+k] != w {
				t.Fatalf("lane %d op %d: got %v, want %v", i, k, got[i*8+k], w)
			}
		}
	}

	p := pipe(t, lib, "misc", nil)
	if p.MaxTotalThreadsPerThreadgroup() != 64 {
		t.Errorf("MaxTotalThreadsPerThreadgroup = %d, want 64", p.MaxTotalThreadsPerThreadgroup())
	}
	res, ctr, mat := newBuf(t, dev, 44), newBuf(t, dev, 4), f32Buf(t, dev, make([]float32, 64))
	binary.LittleEndian.PutUint32(mat.Contents()[4:], math.Float32bits(3))
	table := f32Buf(t, dev, []float32{8})
	if err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{64, 1, 1}, arg{buf: res}, arg{buf: ctr}, arg{buf: mat}, arg{buf: table}); err != nil {
		t.Fatal(err)
	}
	want := []uint32{64, 7, 29, 1, 0x3f800000, 4, 6, 35, 65504, 5, 11}
	if got := u32s(res); [11]uint32(got) != [11]uint32(want) {
		t.Errorf("misc: got %v, want %v", got, want)
	}
	if got := u32s(ctr)[0]; got != 42 {
		t.Errorf("compare-exchange: %d", got)
	}
	for i, v := range f32s(mat) {
		if w := float32(0); i%9 == 0 && v != 2 || i%9 != 0 && v != w {
			t.Fatalf("diagonal matrix element %d = %v", i, v)
		}
	}
	if err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{128, 1, 1}, arg{buf: res}, arg{buf: ctr}, arg{buf: mat}, arg{buf: table}); err == nil {
		t.Error("128 threads ran a kernel limited to 64")
	}
}

func TestMoreFaults(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "faults.metal")
	out := newBuf(t, dev, 256)
	err := run(t, dev, pipe(t, lib, "tg_index", nil), [3]int{1, 1, 1}, [3]int{64, 1, 1}, arg{buf: out})
	wantExecError(t, err, "kernel tg_index: threadgroup array index 32 out of range [0, 32)")
	err = run(t, dev, pipe(t, lib, "split_barrier", nil), [3]int{1, 1, 1}, [3]int{64, 1, 1}, arg{buf: out})
	wantExecError(t, err, "kernel split_barrier: threadgroup_barrier at faults.metal:", "reached by 32 of 64 threads, the others wait at faults.metal:")

	// A buffer that a function constant made optional is used all the same.
	ax := pipe(t, testLibrary(t, dev, "matmul.metal"), "axpb", mtl.FunctionConstants{0: true})
	err = run(t, dev, ax, [3]int{1, 1, 1}, [3]int{4, 1, 1}, arg{buf: out}, arg{buf: newBuf(t, dev, 16)})
	wantExecError(t, err, "kernel axpb: access through a null pointer: buffer(2) 'bias' is not bound")
}

// A vector load at an address its type does not align to fails the command
// buffer, naming the buffer, as a GPU would refuse it (instead of the
// host's aligned load faulting the process).
func TestMisalignedVectorLoad(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	p := pipe(t, testLibrary(t, dev, "faults.metal"), "misaligned_load", nil)
	in := f32Buf(t, dev, make([]float32, 64))
	out := newBuf(t, dev, 4*8)
	err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{8, 1, 1}, arg{buf: in}, arg{buf: out})
	wantExecError(t, err, "kernel misaligned_load: misaligned 16-byte access to buffer(0) 'in' at byte 4", "16-byte alignment")
	t.Log(err)
}

// A member function called on an object in an address space it is not
// declared for fails the command buffer, as Apple's compiler refuses it;
// overloads by address space merge into one definition.
func TestThisAddressSpace(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "this_space.metal")
	in := newBuf(t, dev, 2*8)
	for i := range 8 {
		binary.LittleEndian.PutUint16(in.Contents()[2*i:], 0x3f80+uint16(i)) // 1.0, 1.0078125, ...
	}
	want := func(i int) float32 { return math.Float32frombits(uint32(0x3f80+i) << 16) }
	for _, tc := range []struct {
		kernel string
		err    string
		times  float32
	}{
		{"read_thread_only", "bits_thread::operator float called on an object in device memory", 0},
		{"copy_then_read", "", 1},
		{"read_all", "", 3},
		{"read_tmpl", "", 2},
		{"device_on_thread", "bits_device::get called on an object in thread memory", 0},
	} {
		t.Run(tc.kernel, func(t *testing.T) {
			out := newBuf(t, dev, 4*8)
			err := run(t, dev, pipe(t, lib, tc.kernel, nil), [3]int{1, 1, 1}, [3]int{8, 1, 1}, arg{buf: in}, arg{buf: out})
			if tc.err != "" {
				wantExecError(t, err, "kernel "+tc.kernel+": "+tc.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range 8 {
				if got := math.Float32frombits(binary.LittleEndian.Uint32(out.Contents()[4*i:])); got != tc.times*want(i) {
					t.Errorf("out[%d] = %v, want %v", i, got, tc.times*want(i))
				}
			}
		})
	}
}

// TestConstructorsByAddressSpace builds a struct whose constructors are
// declared for several address spaces with one body each (MLX's
// complex_t): the emulator drops the spaces, and the duplicates must not
// redeclare the first (testdata/this_space.metal).
func TestConstructorsByAddressSpace(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "this_space.metal")
	in := []float32{0.5, 1.5, 2.5, 3.5}
	out := newBuf(t, dev, 16)
	if err := run(t, dev, pipe(t, lib, "build_cplx", nil), [3]int{1, 1, 1}, [3]int{4, 1, 1}, arg{buf: f32Buf(t, dev, in)}, arg{buf: out}); err != nil {
		t.Fatal(err)
	}
	for i, got := range f32s(out) {
		if want := in[i] + float32(i) + 1; got != want {
			t.Errorf("out[%d] = %v, want %v", i, got, want)
		}
	}
}

// In a concurrent pass, a dispatch that reads what an earlier one writes
// sees it only with a memory barrier between them: the emulator runs each
// run of dispatches between barriers in reverse, so a missing barrier
// shows as a wrong result; the witness still lists them in encoding order.
func TestConcurrentPassNeedsBarriers(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	add := pipe(t, testLibrary(t, dev, "matmul.metal"), "add_f32", nil)
	for _, barrier := range []bool{false, true} {
		a := f32Buf(t, dev, []float32{1, 2, 3, 4})
		b := f32Buf(t, dev, []float32{10, 20, 30, 40})
		c := f32Buf(t, dev, make([]float32, 4))
		d := f32Buf(t, dev, make([]float32, 4))
		q, _ := dev.NewCommandQueue()
		cb, _ := q.CommandBuffer()
		enc, err := cb.ConcurrentEncoder()
		if err != nil {
			t.Fatal(err)
		}
		enc.SetPipeline(add)
		enc.SetBuffer(a, 0, 0)
		enc.SetBuffer(b, 0, 1)
		enc.SetBuffer(c, 0, 2)
		enc.DispatchThreads([3]int{4, 1, 1}, [3]int{4, 1, 1}) // c = a + b
		if barrier {
			enc.MemoryBarrier()
		}
		enc.SetBuffer(c, 0, 0)
		enc.SetBuffer(d, 0, 2)
		enc.DispatchThreads([3]int{4, 1, 1}, [3]int{4, 1, 1}) // d = c + b
		enc.End()
		cb.Commit()
		if err := cb.Wait(); err != nil {
			t.Fatal(err)
		}
		got := math.Float32frombits(binary.LittleEndian.Uint32(d.Contents()))
		if want := map[bool]float32{false: 10, true: 21}[barrier]; got != want {
			t.Errorf("barrier %v: d[0] = %v, want %v", barrier, got, want)
		}
		st := cb.(mtl.CostWitness).DispatchStats()
		if len(st) != 2 || st[0].Cost.BytesWritten != 16 {
			t.Errorf("barrier %v: witness %+v, want both dispatches in encoding order", barrier, st)
		}
	}
}

// Macros a Metal compiler cannot take are refused as on a Mac
// (mtl.CheckDefines), so a library that builds here builds there.
func TestBadDefines(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	src := map[string]string{"k.metal": "kernel void k(device float* x [[buffer(0)]]) { x[0] = V; }"}
	for _, defs := range []map[string]string{{"V": "\xff"}, {"1V": "1"}, {"V": "1\n#define W 2"}} {
		if _, err := dev.NewLibrary(src, mtl.CompileOptions{LanguageVersion: "3.1", Defines: defs}); err == nil || !strings.Contains(err.Error(), "preprocessor macro") {
			t.Errorf("defines %q: %v", defs, err)
		}
	}
}

// Each half and bfloat operation rounds its result to its type, as in
// Metal, where clang kept a float's precision through an expression: on
// every x86-64 CPU for bfloat, and for half on one without AVX512-FP16
// (forced here, as are x86-64's without AVX512-BF16). Each kernel writes
// its value at x[i] for x[i] = i.
func TestHalfArithmeticRounds(t *testing.T) {
	opts := emu.Options{}
	if runtime.GOARCH == "amd64" {
		opts.CFlags = append(noBF16Flags(t), "-mno-avx512fp16")
	}
	dev := newDevice(t, opts)
	inf := float32(math.Inf(1))
	cases := []elementCase{
		// 2049 is no half: it rounds to 2048.
		{"const half a = half(2048 + x[i] * 0), b = half(1); x[i] += float(a + b - a)", func(i int) float32 { return float32(i) }},
		// 1000 * 1000 overflows a half before the division.
		{"const half a = half(x[i] + 1000); x[i] = float(a * a / a)", func(int) float32 { return inf }},
		{"const half4 a = half4(2048 + x[i] * 0), b = half4(1); x[i] += float((a + b - a).w)", func(i int) float32 { return float32(i) }},
		// 1 + 2^-8 is no bfloat: it rounds to 1, the even neighbour.
		{"const bfloat a = bfloat(1.0f + x[i] * 0), e = bfloat(0.00390625f); x[i] += float((a + e) - a) * 256", func(i int) float32 { return float32(i) }},
		{"const bfloat a = bfloat(256 + x[i] * 0), b = bfloat(1); x[i] += float(a + b - a)", func(i int) float32 { return float32(i) }},
		{"const bfloat2 a = bfloat2(256 + x[i] * 0), b = bfloat2(1); x[i] += float((a + b - a).y)", func(i int) float32 { return float32(i) }},
	}
	runElementCases(t, dev, "#include <metal_stdlib>\nusing namespace metal;\n", cases)
}

// Float to bfloat conversions round to nearest even and keep NaNs, also
// where clang lowers them to a call of __truncsfbf2 (x86-64 without
// AVX512-BF16, forced here) and the system's libgcc lacks it (before GCC
// 13): the runtime carries its own.
func TestBFloatConversionRounds(t *testing.T) {
	opts := emu.Options{}
	if runtime.GOARCH == "amd64" {
		opts.CFlags = noBF16Flags(t)
	}
	dev := newDevice(t, opts)
	src := `#include <metal_stdlib>
using namespace metal;
kernel void to_bfloat(device const float* x [[buffer(0)]], device bfloat* y [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
	y[i] = bfloat(x[i]);
}
`
	l, err := dev.NewLibrary(map[string]string{"bf.metal": src}, mtl.CompileOptions{LanguageVersion: "3.1"})
	if err != nil {
		t.Fatal(err)
	}
	bits := []uint32{
		0x3f800000, // 1
		0x3f808000, // a tie: to the even 0x3f80
		0x3f818000, // a tie: to the even 0x3f82
		0x3f80ffff, // above the tie
		0xbf807fff, // below the tie, negative
		0x00018000, // a subnormal tie
		0x7f7fffff, // the largest float: rounds to infinity
		0xff800000, // -infinity
		0x7fa00001, // a signalling NaN: quiet, its sign and top payload kept
		0xffc00000, // a negative quiet NaN
	}
	want := []uint16{0x3f80, 0x3f80, 0x3f82, 0x3f81, 0xbf80, 0x0002, 0x7f80, 0xff80, 0x7fe0, 0xffc0}
	in := make([]float32, len(bits))
	for i, b := range bits {
		in[i] = math.Float32frombits(b)
	}
	out := newBuf(t, dev, 2*len(in))
	if err := run(t, dev, pipe(t, l, "to_bfloat", nil), [3]int{1, 1, 1}, [3]int{len(in), 1, 1},
		arg{buf: f32Buf(t, dev, in)}, arg{buf: out}); err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		if got := binary.LittleEndian.Uint16(out.Contents()[2*i:]); got != w {
			t.Errorf("bfloat(%#08x) = %#04x, want %#04x", bits[i], got, w)
		}
	}
}

// noBF16Flags turn AVX512-BF16 off for -march=native, whose conversion
// instruction flushes subnormals. On a CPU with AVX10.1 the feature comes
// back with AVX10 unless that is off too, which clang knows from 18 on.
func noBF16Flags(t *testing.T) []string {
	flags := []string{"-mno-avx512bf16"}
	cc, err := emu.FindCompiler("")
	if err != nil {
		t.Skip(err)
	}
	if m := regexp.MustCompile(`clang version (\d+)\.`).FindStringSubmatch(cc.Version); m != nil {
		if major, _ := strconv.Atoi(m[1]); major >= 18 {
			flags = append(flags, "-mno-avx10.1-256")
		}
	}
	return flags
}

// TestCompileNotice: a first run compiles for a minute or more, so a
// device says so once before it compiles, and nothing when the cache holds
// the library.
func TestCompileNotice(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	dir := t.TempDir()
	src := "#include <metal_stdlib>\nusing namespace metal;\nkernel void k%d(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] += 1; }\n"
	for _, c := range []struct {
		name    string
		kernels []int // one library each, on one device
		want    int
	}{
		{"runtime and library compiled", []int{1}, 1},
		{"cached", []int{1}, 0},
		{"two compiles, one notice", []int{2, 3}, 1},
	} {
		var notes []string
		dev := emu.New(emu.Options{CacheDir: dir, Notice: func(m string) { notes = append(notes, m) }})
		for _, k := range c.kernels {
			if _, err := dev.NewLibrary(map[string]string{"k.metal": fmt.Sprintf(src, k)}, mtl.CompileOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if len(notes) != c.want {
			t.Errorf("%s: %d notices %q, want %d", c.name, len(notes), notes, c.want)
		}
		for _, n := range notes {
			if !strings.Contains(n, "compiling the Metal kernels") || !strings.Contains(n, dir) {
				t.Errorf("%s: notice %q names neither the compile nor the cache %s", c.name, n, dir)
			}
		}
	}
}

// CompileOptions.NoFastMath compiles without fused multiply-adds: a*b+c
// with a = b = 1+2^-12 and c = -(1+2^-11) is 0 when the product is rounded
// first and 2^-24 when it is fused. The fast-math build comes first, so a
// cache that did not key on the option would hand it back.
func TestNoFastMathCompile(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	src := map[string]string{"fma.metal": `#include <metal_stdlib>
using namespace metal;
kernel void mul_add(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                    uint i [[thread_position_in_grid]]) {
	y[i] = x[0] * x[1] + x[2];
}
`}
	a := float32(1 + 1.0/4096)
	c := -float32(1 + 1.0/2048)
	hasFMA := runtime.GOARCH == "arm64"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil && regexp.MustCompile(`(?m)^flags\s*:.*\bfma\b`).Match(b) {
		hasFMA = true
	}
	for _, tc := range []struct {
		name       string
		noFastMath bool
		want       float32
		check      bool
	}{
		{"fast math", false, 1.0 / (1 << 24), hasFMA}, // contracted only where the CPU fuses
		{"fast math off", true, 0, true},
	} {
		lib, err := dev.NewLibrary(src, mtl.CompileOptions{LanguageVersion: "3.1", NoFastMath: tc.noFastMath})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		x := f32Buf(t, dev, []float32{a, a, c})
		y := newBuf(t, dev, 4)
		if err := run(t, dev, pipe(t, lib, "mul_add", nil), [3]int{1, 1, 1}, [3]int{1, 1, 1}, arg{buf: x}, arg{buf: y}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := math.Float32frombits(binary.LittleEndian.Uint32(y.Contents()))
		if tc.check && got != tc.want {
			t.Errorf("%s: a*b+c = %g, want %g", tc.name, got, tc.want)
		}
	}
}

// Metal fails a pipeline whose kernel's threadgroup variables exceed the
// device's 32 KiB of threadgroup memory (maxThreadgroupMemoryLength), a
// variable in a branch that never runs included, and a dispatch whose
// static and dynamic threadgroup memory together do: the pipeline knows its
// static length before it runs.
func TestStaticThreadgroupMemory(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = `#include <metal_stdlib>
using namespace metal;
kernel void k32(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { threadgroup float s[8192]; s[i] = 1; x[i] = s[i]; }
kernel void k33(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { threadgroup float s[8448]; s[i] = 1; x[i] = s[i]; }
kernel void two(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { threadgroup float a[4096]; threadgroup half b[8704]; a[i] = 1; b[i] = 1; x[i] = a[i]; }
kernel void branch(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { if (i > 1000000) { threadgroup float s[8448]; s[0] = 1; x[0] = s[0]; } x[i] = 1; }
template <typename T, int N>
kernel void tk(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { threadgroup T s[N]; s[i] = 1; x[i] = s[i]; }
template [[host_name("tk_small")]] kernel void tk<float, 256>(device float*, uint);
template [[host_name("tk_big")]] kernel void tk<float, 8448>(device float*, uint);
kernel void k16(device float* x [[buffer(0)]], threadgroup float* d [[threadgroup(0)]], uint i [[thread_position_in_grid]]) { threadgroup float s[4096]; s[i] = 1; d[i] = 1; x[i] = s[i] + d[i]; }
`
	lib := newLibrary(t, dev, src)
	for _, c := range []struct {
		kernel string
		dyn    int    // dynamic threadgroup(0) bytes, for k16
		static int    // the pipeline's length, when it builds
		err    string // the error's line and bytes; "": none
	}{
		{kernel: "k32", static: 32768},
		{kernel: "k33", err: "k.metal:4: kernel k33: 33792 bytes"},
		{kernel: "two", err: "k.metal:5: kernel two: 33792 bytes"},
		{kernel: "branch", err: "k.metal:6: kernel branch: 33792 bytes"},
		{kernel: "tk_small", static: 1024},
		{kernel: "tk_big", err: "k.metal:10: kernel tk_big: 33792 bytes"},
		{kernel: "k16", dyn: 16 << 10, static: 16384},
		{kernel: "k16", dyn: 17 << 10, static: 16384, err: "k.metal:11: kernel k16: 33792 bytes of threadgroup memory (16384 static, 17408 dynamic)"},
	} {
		p, err := lib.Pipeline(c.kernel, nil)
		if c.static == 0 {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: Pipeline: got %v, want an error with %q", c.kernel, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.kernel, err)
			continue
		}
		if n := p.StaticThreadgroupMemoryLength(); n != c.static {
			t.Errorf("%s: StaticThreadgroupMemoryLength = %d, want %d", c.kernel, n, c.static)
		}
		args := []arg{{buf: newBuf(t, dev, 4*32)}}
		if c.dyn > 0 {
			args = append(args, arg{tg: c.dyn})
		}
		err = run(t, dev, p, [3]int{1, 1, 1}, [3]int{32, 1, 1}, args...)
		if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s with %d dynamic bytes: got %v, want error %q", c.kernel, c.dyn, err, c.err)
		}
	}
}
