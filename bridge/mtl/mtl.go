// Package mtl is the thin Metal device API of mtlbench: the few Metal
// objects a compute backend needs (device, buffers, libraries compiled from
// MSL source, pipelines, command queues and buffers, compute encoders), shaped
// like Metal's own so that the purego/objc layer on darwin is a direct
// mapping. bridge/mtl/emu implements it on the CPU, which is how the Metal
// backend and its kernels run in Linux CI.
//
// Errors follow Metal: encoding calls return nothing, and a command buffer's
// Wait reports the first encoding mistake or execution error (Metal's
// MTLCommandBufferStatusError with its NSError).
package mtl

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Device is an MTLDevice.
type Device interface {
	// Name is the GPU's name (MTLDevice.name).
	Name() string
	// UnifiedMemory reports whether CPU and GPU share memory (hasUnifiedMemory).
	UnifiedMemory() bool
	// RecommendedMaxWorkingSetSize is the memory the GPU can use without
	// hurting performance, in bytes (recommendedMaxWorkingSetSize).
	RecommendedMaxWorkingSetSize() int64
	// MaxBufferLength is the largest buffer NewBuffer can make, in bytes.
	MaxBufferLength() int64
	// MaxThreadgroupMemoryLength is the threadgroup memory one threadgroup
	// may use, static and dynamic together, in bytes (32 KiB on Apple GPUs).
	MaxThreadgroupMemoryLength() int
	// MaxThreadsPerThreadgroup is the device's limit on threads in one
	// threadgroup (maxThreadsPerThreadgroup.width; 1024 on Apple GPUs).
	MaxThreadsPerThreadgroup() int
	// NewBuffer makes a zeroed buffer in shared storage
	// (MTLResourceStorageModeShared): Contents is visible to the host.
	NewBuffer(length int) (Buffer, error)
	// NewLibrary compiles MSL source (newLibraryWithSource:options:). files
	// maps a file name to its source; files may #include each other by name.
	// Compile errors name the file and line.
	NewLibrary(files map[string]string, opts CompileOptions) (Library, error)
	// NewCommandQueue makes a queue whose command buffers run in commit order.
	NewCommandQueue() (CommandQueue, error)
	// Emulated reports whether this device is the CPU emulator, whose timings
	// say nothing about a GPU.
	Emulated() bool
}

// CompileOptions is the part of MTLCompileOptions that kernels depend on.
type CompileOptions struct {
	// LanguageVersion is the MSL version, e.g. "3.1". Set it: a cgo-less
	// binary otherwise gets MSL 2.4, without bfloat. Empty means "3.1".
	LanguageVersion string
	// Defines are preprocessor macros (preprocessorMacros); an empty value
	// defines the name as 1.
	Defines map[string]string
	// NoFastMath turns off fastMathEnabled, which Metal enables by default
	// (reassociation, fused multiply-adds, faster and less precise
	// exp/log/division): it tells a kernel's error from fast math's. The
	// emulator then compiles with -ffp-contract=off instead of =fast.
	NoFastMath bool
}

// CheckDefines refuses macros a Metal compiler cannot take: a name that is
// not an identifier, or a value that is not one line of UTF-8 (NSString
// turns invalid UTF-8 into nil, and NSDictionary answers a nil value with
// an exception that ends the process). Both devices apply it, so a library
// that builds on one builds on the other.
func CheckDefines(defs map[string]string) error {
	for k, v := range defs {
		if !isIdentifier(k) {
			return fmt.Errorf("metal: preprocessor macro name %q is not an identifier", k)
		}
		if !utf8.ValidString(v) || strings.ContainsAny(v, "\r\n") {
			return fmt.Errorf("metal: preprocessor macro %s: value %q is not one line of UTF-8", k, v)
		}
	}
	return nil
}

