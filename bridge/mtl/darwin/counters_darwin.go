//go:build darwin && arm64

package darwin

import (
	"errors"
	"fmt"
	"unsafe"
)

// sampleBuffer is an MTLCounterSampleBuffer of the timestamp counter set,
// with room for n samples (two per timed pass).
type sampleBuffer struct {
	id uintptr
	n  int
}

// sampleTimestamps reads the CPU and GPU clocks at one moment.
func (d *device) sampleTimestamps() timestampPair {
	var p timestampPair
	msg(d.id, sel.sampleTimestamps, uintptr(unsafe.Pointer(&p.cpu)), uintptr(unsafe.Pointer(&p.gpu)))
	return p
}

// takeSampleBuffer finds a free sample buffer of at least n samples or makes
// one; it runs on the Metal thread. Buffers are reused: making one per
// command buffer would cost more than the passes it times.
func (q *queue) takeSampleBuffer(n int) (*sampleBuffer, error) {
	q.mu.Lock()
	for i, s := range q.samples {
		if s.n >= n {
			q.samples = append(q.samples[:i], q.samples[i+1:]...)
			q.mu.Unlock()
			return s, nil
		}
	}
	q.mu.Unlock()
	if q.dev.timestampSet == 0 {
		return nil, errors.New("metal: the device has no timestamp counter set")
	}
	size := (n + 63) / 64 * 64
	desc := newObject(cls.MTLCounterSampleBufferDescriptor)
	defer release(desc)
	msg(desc, sel.setCounterSet, q.dev.timestampSet)
	msg(desc, sel.setStorageMode, 0) // MTLStorageModeShared
	msg(desc, sel.setSampleCount, uintptr(size))
	var nserr uintptr
	id := msg(q.dev.id, sel.newCounterSampleBuffer, desc, uintptr(unsafe.Pointer(&nserr)))
	if id == 0 {
		return nil, fmt.Errorf("metal: newCounterSampleBufferWithDescriptor (%d samples): %s", size, errorText(nserr))
	}
	return &sampleBuffer{id: id, n: size}, nil
}

func (q *queue) returnSampleBuffer(s *sampleBuffer) {
	if s == nil {
		return
	}
	q.mu.Lock()
	q.samples = append(q.samples, s)
	q.mu.Unlock()
}

// resolvePassTimes reads the timed passes' samples (resolveCounterRange:)
// and converts them, GPU ticks, to seconds of host time by the clock
// readings taken at Commit and now (calibrate). It runs after completion,
// inside Wait's autorelease pool.
func (cb *commandBuffer) resolvePassTimes() {
	if cb.samples == nil {
		cb.passErr = cb.sampleErr
		if cb.passErr == nil {
			cb.passErr = errors.New("metal: the timed passes had no sample buffer")
		}
		return
	}
	cb.calib[1] = cb.q.dev.sampleTimestamps()
	clock, err := calibrate(cb.calib)
	if err != nil {
		cb.passErr = err
		return
	}
	n := 2 * cb.timed
	// NSRange {location, length}: 16 bytes of integers, passed in two registers.
	data := msg(cb.samples.id, sel.resolveCounterRange, 0, uintptr(n))
	if data == 0 {
		cb.passErr = errors.New("metal: resolveCounterRange: returned nil")
		return
	}
	if got := int(msg(data, sel.length)); got < 8*n {
		cb.passErr = fmt.Errorf("metal: resolveCounterRange: %d bytes for %d timestamps", got, n)
		return
	}
	raw := unsafe.Slice((*uint64)(ptr(msg(data, sel.bytes))), n)
	times := make([]PassTime, cb.timed)
	for i := range times {
		s, e := raw[2*i], raw[2*i+1]
		if !passSampled(cb.calib, s, e) {
			cb.passErr = fmt.Errorf("metal: timed pass %d was not sampled (start %#x, end %#x)", i, s, e)
			return
		}
		times[i] = PassTime{Start: clock.seconds(s), End: clock.seconds(e)}
	}
	cb.passTimes = times
}

// PassTimes returns when each timed pass ran, in encoding order, in seconds
// on GPUTime's clock; valid after Wait.
func (cb *commandBuffer) PassTimes() ([]PassTime, error) {
	cb.mu.Lock()
	committed, timed := cb.committed, cb.timed
	cb.mu.Unlock()
	if timed == 0 {
		return nil, nil
	}
	if !committed {
		return nil, errors.New("metal: PassTimes before Commit and Wait")
	}
	if err := cb.Wait(); err != nil && cb.passErr == nil {
		return nil, err
	}
	return cb.passTimes, cb.passErr
}
