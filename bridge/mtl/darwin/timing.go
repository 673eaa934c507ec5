package darwin

// timestampPair is one reading of the CPU and GPU clocks at the same moment
// (MTLDevice sampleTimestamps:gpuTimestamp:); Apple documents the CPU value
// as nanoseconds of Mach absolute time, the clock GPUStartTime reads in
// seconds.
type timestampPair struct {
	cpu, gpu uint64
}

// gpuSeconds converts a GPU timestamp to seconds of host time by the line
// through two clock readings taken around the work, as Apple's "Converting
// GPU timestamps into CPU time" describes. With no GPU span to scale by, a
// GPU tick counts as a nanosecond (Apple silicon's GPU clock ticks in ns).
func gpuSeconds(cal [2]timestampPair, g uint64) float64 {
	x := float64(int64(g - cal[0].gpu))
	if dg := int64(cal[1].gpu - cal[0].gpu); dg > 0 {
		x *= float64(int64(cal[1].cpu-cal[0].cpu)) / float64(dg)
	}
	return (float64(cal[0].cpu) + x) / 1e9
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
