//go:build darwin && arm64

package darwin

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/mtlbench/mtlbench/bridge/mtl"
)

// queue is an MTLCommandQueue.
type queue struct {
	dev *device
	id  uintptr

	mu      sync.Mutex
	samples []*sampleBuffer // counter sample buffers free for reuse
}

// NewCommandQueue makes a queue (newCommandQueue).
func (d *device) NewCommandQueue() (mtl.CommandQueue, error) {
	var id uintptr
	onMetalThread(func() { id = msg(d.id, sel.newCommandQueue) })
	if id == 0 {
		return nil, errors.New("metal: newCommandQueue failed")
	}
	return &queue{dev: d, id: id}, nil
}

// CommandBuffer starts recording a command buffer. The MTLCommandBuffer
// itself is made at Commit, when the recorded commands are replayed.
func (q *queue) CommandBuffer() (mtl.CommandBuffer, error) {
	cb := &commandBuffer{recording: recording{maxTGMemory: q.dev.maxTGMemory}, q: q, submitted: make(chan struct{}), ref: &cbRef{}}
	runtime.AddCleanup(cb, func(r *cbRef) { r.drop() }, cb.ref)
	return cb, nil
}

// cbRef owns the retained MTLCommandBuffer, so a command buffer that is
// dropped without Wait still releases it.
type cbRef struct{ id atomic.Uintptr }

func (r *cbRef) drop() {
	if id := r.id.Swap(0); id != 0 {
		withPinnedPool(func() { release(id) })
	}
}

type commandBuffer struct {
	recording
	q   *queue
	ref *cbRef

	submitted chan struct{} // closed when Commit has handed the commands to Metal (or failed to)
	id        uintptr       // the MTLCommandBuffer, retained; 0 if it never reached Metal
	err       error         // encoding or submission error, then the execution error
	samples   *sampleBuffer
	calib     [2]timestampPair // CPU and GPU clocks at Commit and after completion
	sampleErr error

	waitOnce   sync.Once
	start, end float64
	passTimes  []PassTime
	passErr    error
}

var (
	_ mtl.CommandBuffer  = (*commandBuffer)(nil)
	_ TimedCommandBuffer = (*commandBuffer)(nil)
)

// ComputeEncoder starts a serial compute pass.
func (cb *commandBuffer) ComputeEncoder() (mtl.ComputeEncoder, error) {
	return cb.newEncoder(false, false)
}

// ConcurrentEncoder starts a concurrent compute pass.
func (cb *commandBuffer) ConcurrentEncoder() (mtl.ComputeEncoder, error) {
	return cb.newEncoder(false, true)
}

// TimedComputeEncoder starts a serial compute pass whose start and end the
// GPU samples into a counter sample buffer (stage-boundary sampling); it
// needs TimingMode() == TimingCounters.
func (cb *commandBuffer) TimedComputeEncoder() (mtl.ComputeEncoder, error) {
	if m := cb.q.dev.TimingMode(); m != TimingCounters {
		return nil, fmt.Errorf("metal: %s cannot sample timestamps at stage boundaries (timing mode %s): use one command buffer per timed section", cb.q.dev.name, m)
	}
	return cb.newEncoder(true, false)
}

// Commit replays the recorded commands into a new MTLCommandBuffer on the
// Metal thread, inside one autorelease pool, and commits it. A command
// buffer with an encoding mistake never reaches the GPU; Wait reports the
// mistake.
func (cb *commandBuffer) Commit() {
	first, encErr := cb.commit()
	if !first {
		return
	}
	defer close(cb.submitted)
	if encErr != nil {
		cb.err = encErr
		return
	}
	onMetalThread(cb.submit)
}

