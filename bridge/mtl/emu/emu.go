// Package emu implements the mtl device API on the CPU, so Metal kernels
// (.metal sources) and the Metal backend above bridge/mtl run on Linux.
//
// A library's MSL is preprocessed by clang, rewritten (rewrite.go) into C++
// for the shim header runtime/metal_stdlib, compiled with clang into a shared
// object and loaded with purego (no cgo). Each threadgroup runs its threads
// as fibers (runtime/emu_runtime.cpp), so threadgroup_barrier, simd_* and
// simdgroup_matrix operations behave as on the GPU with 32-wide
// simdgroups. Device pointers are bounds-checked, threadgroup memory is
// checked for races between barriers, and barriers that not every thread
// reaches are reported; these faults fail the command buffer with an
// ExecutionError naming the kernel. docs/msl-subset.md lists what MSL is
// supported. Compiled libraries are cached under os.UserCacheDir().
package emu

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge/mtl"
)

// Options tune the emulator; the zero value is a good default.
type Options struct {
	// Stop, once closed, ends every dispatch at its next threadgroup (its
	// running threads at their next loop round) and fails its command
	// buffer with ErrStopped: an emulated step can take
	// minutes, and an interrupted run need not wait it out.
	Stop <-chan struct{}
	// DispatchTimeout fails a dispatch whose threadgroups make no progress
	// for this long (no threadgroup of it started), of wall time and of
	// the process's CPU time alike (a stalled process is not a stuck
	// kernel; docs/msl-subset.md, "The time limit"), as a GPU's watchdog
	// fails a command buffer that runs too long: a kernel stuck in an
	// endless loop (or recursion) then fails with an ExecutionError naming
	// the loop (or function), instead of hanging its command buffer. 0 means
	// DefaultDispatchTimeout; a negative value, no limit
	// (MTLBENCH_EMU_TIMEOUT).
	DispatchTimeout time.Duration
	// Workers is how many OS threads run the threadgroups of one dispatch
	// (each with its own fibers and threadgroup memory); 0 means GOMAXPROCS.
	Workers int
	// NoRaceCheck turns off the threadgroup-memory race check, which costs
	// time on every threadgroup memory access.
	NoRaceCheck bool
	// ReverseLanes runs each simdgroup's lanes last to first between sync
	// points, where they run first to last by default: a kernel whose
	// results differ between the two orders relies on its lanes running in
	// lockstep (docs/msl-subset.md, "Lanes in lockstep";
	// MTLBENCH_EMU_REVERSE_LANES).
	ReverseLanes bool
	// NoCostWitness turns off counting each dispatch's device traffic,
	// loads, barriers and launches (mtl.CostWitness); counting costs a few
	// additions per device access.
	NoCostWitness bool
	// NoFootprint turns off the witness's footprint (Cost.FootprintRead and
	// FootprintWritten), which marks each device access in a bitmap of its
	// buffer and counts the bitmaps once a dispatch ends.
	NoFootprint bool
	// BuildTimeout stops clang where one step of a library's build (its
	// preprocessing, its compilation) runs longer, failing the build with a
	// CompileError that names the limit. 0 means DefaultBuildTimeout; a
	// negative value, no limit.
	BuildTimeout time.Duration
	// CacheDir is where compiled libraries are kept; empty means
	// os.UserCacheDir()/mtlbench/msl-emu (MTLBENCH_EMU_CACHE).
	CacheDir string
	// Clang is the clang++ (16 or newer) that compiles kernels; empty
	// searches $PATH (MTLBENCH_CLANG).
	Clang string
	// CFlags are extra compiler flags for debugging the emulator itself,
	// e.g. -DMSL_EMU_UCONTEXT (the portable fiber switch) or -O0 -g
	// (MTLBENCH_EMU_CFLAGS).
	CFlags []string
	// PipelineThreads, when set, is a pipeline's maxTotalThreadsPerThreadgroup
	// by kernel name (0: no limit of its own): the emulator then behaves as
	// a GPU whose register allocation leaves a heavy kernel fewer threads
	// than the device's 1024, as Apple's compiler may. A kernel's
	// [[max_total_threads_per_threadgroup]] bounds it too.
	PipelineThreads func(kernel string) int
	// Cores is the GPU core count the device reports (mtl.CoreCounter), so
	// launch shapes that follow a GPU's cores run here as on that GPU; 0:
	// unknown, as the emulator is no GPU.
	Cores int
	// Notice receives one line, once per device, before its first compile
	// that misses the cache: a first run compiles the kernels for a minute
	// or more (docs/msl-subset.md); nil: not told.
	Notice func(string)
}

