//go:build darwin && arm64

package darwin

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/mtlbench/mtlbench/bridge/mtl"
)

// device is an MTLDevice. Its properties are read once, when it is made.
type device struct {
	id uintptr

	name          string
	unified       bool
	workingSet    int64
	maxBuffer     int64
	maxTGMemory   int
	maxThreads    int
	appleFamily   int
	cores         int // the IORegistry's gpu-core-count, 0: unknown
	stageCounters bool
	timestampSet  uintptr // the device's MTLCounterSet named MTLCommonCounterSetTimestamp, or 0
}

var (
	_ mtl.Device   = (*device)(nil)
	_ NoCopyDevice = (*device)(nil)
	_ TimingInfo   = (*device)(nil)

	_ mtl.CoreCounter = (*device)(nil)
)

// New opens the system's Metal device. The device also implements
// NoCopyDevice and TimingInfo; compile options (fast math included) come
// with each NewLibrary.
func New() (mtl.Device, error) {
	if err := load(); err != nil {
		return nil, err
	}
	d := &device{}
	var err error
	onMetalThread(func() { err = d.open() })
	if err != nil {
		return nil, err
	}
	return d, nil
}

func (d *device) open() error {
	id, _, _ := purego.SyscallN(rt.createSystemDefaultDevice) // +1, kept for the process's life
	if id == 0 && rt.copyAllDevices != 0 {
		// A process that is not an app may get no default device; the list
		// still has it.
		arr, _, _ := purego.SyscallN(rt.copyAllDevices) // +1
		if arr != 0 {
			if msg(arr, sel.count) > 0 {
				id = msg(arr, sel.objectAtIndex, 0)
				retain(id)
			}
			release(arr)
		}
	}
	if id == 0 {
		return errors.New("metal: no Metal device (MTLCreateSystemDefaultDevice and MTLCopyAllDevices found none)")
	}
	d.id = id
	d.name = goString(msg(id, sel.name))
	d.unified = msgBool(id, sel.hasUnifiedMemory)
	d.workingSet = int64(msg(id, sel.recommendedMaxWorkingSetSize))
	d.maxBuffer = int64(msg(id, sel.maxBufferLength))
	d.maxTGMemory = int(msg(id, sel.maxThreadgroupMemoryLength))
	d.maxThreads = int(rt.sendSize(id, sel.maxThreadsPerThreadgroup).W)
	// MTLGPUFamilyApple7 (1007) is M1, Apple8 M2, Apple9 M3 and M4.
	for f := 1010; f >= 1001; f-- {
		if msgBool(id, sel.supportsFamily, uintptr(f)) {
			d.appleFamily = f - 1000
			break
		}
	}
	d.cores = gpuCores()
	d.stageCounters = msgBool(id, sel.supportsCounterSampling, samplingStage)
	if d.stageCounters && rt.timestampCounterSet != 0 {
		sets := msg(id, sel.counterSets)
		n := 0
		if sets != 0 {
			n = int(msg(sets, sel.count))
		}
		for i := 0; i < n; i++ {
			s := msg(sets, sel.objectAtIndex, uintptr(i))
			if msgBool(msg(s, sel.name), sel.isEqualToString, rt.timestampCounterSet) {
				retain(s)
				d.timestampSet = s
				break
			}
		}
	}
	return nil
}

// Name is MTLDevice.name, e.g. "Apple M2 Pro".
func (d *device) Name() string { return d.name }

// UnifiedMemory is hasUnifiedMemory: true on Apple silicon.
func (d *device) UnifiedMemory() bool { return d.unified }

// RecommendedMaxWorkingSetSize is recommendedMaxWorkingSetSize.
func (d *device) RecommendedMaxWorkingSetSize() int64 { return d.workingSet }

// MaxBufferLength is maxBufferLength.
func (d *device) MaxBufferLength() int64 { return d.maxBuffer }

// MaxThreadgroupMemoryLength is maxThreadgroupMemoryLength (32 KiB).
func (d *device) MaxThreadgroupMemoryLength() int { return d.maxTGMemory }

// MaxThreadsPerThreadgroup is maxThreadsPerThreadgroup.width (1024).
func (d *device) MaxThreadsPerThreadgroup() int { return d.maxThreads }

// GPUCores is the GPU's core count from the IORegistry, 0 where it could
// not be read.
func (d *device) GPUCores() int { return d.cores }

// Emulated is false: this is the GPU.
func (d *device) Emulated() bool { return false }

// AppleFamily is the highest MTLGPUFamilyAppleN the device supports (7 on
// M1, 8 on M2, 9 on M3 and M4), or 0 where it supports none.
func (d *device) AppleFamily() int { return d.appleFamily }

// SupportsStageBoundaryCounters reports supportsCounterSampling:
// MTLCounterSamplingPointAtStageBoundary.
func (d *device) SupportsStageBoundaryCounters() bool { return d.stageCounters }

// TimingMode says how per-layer GPU time can be measured on this device.
func (d *device) TimingMode() string {
	if d.stageCounters && d.timestampSet != 0 {
		return TimingCounters
	}
	return TimingCommandBuffer
}

// NewBuffer makes a zeroed shared buffer (newBufferWithLength:options:,
// which clears it).
func (d *device) NewBuffer(length int) (mtl.Buffer, error) {
	if length <= 0 || int64(length) > d.maxBuffer {
		return nil, fmt.Errorf("metal: buffer length %d out of range (1 to %d)", length, d.maxBuffer)
	}
	var id, contents uintptr
	onMetalThread(func() {
		id = msg(d.id, sel.newBufferWithLength, uintptr(length), storageShared)
		if id != 0 {
			contents = msg(id, sel.contents)
		}
	})
	if id == 0 || contents == 0 {
		if id != 0 {
			onMetalThread(func() { release(id) })
		}
		return nil, fmt.Errorf("metal: newBufferWithLength:%d failed (out of memory?)", length)
	}
	return &buffer{id: id, mem: unsafe.Slice((*byte)(ptr(contents)), length), free: releaseBuffer}, nil
}

// NewBufferNoCopy wraps b, which must be page-aligned memory from outside
// Go's heap (see NoCopyDevice), in a shared buffer without copying it.
func (d *device) NewBufferNoCopy(b []byte) (mtl.Buffer, error) {
	page := os.Getpagesize()
	if len(b) == 0 {
		return nil, errors.New("metal: NewBufferNoCopy of an empty slice")
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%uintptr(page) != 0 || len(b)%page != 0 {
		return nil, fmt.Errorf("metal: NewBufferNoCopy needs page-aligned memory a whole number of %d-byte pages long (got address %#x, %d bytes): mmap it and round the length up", page, uintptr(p), len(b))
	}
	if int64(len(b)) > d.maxBuffer {
		return nil, fmt.Errorf("metal: NewBufferNoCopy of %d bytes exceeds maxBufferLength %d: wrap the mapping in several buffers", len(b), d.maxBuffer)
	}
	var id uintptr
	onMetalThread(func() {
		// No deallocator: the caller owns the mapping.
		id = msg(d.id, sel.newBufferWithBytesNoCopy, uintptr(p), uintptr(len(b)), storageShared, 0)
	})
	if id == 0 {
		return nil, fmt.Errorf("metal: newBufferWithBytesNoCopy of %d bytes at %#x failed", len(b), uintptr(p))
	}
	return &buffer{id: id, mem: b, free: releaseBuffer}, nil
}

// releaseBuffer is buffer.free for the buffers of this package.
func releaseBuffer(id uintptr) { onMetalThread(func() { release(id) }) }
