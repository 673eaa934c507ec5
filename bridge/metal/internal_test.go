package metal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	kmetal "github.com/mtlbench/mtlbench/kernels/metal"
)

// oneToken is the metadata of a step of one token that writes no KV cache.
func oneToken() *bridge.StepMeta {
	return &bridge.StepMeta{NumTokens: 1, NumSeqs: 1, Positions: []int32{0}, SlotMapping: []int32{-1}, QueryStartLoc: []int32{0, 1}, SeqLens: []int32{1}}
}

func emuDevice(t testing.TB) *emu.Device {
	t.Helper()
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	return emu.New(emu.Options{})
}

// TestArgLayouts compiles a kernel that writes sizeof and every field's
// offset and size of the header's argument structs, as the kernel compiler
// lays them out, and compares them with the Go mirrors. The Go fields must
// cover every byte (padding named, as the header's rule has it, and sizes
// multiples of 16): a C field in a gap the Go struct left would otherwise
// pass, read by the kernel as whatever the host wrote there.
func TestArgLayouts(t *testing.T) {
	var names []string
	for n := range argStructs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		rt := reflect.TypeOf(argStructs[n])
		at := uintptr(0)
		for i := range rt.NumField() {
			f := rt.Field(i)
			if f.Offset != at {
				t.Errorf("%s.%s: at byte %d, after %d bytes of unnamed padding", n, f.Tag.Get("msl"), f.Offset, f.Offset-at)
			}
			at = f.Offset + f.Type.Size()
		}
		if at != rt.Size() || rt.Size()%16 != 0 {
			t.Errorf("%s: %d bytes, its fields %d; want a multiple of 16 with every byte named", n, rt.Size(), at)
		}
	}
	dev := emuDevice(t)
	var src strings.Builder
	var want []uint32
	var what []string
	src.WriteString("#include \"mtlbench.h\"\nkernel void layouts(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  if (i != 0) return;\n  uint n = 0;\n")
	for _, n := range names {
		rt := reflect.TypeOf(argStructs[n])
		fmt.Fprintf(&src, "  out[n++] = sizeof(%s);\n", n)
		want = append(want, uint32(rt.Size()))
		what = append(what, "sizeof "+n)
		for i := range rt.NumField() {
			f := rt.Field(i)
			fmt.Fprintf(&src, "  out[n++] = __builtin_offsetof(%s, %s);\n", n, f.Tag.Get("msl"))
			fmt.Fprintf(&src, "  out[n++] = sizeof(%s::%s);\n", n, f.Tag.Get("msl"))
			want = append(want, uint32(f.Offset), uint32(f.Type.Size()))
			what = append(what, n+"."+f.Tag.Get("msl"), "sizeof "+n+"."+f.Tag.Get("msl"))
		}
	}
	fmt.Fprintf(&src, "  out[n++] = sizeof(MoETile);\n}\n")
	want = append(want, moeTileSize)
	what = append(what, "sizeof MoETile")
	h, _ := kmetal.Sources.ReadFile("mtlbench.h")
	lib, err := dev.NewLibrary(map[string]string{"layouts.metal": src.String(), "mtlbench.h": string(h)}, mtl.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := run1(t, dev, lib, "layouts", nil, 4*len(want), [3]int{1, 1, 1}, [3]int{1, 1, 1})
	for i, w := range want {
		if g := binary.LittleEndian.Uint32(out[4*i:]); g != w {
			t.Errorf("%s: MSL %d, Go %d", what[i], g, w)
		}
	}
}

