package darwin

import "github.com/mtlbench/mtlbench/bridge/mtl"

// Options tune the device; the zero value is what New uses.
type Options struct {
	// NoFastMath turns off MTLCompileOptions.fastMathEnabled, which Metal
	// enables by default (it allows reassociation and faster, less precise
	// exp/log/division). Set it to tell kernel error from fast-math error.
	NoFastMath bool
}

// NoCopyDevice is implemented by devices that can wrap host memory in a
// buffer without copying it (newBufferWithBytesNoCopy:length:options:
// deallocator:), which is how the backend maps weights from an mmap'd
// checkpoint straight into the GPU's view.
//
// The memory must:
//   - start on a page boundary (os.Getpagesize(): 16 KiB on Apple silicon)
//     and be a whole number of pages long: round an mmap's length up to the
//     page size (the last partial page of a file maps fine);
//   - not be Go heap memory: the garbage collector may free it while the GPU
//     reads it, and cgo's rules forbid handing it to C for keeps. Use
//     syscall.Mmap (file or anonymous) or another allocation outside Go;
//   - stay mapped until the buffer is Released and no uncompleted command
//     buffer uses it (Metal frees nothing: the deallocator is nil);
//   - be at most MaxBufferLength bytes; split larger mappings into several
//     buffers.
//
// Read-only mappings (PROT_READ) are fine for buffers kernels only read; a
// kernel writing to one faults the command buffer.
type NoCopyDevice interface {
	NewBufferNoCopy(b []byte) (mtl.Buffer, error)
}

// Timing modes a device reports through TimingInfo.
const (
	// TimingCounters: the GPU samples timestamps at the start and end of each
	// compute pass (MTLCounterSamplingPointAtStageBoundary, as Apple silicon
	// does), so one command buffer with one timed encoder per layer gives
	// per-layer times (TimedCommandBuffer).
	TimingCounters = "stage-boundary-counters"
	// TimingCommandBuffer: only a command buffer's GPU start and end times
	// are known, so per-layer timing takes one command buffer per layer,
	// each committed and waited on, which adds the launch gaps between them.
	TimingCommandBuffer = "command-buffer"
)

// TimingInfo is implemented by the Metal device: what per-layer timing it
// can do, to record with a profile.
type TimingInfo interface {
	// TimingMode is TimingCounters when stage-boundary counter sampling works
	// on this device (supportsCounterSampling: and a timestamp counter set),
	// and TimingCommandBuffer otherwise.
	TimingMode() string
	// SupportsStageBoundaryCounters reports supportsCounterSampling:
	// MTLCounterSamplingPointAtStageBoundary, whatever the timestamp
	// counter set says.
	SupportsStageBoundaryCounters() bool
}

// PassTime is when the GPU started and finished one compute pass, in seconds
// on the clock of CommandBuffer.GPUTime.
type PassTime struct {
	Start, End float64
}

// TimedCommandBuffer is implemented by the Metal device's command buffers
// when its TimingMode is TimingCounters.
type TimedCommandBuffer interface {
	// TimedComputeEncoder starts a compute pass, like ComputeEncoder, whose
	// start and end the GPU timestamps.
	TimedComputeEncoder() (mtl.ComputeEncoder, error)
	// PassTimes returns the times of the timed passes in encoding order;
	// valid after Wait.
	PassTimes() ([]PassTime, error)
}