func isIdentifier(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// Buffer is an MTLBuffer in shared storage.
type Buffer interface {
	// Contents is the buffer's memory; it stays valid until Release.
	Contents() []byte
	// Length is the buffer's size in bytes.
	Length() int
	// Release frees the buffer; it must not be in use by an uncompleted
	// command buffer.
	Release()
}

// FunctionConstants are MTLFunctionConstantValues by index: each value is a
// bool, int32, uint32, float32 (or int, uint16, int16, uint8, int8, float64,
// converted to the constant's declared type).
type FunctionConstants map[int]any

// Library is an MTLLibrary.
type Library interface {
	// Pipeline specialises a kernel with function constants and makes its
	// compute pipeline state (newFunctionWithName:constantValues: then
	// newComputePipelineStateWithFunction:). Pipelines are cached by name
	// and constants; a function constant the kernel needs but fc lacks is an
	// error, as in Metal.
	Pipeline(kernel string, fc FunctionConstants) (Pipeline, error)
	// FunctionNames lists the library's kernels, host names for template
	// instantiations (functionNames).
	FunctionNames() []string
}

// Pipeline is an MTLComputePipelineState.
type Pipeline interface {
	// Name is the kernel's name.
	Name() string
	// MaxTotalThreadsPerThreadgroup is the most threads one threadgroup of
	// this pipeline may have.
	MaxTotalThreadsPerThreadgroup() int
	// ThreadExecutionWidth is the SIMD-group width (32 on Apple GPUs).
	ThreadExecutionWidth() int
	// StaticThreadgroupMemoryLength is the threadgroup memory the kernel
	// declares itself, in bytes.
	StaticThreadgroupMemoryLength() int
}

// CommandQueue is an MTLCommandQueue.
type CommandQueue interface {
	// CommandBuffer makes a command buffer (commandBuffer).
	CommandBuffer() (CommandBuffer, error)
}

// CommandBuffer is an MTLCommandBuffer.
type CommandBuffer interface {
	// ComputeEncoder starts a serial compute pass (computeCommandEncoder):
	// its dispatches run in encoding order. End the previous encoder first.
	ComputeEncoder() (ComputeEncoder, error)
	// ConcurrentEncoder starts a concurrent compute pass
	// (computeCommandEncoderWithDispatchType: MTLDispatchTypeConcurrent):
	// dispatches between two memory barriers may run in any order or at
	// once, so the encoder puts a MemoryBarrier between dependent ones.
	ConcurrentEncoder() (ComputeEncoder, error)
	// Commit submits the command buffer; it runs after the ones committed
	// to the same queue before it.
	Commit()
	// Wait blocks until the command buffer completed (waitUntilCompleted)
	// and returns its error, if its status is MTLCommandBufferStatusError.
	Wait() error
	// GPUTime is when the GPU started and finished executing the command
	// buffer (GPUStartTime, GPUEndTime), in seconds of host time: Mach
	// absolute time on a Mac, seconds since the device was made on the
	// emulator. Only differences, and the order of one queue's command
	// buffers, mean anything; valid after Wait.
	GPUTime() (start, end float64)
}

// ComputeEncoder is an MTLComputeCommandEncoder. Indices are the kernel's
// [[buffer(n)]] and [[threadgroup(n)]] indices, 0 to 30.
type ComputeEncoder interface {
	// SetPipeline selects the kernel for the following dispatches
	// (setComputePipelineState:).
	SetPipeline(Pipeline)
	// SetBuffer binds b, from byte offset on, to [[buffer(index)]]
	// (setBuffer:offset:atIndex:).
	SetBuffer(b Buffer, offset, index int)
	// SetBytes binds a copy of data, at most 4 KiB, to [[buffer(index)]]
	// (setBytes:length:atIndex:).
	SetBytes(data []byte, index int)
	// SetThreadgroupMemoryLength sizes the dynamic [[threadgroup(index)]]
	// memory of the following dispatches, in bytes, a multiple of 16
	// (setThreadgroupMemoryLength:atIndex:).
	SetThreadgroupMemoryLength(length, index int)
	// DispatchThreadgroups runs groups threadgroups of threadsPerGroup
	// threads each (dispatchThreadgroups:threadsPerThreadgroup:).
	DispatchThreadgroups(groups, threadsPerGroup [3]int)
	// DispatchThreads runs a grid of threads threads, in threadgroups of at
	// most threadsPerGroup; the groups at the grid's edges are smaller
	// (dispatchThreads:threadsPerThreadgroup:, Apple GPUs).
	DispatchThreads(threads, threadsPerGroup [3]int)
	// MemoryBarrier makes the buffer writes of earlier dispatches visible to
	// later ones and orders them (memoryBarrierWithScope:
	// MTLBarrierScopeBuffers); a serial encoder already does.
	MemoryBarrier()
	// End finishes the pass (endEncoding).
	End()
}

// NoCopyDevice is implemented by devices that can wrap host memory in a
// buffer without copying it (newBufferWithBytesNoCopy:length:options:
// deallocator:), which is how weights from an mmap'd checkpoint reach the
// GPU. The memory must start on a page boundary (os.Getpagesize()) and be a
// whole number of pages long, must not be Go heap memory (mmap it), and must
// be at most MaxBufferLength bytes. It must stay mapped until the buffer is
// released and every command buffer that used it has completed: Metal keeps
// the MTLBuffer alive for a command buffer in flight, not the memory it
// wraps, and a GPU that reads unmapped memory faults.
type NoCopyDevice interface {
	NewBufferNoCopy(b []byte) (Buffer, error)
}

// CoreCounter is implemented by devices that know their GPU core count,
// which Metal's API does not give: the darwin device reads the
// IORegistry's gpu-core-count, and the emulator takes one to model a GPU.
// GPUCores is 0 when unknown.
type CoreCounter interface {
	GPUCores() int
}

// GPUCores is dev's GPU core count, 0 when it does not know it.
func GPUCores(dev Device) int {
	if c, ok := dev.(CoreCounter); ok {
		return max(c.GPUCores(), 0)
	}
	return 0
}

// LanguageVersionNumber turns an MSL version ("3.1") into the number
// __METAL_VERSION__ gives it (310), so versions compare as numbers; ok is
// false for one that is no major.minor of a single-digit minor.
func LanguageVersionNumber(v string) (n int, ok bool) {
	maj, min, _ := strings.Cut(v, ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if err1 != nil || err2 != nil && min != "" || a < 1 || b < 0 || b > 9 {
		return 0, false
	}
	return a*100 + b*10, true
}