// DefaultBuildTimeout is Options.BuildTimeout's default: it stops a clang
// that hangs, not a large library, and llama.cpp's whole kernel library
// compiles for 7 minutes on two shared cores (docs/msl-subset.md).
const DefaultBuildTimeout = 20 * time.Minute

// DefaultDispatchTimeout is Options.DispatchTimeout's default: a
// threadgroup of the emulator runs for milliseconds, seldom a second.
const DefaultDispatchTimeout = 30 * time.Second

// Device is the emulated GPU. It has Apple GPU limits: 32 KiB of threadgroup
// memory, 1024 threads per threadgroup, simdgroups of 32.
type Device struct {
	opts  Options
	epoch time.Time
}

var (
	_ mtl.Device      = (*Device)(nil)
	_ mtl.CoreCounter = (*Device)(nil)
)

// New returns an emulated device. It does not look for clang: NewLibrary
// reports a missing compiler, and FindCompiler tells beforehand.
func New(opts Options) *Device {
	if opts.CacheDir == "" {
		opts.CacheDir = DefaultCacheDir()
	}
	if n := opts.Notice; n != nil {
		var once sync.Once
		opts.Notice = func(msg string) { once.Do(func() { n(msg) }) }
	}
	return &Device{opts: opts, epoch: time.Now()}
}

// Name says what the device is.
func (d *Device) Name() string { return "msl-emu (Apple GPU emulated on the CPU)" }

// GPUCores is Options.Cores: the GPU the emulator stands for, 0 for none.
func (d *Device) GPUCores() int { return max(d.opts.Cores, 0) }

// UnifiedMemory is true: buffers live in host memory, as on Apple silicon.
func (d *Device) UnifiedMemory() bool { return true }

// RecommendedMaxWorkingSetSize is three quarters of the host's memory.
func (d *Device) RecommendedMaxWorkingSetSize() int64 { return hostMemory() / 4 * 3 }

// MaxBufferLength is half the host's memory, as Metal reports on Macs.
func (d *Device) MaxBufferLength() int64 { return hostMemory() / 2 }

// MaxThreadgroupMemoryLength is 32 KiB, the Apple GPU limit.
func (d *Device) MaxThreadgroupMemoryLength() int { return 32 << 10 }

// MaxThreadsPerThreadgroup is 1024, the Apple GPU limit.
func (d *Device) MaxThreadsPerThreadgroup() int { return 1024 }

// Emulated is true.
func (d *Device) Emulated() bool { return true }

func hostMemory() int64 {
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 16 << 30
}

// now is the device clock: seconds since the device was made.
func (d *Device) now() float64 { return time.Since(d.epoch).Seconds() }

type buffer struct {
	mem      []byte
	borrowed bool // wraps the caller's memory (NewBufferNoCopy): never freed here
	released atomic.Bool
}

// NewBuffer maps zeroed host memory.
func (d *Device) NewBuffer(length int) (mtl.Buffer, error) {
	if length <= 0 || int64(length) > d.MaxBufferLength() {
		return nil, fmt.Errorf("msl-emu: buffer length %d out of range (1 to %d)", length, d.MaxBufferLength())
	}
	mem, err := allocShared(length)
	if err != nil {
		return nil, fmt.Errorf("msl-emu: allocating %d bytes: %w", length, err)
	}
	return &buffer{mem: mem}, nil
}

func (b *buffer) Contents() []byte {
	if b.released.Load() {
		return nil
	}
	return b.mem
}

func (b *buffer) Length() int { return len(b.mem) }

func (b *buffer) Release() {
	if b.released.CompareAndSwap(false, true) && !b.borrowed {
		freeShared(b.mem)
	}
}

// NewBufferNoCopy wraps page-aligned host memory, with the rules Metal's
// newBufferWithBytesNoCopy imposes, so the backend's no-copy path runs here.
func (d *Device) NewBufferNoCopy(b []byte) (mtl.Buffer, error) {
	page := os.Getpagesize()
	if len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%uintptr(page) != 0 || len(b)%page != 0 {
		return nil, fmt.Errorf("msl-emu: NewBufferNoCopy needs page-aligned memory a whole number of %d-byte pages long", page)
	}
	if int64(len(b)) > d.MaxBufferLength() {
		return nil, fmt.Errorf("msl-emu: NewBufferNoCopy of %d bytes exceeds MaxBufferLength %d", len(b), d.MaxBufferLength())
	}
	return &buffer{mem: b, borrowed: true}, nil
}

