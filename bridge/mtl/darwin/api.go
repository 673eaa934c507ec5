package darwin

import "github.com/mtlbench/mtlbench/bridge/mtl"

// NoCopyDevice is mtl.NoCopyDevice: see its rules for the memory it wraps.
type NoCopyDevice = mtl.NoCopyDevice

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