// run1 runs kernel once with a fresh output buffer at index 0 and the
// given extra buffers at 1, 2, ...; it returns the output.
func run1(t *testing.T, dev mtl.Device, lib mtl.Library, kernel string, args []byte, outLen int, groups, tpg [3]int, extra ...mtl.Buffer) []byte {
	t.Helper()
	p, err := lib.Pipeline(kernel, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := dev.NewBuffer(outLen)
	q, _ := dev.NewCommandQueue()
	cb, _ := q.CommandBuffer()
	enc, _ := cb.ComputeEncoder()
	enc.SetPipeline(p)
	enc.SetBuffer(out, 0, 0)
	for i, b := range extra {
		enc.SetBuffer(b, 0, i+1)
	}
	if args != nil {
		enc.SetBytes(args, len(extra)+1)
	}
	enc.DispatchThreadgroups(groups, tpg)
	enc.End()
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
	return out.Contents()
}

// TestOutOfBoundsCaught: an add whose input is shorter than its output,
// through the backend's own op, fails the step with the emulator's
// out-of-bounds report instead of reading past the buffer.
func TestOutOfBoundsCaught(t *testing.T) {
	be, err := New(emuDevice(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	out, _ := be.Alloc(bridge.F32, 100)
	short, _ := be.Alloc(bridge.F32, 10)
	long, _ := be.Alloc(bridge.F32, 100)
	meta := oneToken()
	if err := be.BeginStep(meta, []int32{0}, false); err != nil {
		t.Fatal(err)
	}
	be.Add(out, long, short)
	_, err = be.EndStep()
	var ee *emu.ExecutionError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "kernel add: out-of-bounds access to buffer(2) 'y'") {
		t.Fatalf("got %v, want the emulator's out-of-bounds error", err)
	}
	t.Log(err)
}

// A dispatch binds buffers 0..30, as a Metal function's argument table
// holds: every index up to 30 is taken (split-K decode attention with RoPE
// and QK-norm fused binds 17 buffers), and one past it fails the step with
// an error instead of a crash.
func TestBindingsUpToMetalsTable(t *testing.T) {
	be, err := New(emuDevice(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	meta := oneToken()
	if err := be.BeginStep(meta, []int32{0}, false); err != nil {
		t.Fatal(err)
	}
	be.args(nil)
	for i := 1; i < maxBindings; i++ {
		be.bind(i, view{}, false)
	}
	if be.step.err != nil || be.step.nb != maxBindings {
		t.Fatalf("%d bindings held, error %v: want all %d", be.step.nb, be.step.err, maxBindings)
	}
	be.bind(maxBindings, view{}, false)
	be.step.nb = 0
	_, err = be.EndStep()
	if err == nil || !strings.Contains(err.Error(), "buffer index 31") {
		t.Fatalf("got %v, want the step failed at buffer index 31", err)
	}
}

// TestRaceCaught plants a race in the real rms_norm: tg_sum without the
// barrier between writing the simdgroup sums and reading them.
func TestRaceCaught(t *testing.T) {
	dev := emuDevice(t)
	all := kmetal.Files()
	h := all["mtlbench.h"]
	const planted = "    buf[sg] = v;\n  }\n  threadgroup_barrier(mem_flags::mem_threadgroup);\n  float t = 0.0f;"
	if !strings.Contains(h, planted) {
		t.Fatal("tg_sum changed: update the planted race")
	}
	files := map[string]string{"norm.metal": all["norm.metal"], "norm.h": all["norm.h"],
		"mtlbench.h": strings.Replace(h, planted, "    buf[sg] = v;\n  }\n  float t = 0.0f;", 1)}
	lib, err := dev.NewLibrary(files, mtl.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const rows, dim = 2, 256
	args := make([]byte, 16)
	binary.LittleEndian.PutUint32(args[0:], rows)
	binary.LittleEndian.PutUint32(args[4:], dim)
	binary.LittleEndian.PutUint32(args[8:], math.Float32bits(1e-6))
	x, _ := dev.NewBuffer(4 * rows * dim)
	w, _ := dev.NewBuffer(4 * dim)
	for i := range rows * dim {
		binary.LittleEndian.PutUint32(x.Contents()[4*i:], math.Float32bits(float32(i%7)))
	}
	out, _ := dev.NewBuffer(4 * rows * dim)
	p, err := lib.Pipeline("rms_norm", mtl.FunctionConstants{fcNormVec: true})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := dev.NewCommandQueue()
	cb, _ := q.CommandBuffer()
	enc, _ := cb.ComputeEncoder()
	enc.SetPipeline(p)
	enc.SetBytes(args, 0)
	enc.SetBuffer(x, 0, 1)
	enc.SetBuffer(w, 0, 2)
	enc.SetBuffer(out, 0, 3)
	enc.DispatchThreadgroups([3]int{rows, 1, 1}, [3]int{128, 1, 1})
	enc.End()
	cb.Commit()
	err = cb.Wait()
	if err == nil || !strings.Contains(err.Error(), "kernel rms_norm: threadgroup memory race on 'partial'") {
		t.Fatalf("got %v, want a race on partial", err)
	}
	t.Log(err)
}

// TestAmalgamation compiles the sources as the one translation unit a
// real Metal compiler gets (the emulator compiles each .metal file on its
// own, which would hide a symbol two files both define).
func TestAmalgamation(t *testing.T) {
	dev := emuDevice(t)
	one, err := dev.NewLibrary(map[string]string{"mtlbench_all.metal": kmetal.Amalgamation()}, mtl.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	split, err := dev.NewLibrary(kmetal.Files(), mtl.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := one.FunctionNames(), split.FunctionNames(); !reflect.DeepEqual(a, b) {
		t.Errorf("amalgamation has kernels %v, the files %v", a, b)
	}
}

// The packed tiles' defaults keep the float tiles' rules (at most 64 rows,
// for the kernels' per-row arrays; 4×4 8×8 tiles a simdgroup), take k steps
// of one 32-value unit, and stage their activation rows and weight matrices
// (two for gate and up) in the threadgroup memory a tile may take.
func TestPackedTilesFit(t *testing.T) {
	for _, c := range []struct {
		name string
		t    Tile
		mats int
	}{{"qmatmul_mm", qmmTile, 1}, {"qmoe_mm_gate_up", qmoeTile, 2}, {"qmoe_mm_down", qmoeTile, 1}} {
		if err := c.t.checkPacked(c.name, c.mats); err != nil {
			t.Error(err)
		}
	}
}

// TestPackedTileStages: a packed tile double buffers its k steps where two
// stages fit the tile memory (31 KiB) and keeps one where they do not: the
// untuned qmatmul_mm tile (64 × 128, 27 KiB a stage) and qmoe_mm_gate_up's
// gate and up rows (22.5 KiB) one, qmoe_mm_down's (13.5 KiB) two.
func TestPackedTileStages(t *testing.T) {
	for _, c := range []struct {
		name          string
		t             Tile
		mats          int
		bytes, stages int
	}{
		{"qmatmul_mm", qmmTile, 1, 27648, 1},
		{"qmoe_mm_gate_up", qmoeTile, 2, 23040, 1},
		{"qmoe_mm_down", qmoeTile, 1, 27648, 2},
		{"qmatmul_mm 32x64", Tile{BM: 32, BN: 64, BK: qmmBK, SGM: 2, SGN: 2}, 1, 27648, 2},
		{"qmoe_mm_gate_up 32x32", Tile{BM: 32, BN: 32, BK: qmmBK, SGM: 2, SGN: 2}, 2, 27648, 2},
		{"qmatmul_mm 64x64", Tile{BM: 64, BN: 64, BK: qmmBK, SGM: 2, SGN: 2}, 1, 18432, 1},
	} {
		bytes, stages := qmmMemory(c.t, c.mats)
		if bytes != c.bytes || stages != c.stages {
			t.Errorf("%s %v: %d bytes in %d stages, want %d in %d", c.name, c.t, bytes, stages, c.bytes, c.stages)
		}
		if bytes > tileMemory {
			t.Errorf("%s %v: %d bytes exceed the tile memory %d", c.name, c.t, bytes, tileMemory)
		}
	}
}

// TestPipelineKeysHoldEveryConstant: a pipeline's key holds every function
// constant value, so pipelines that differ only in a late constant (the
// packed kernels' scale type is their eighth) are two pipelines; values that
// do not match the constants, or more than a key holds, are an error, not
// a silently truncated key.
func TestPipelineKeysHoldEveryConstant(t *testing.T) {
	be, err := New(emuDevice(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	vals := func(dt int32) []int32 { return []int32{0, 1, 1, 0, 0, 1, 0, dt, 0, 0, 0} }
	a, err := be.buildPipeline("qmatvec_affine4", fcQMatVec, vals(2)...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := be.buildPipeline("qmatvec_affine4", fcQMatVec, vals(1)...)
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Error("bf16 and f16 scales share a pipeline")
	}
	// The last constant of the packed and float GEMVs, mv_argmax
	// (gemv_argmax), makes a pipeline too.
	for _, c := range []struct {
		kernel string
		fc     []fcSpec
		vals   []int32
	}{
		{"qmatvec_affine4", fcQMatVec, vals(2)},
		{"matvec_fused_bf16", fcMVFused, []int32{0, 4, 1, 1, 0, 0, 0, 0, 0, 0}},
	} {
		plain, err := be.buildPipeline(c.kernel, c.fc, c.vals...)
		if err != nil {
			t.Errorf("%s: %v", c.kernel, err)
			continue
		}
		am := slices.Clone(c.vals)
		am[len(am)-1] = 1
		if p, err := be.buildPipeline(c.kernel, c.fc, am...); err != nil || p == plain {
			t.Errorf("%s mv_argmax: %v, shares the plain GEMV's pipeline: %v", c.kernel, err, p == plain)
		}
	}
	if _, err := be.buildPipeline("argmax", fcNone, 1); err == nil {
		t.Error("a value for a kernel of no constants was taken")
	}
	many := make([]fcSpec, 13)
	for i := range many {
		many[i] = fcSpec{fcMVRows, false}
	}
	if _, err := be.buildPipeline("qmatvec_affine4", many, make([]int32, 13)...); err == nil {
		t.Error("13 constants were taken into a key of 12")
	}
}