type library struct {
	dev   *Device
	lib   *clib
	info  *libInfo
	mu    sync.Mutex
	pipes map[string]*pipeline
}

// NewLibrary compiles the MSL files (or loads them from the cache).
func (d *Device) NewLibrary(files map[string]string, opts mtl.CompileOptions) (mtl.Library, error) {
	so, info, err := buildLibrary(d.opts, files, opts)
	if err != nil {
		return nil, err
	}
	l, err := openLib(so)
	if err != nil {
		return nil, err
	}
	return &library{dev: d, lib: l, info: info, pipes: map[string]*pipeline{}}, nil
}

func (l *library) FunctionNames() []string {
	var out []string
	for _, k := range l.info.Kernels {
		out = append(out, k.Name)
	}
	sort.Strings(out)
	return out
}

type pipeline struct {
	lib      *library
	k        *kernelInfo
	index    int64
	fcs      []cFC
	maxTotal int
	staticTG atomic.Int64
	tgArgs   []mtl.ThreadgroupArg // the kernel's [[threadgroup(n)]] arguments
}

func (p *pipeline) Name() string                       { return p.k.Name }
func (p *pipeline) MaxTotalThreadsPerThreadgroup() int { return p.maxTotal }
func (p *pipeline) ThreadExecutionWidth() int          { return 32 }

// StaticThreadgroupMemoryLength is the size of the kernel's threadgroup
// variables, each aligned to 16 bytes (or its type's alignment), in the
// order they are declared.
func (p *pipeline) StaticThreadgroupMemoryLength() int { return int(p.staticTG.Load()) }

func (l *library) Pipeline(kernel string, fc mtl.FunctionConstants) (mtl.Pipeline, error) {
	var k *kernelInfo
	for i := range l.info.Kernels {
		if l.info.Kernels[i].Name == kernel {
			k = &l.info.Kernels[i]
		}
	}
	if k == nil {
		return nil, fmt.Errorf("msl-emu: the library has no kernel %q (it has %s)", kernel, strings.Join(l.FunctionNames(), ", "))
	}
	// Metal fails the pipeline's creation when the attribute asks for more
	// threads than the device runs in a threadgroup (docs/msl-subset.md).
	if max := l.dev.MaxThreadsPerThreadgroup(); k.MaxThreads > max {
		return nil, fmt.Errorf("msl-emu: %s:%d: kernel %s: [[max_total_threads_per_threadgroup(%d)]] exceeds the device's %d threads per threadgroup",
			k.File, k.Line, kernel, k.MaxThreads, max)
	}
	var fcs []cFC
	var keys []string
	given := map[int]bool{}
	for _, c := range l.info.FCs {
		v, ok := fc[c.Index]
		if !ok {
			continue
		}
		if given[c.Index] {
			continue // two declarations share an index; one value serves both
		}
		e, err := encodeFC(c, v)
		if err != nil {
			return nil, fmt.Errorf("msl-emu: kernel %s: %w", kernel, err)
		}
		given[c.Index] = true
		fcs = append(fcs, e)
		keys = append(keys, fmt.Sprintf("%d=%d:%d", e.index, e.kind, e.bits))
	}
	for _, use := range k.Uses {
		for _, c := range l.info.FCs {
			if c.Name == use && !c.Guarded && !given[c.Index] {
				return nil, fmt.Errorf("msl-emu: kernel %s needs function constant %d (%s %s, %s:%d)", kernel, c.Index, c.Type, c.Name, c.File, c.Line)
			}
		}
	}
	sort.Strings(keys)
	key := kernel + "|" + strings.Join(keys, ",")
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.pipes[key]; p != nil {
		return p, nil
	}
	idx := l.lib.find(kernel)
	if idx < 0 {
		return nil, fmt.Errorf("msl-emu: kernel %s missing from its compiled library", kernel)
	}
	maxTotal := l.dev.MaxThreadsPerThreadgroup()
	if k.MaxThreads > 0 && k.MaxThreads < maxTotal {
		maxTotal = k.MaxThreads
	}
	if f := l.dev.opts.PipelineThreads; f != nil {
		if n := f(kernel); n > 0 && n < maxTotal {
			maxTotal = n
		}
	}
	// Metal fails the pipeline's creation when the kernel's threadgroup
	// variables exceed the device's threadgroup memory (docs/msl-subset.md).
	// Array sizes are constant expressions, so function constants do not
	// change it.
	st := l.lib.staticTG(idx)
	if tgmax := l.dev.MaxThreadgroupMemoryLength(); st > int64(tgmax) {
		return nil, fmt.Errorf("msl-emu: %s:%d: kernel %s: %d bytes of threadgroup variables exceed the device's %d bytes of threadgroup memory",
			k.File, k.Line, kernel, st, tgmax)
	}
	p := &pipeline{lib: l, k: k, index: idx, fcs: fcs, maxTotal: maxTotal}
	for _, prm := range k.Params {
		if prm.Kind == "threadgroup" {
			p.tgArgs = append(p.tgArgs, mtl.ThreadgroupArg{Name: prm.Name, Index: prm.Index})
		}
	}
	p.staticTG.Store(st)
	l.pipes[key] = p
	return p, nil
}