// submit runs on the Metal thread.
func (cb *commandBuffer) submit() {
	for _, b := range cb.bufs {
		// Checked here, on the thread that runs Release's release, so a
		// buffer is either known released or still alive until the command
		// buffer retains it below.
		if b.released.Load() {
			cb.err = errors.New("metal: a buffer bound to the command buffer was released before Commit")
			return
		}
	}
	if cb.timed > 0 {
		cb.samples, cb.sampleErr = cb.q.takeSampleBuffer(2 * cb.timed)
	}
	id := msg(cb.q.id, sel.commandBuffer) // autoreleased: retain it past this pool
	if id == 0 {
		cb.err = errors.New("metal: commandBuffer returned nil")
		return
	}
	retain(id)
	send := rt.msgSend
	var enc uintptr
	for i := range cb.ops {
		o := &cb.ops[i]
		switch o.code {
		case opEncoder:
			if o.b == dispatchConcurrent {
				enc = msg(id, sel.computeCommandEncoderWithDispatchType, dispatchConcurrent)
				break
			}
			enc = msg(id, sel.computeCommandEncoder)
		case opTimedEncoder:
			if cb.samples == nil {
				enc = msg(id, sel.computeCommandEncoder) // PassTimes reports why it is not timed
				break
			}
			desc := msg(cls.MTLComputePassDescriptor, sel.computePassDescriptor) // autoreleased
			att := msg(msg(desc, sel.sampleBufferAttachments), sel.objectAtIndexedSubscript, 0)
			msg(att, sel.setSampleBuffer, cb.samples.id)
			msg(att, sel.setStartOfEncoderSampleIndex, 2*o.a)
			msg(att, sel.setEndOfEncoderSampleIndex, 2*o.a+1)
			enc = msg(id, sel.computeCommandEncoderWithDescriptor, desc)
		case opPipeline:
			purego.SyscallN(send, enc, sel.setComputePipelineState, o.a)
		case opBuffer:
			purego.SyscallN(send, enc, sel.setBuffer, o.a, o.b, o.c)
		case opBytes:
			purego.SyscallN(send, enc, sel.setBytes, uintptr(unsafe.Pointer(&cb.arena[o.a])), o.b, o.c)
		case opTGMemory:
			purego.SyscallN(send, enc, sel.setThreadgroupMemoryLength, o.a, o.b)
		case opGroups:
			// MTLSize is 24 bytes: passed as the address of a copy (AAPCS64 B.4).
			purego.SyscallN(send, enc, sel.dispatchThreadgroups, uintptr(unsafe.Pointer(&o.g)), uintptr(unsafe.Pointer(&o.t)))
		case opThreads:
			purego.SyscallN(send, enc, sel.dispatchThreads, uintptr(unsafe.Pointer(&o.g)), uintptr(unsafe.Pointer(&o.t)))
		case opBarrier:
			purego.SyscallN(send, enc, sel.memoryBarrierWithScope, barrierBuffers)
		case opEnd:
			purego.SyscallN(send, enc, sel.endEncoding)
			enc = 0
		}
		if enc == 0 && (o.code == opEncoder || o.code == opTimedEncoder) {
			// No encoder is open, so the uncommitted command buffer can go.
			release(id)
			cb.err = errors.New("metal: computeCommandEncoder returned nil")
			return
		}
	}
	if cb.samples != nil {
		cb.calib[0] = cb.q.dev.sampleTimestamps()
	}
	msg(id, sel.commit)
	cb.id = id
	cb.ref.id.Store(id)
}

// Wait blocks until the command buffer completed and returns its error:
// an encoding mistake, or Metal's NSError when its status is not
// MTLCommandBufferStatusCompleted. waitUntilCompleted runs on the caller's
// goroutine, pinned to its thread in its own autorelease pool, so other
// goroutines keep encoding meanwhile.
func (cb *commandBuffer) Wait() error {
	if !cb.isCommitted() {
		return errors.New("metal: Wait on a command buffer that was not committed")
	}
	<-cb.submitted
	cb.waitOnce.Do(cb.wait)
	return cb.err
}

func (cb *commandBuffer) wait() {
	if cb.err != nil || cb.id == 0 {
		if cb.err == nil {
			cb.err = errors.New("metal: the command buffer was not submitted")
		}
		cb.q.returnSampleBuffer(cb.samples)
		cb.samples = nil
		return
	}
	id := cb.id
	withPinnedPool(func() {
		msg(id, sel.waitUntilCompleted)
		status := msg(id, sel.status)
		cb.start = rt.sendDouble(id, sel.gpuStartTime)
		cb.end = rt.sendDouble(id, sel.gpuEndTime)
		if status != cbStatusComplete {
			nserr := msg(id, sel.error_)
			var code int64
			if nserr != 0 {
				code = int64(msg(nserr, sel.code)) // an NSInteger
			}
			cb.mu.Lock()
			kernels := cb.kernels
			cb.mu.Unlock()
			cb.err = commandBufferError(uint64(status), nserr != 0, code, errorText(nserr), kernels)
		}
		if cb.timed > 0 {
			cb.resolvePassTimes()
		}
	})
	cb.q.returnSampleBuffer(cb.samples)
	cb.samples = nil
	cb.ref.drop()
	cb.id = 0
}

// GPUTime is GPUStartTime and GPUEndTime, seconds of host time; valid
// after Wait.
func (cb *commandBuffer) GPUTime() (start, end float64) { return cb.start, cb.end }
