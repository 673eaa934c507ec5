package darwin

import "fmt"

// timestampPair is one reading of the CPU and GPU clocks at the same moment
// (MTLDevice sampleTimestamps:gpuTimestamp:); Apple documents the CPU value
// as nanoseconds of Mach absolute time, the clock GPUStartTime reads in
// seconds. The GPU value is in the GPU's own ticks, whose rate Metal does
// not give: only two readings tell it.
type timestampPair struct {
	cpu, gpu uint64
}

// gpuClock places GPU timestamps on host time: the line through two clock
// readings taken around the work, as Apple's "Converting GPU timestamps
// into CPU time" describes.
type gpuClock struct {
	cpu0, gpu0 uint64  // the first reading
	nsPerTick  float64 // CPU nanoseconds per GPU tick over the two readings
}

// calibrate is the clock of cal's two readings. It refuses readings that
// give no tick rate (a GPU or CPU clock that did not advance, or went
// back, over a whole command buffer): assuming one, a nanosecond a tick
// say, would give pass times off by the GPU's unknown rate.
func calibrate(cal [2]timestampPair) (gpuClock, error) {
	dg := int64(cal[1].gpu - cal[0].gpu)
	dc := int64(cal[1].cpu - cal[0].cpu)
	if cal[0].gpu == 0 || dg <= 0 || dc <= 0 {
		return gpuClock{}, fmt.Errorf("metal: the clocks read before and after the command buffer give no GPU tick rate (GPU %d to %d, CPU %d to %d ns): its pass times cannot be placed on host time",
			cal[0].gpu, cal[1].gpu, cal[0].cpu, cal[1].cpu)
	}
	return gpuClock{cpu0: cal[0].cpu, gpu0: cal[0].gpu, nsPerTick: float64(dc) / float64(dg)}, nil
}

// seconds converts a GPU timestamp to seconds of host time.
func (c gpuClock) seconds(g uint64) float64 {
	return (float64(c.cpu0) + float64(int64(g-c.gpu0))*c.nsPerTick) / 1e9
}

// counterErrorValue is MTLCounterErrorValue: a sample the GPU did not take.
const counterErrorValue = ^uint64(0)

// passSampled checks one timed pass's start and end samples against the
// clock readings taken before the command buffer was committed and after it
// completed: a sample the GPU did not take reads as 0 or the error value, or,
// in a reused sample buffer, as a timestamp left by an earlier command
// buffer, which lies before this one was committed.
func passSampled(cal [2]timestampPair, s, e uint64) bool {
	switch {
	case s == 0 || e == 0 || s == counterErrorValue || e == counterErrorValue || e < s:
		return false
	case cal[0].gpu != 0 && s < cal[0].gpu:
		return false // stale
	case cal[1].gpu != 0 && e > cal[1].gpu:
		return false
	}
	return true
}