// encodeFC checks a function constant value against the declared type and
// encodes it for the runtime.
func encodeFC(c fcInfo, v any) (cFC, error) {
	t := strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(c.Type, "const ", ""), "static ", ""))
	class := "other"
	switch t {
	case "bool":
		class = "bool"
	case "float", "half", "bfloat":
		class = "float"
	case "int", "uint", "short", "ushort", "char", "uchar", "long", "ulong", "int32_t", "uint32_t", "int16_t",
		"uint16_t", "int8_t", "uint8_t", "int64_t", "uint64_t", "unsigned", "unsigned int", "size_t":
		class = "int"
	}
	bad := func() error {
		return fmt.Errorf("function constant %d (%s %s) cannot take %T %v", c.Index, c.Type, c.Name, v, v)
	}
	e := cFC{index: int64(c.Index)}
	var i int64
	var isInt, unsigned bool
	switch x := v.(type) {
	case bool:
		if class != "bool" && class != "other" {
			return e, bad()
		}
		e.kind = 0
		if x {
			e.bits = 1
		}
		return e, nil
	case float32:
		if class != "float" && class != "other" {
			return e, bad()
		}
		e.kind, e.bits = 3, math.Float64bits(float64(x))
		return e, nil
	case float64:
		if class != "float" && class != "other" {
			return e, bad()
		}
		e.kind, e.bits = 3, math.Float64bits(x)
		return e, nil
	case int:
		i, isInt = int64(x), true
	case int8:
		i, isInt = int64(x), true
	case int16:
		i, isInt = int64(x), true
	case int32:
		i, isInt = int64(x), true
	case int64:
		i, isInt = x, true
	case uint:
		i, isInt, unsigned = int64(x), true, true
	case uint8:
		i, isInt, unsigned = int64(x), true, true
	case uint16:
		i, isInt, unsigned = int64(x), true, true
	case uint32:
		i, isInt, unsigned = int64(x), true, true
	case uint64:
		i, isInt, unsigned = int64(x), true, true
	}
	if !isInt || class == "bool" || class == "float" {
		return e, bad()
	}
	if lo, hi := intRange(t); hi != 0 && (unsigned && uint64(i) > uint64(hi) || !unsigned && (i < lo || i > hi)) {
		return e, fmt.Errorf("function constant %d (%s %s): %v out of range", c.Index, c.Type, c.Name, v)
	}
	e.kind, e.bits = 1, uint64(i)
	if unsigned {
		e.kind = 2
	}
	return e, nil
}

func intRange(t string) (int64, int64) {
	switch t {
	case "char", "int8_t":
		return -128, 127
	case "uchar", "uint8_t":
		return 0, 255
	case "short", "int16_t":
		return -32768, 32767
	case "ushort", "uint16_t":
		return 0, 65535
	case "int", "int32_t":
		return -1 << 31, 1<<31 - 1
	case "uint", "uint32_t", "unsigned", "unsigned int":
		return 0, 1<<32 - 1
	}
	return -1 << 63, 0 // 64-bit: no check
}

func defaultWorkers(n int) int {
	if n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}
