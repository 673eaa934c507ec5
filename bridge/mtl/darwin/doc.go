// Package darwin is the real Metal device layer: it implements the bridge/mtl
// device API on macOS through the Objective-C runtime, with purego and no
// cgo, so `CGO_ENABLED=0 GOOS=darwin go build` makes a binary that drives the
// GPU.
//
// How it talks to Metal:
//
//   - Metal.framework, Foundation and CoreGraphics are dlopened; the device
//     comes from MTLCreateSystemDefaultDevice (or MTLCopyAllDevices where a
//     command-line process gets no default device).
//   - Selectors are registered once. Calls with integer and pointer
//     arguments go through purego.SyscallN on objc_msgSend, without
//     reflection; the few calls returning a double or a struct use functions
//     registered once with purego.RegisterFunc.
//   - Every Objective-C call but one runs on a single goroutine locked to its
//     OS thread, inside an autorelease pool pushed and popped around each
//     call. The exception is CommandBuffer.Wait, which blocks in
//     waitUntilCompleted on the caller's goroutine (pinned to its thread, in
//     its own pool), so a waiting goroutine never stalls encoding elsewhere.
//   - Compute encoders record their commands in Go; Commit replays a whole
//     command buffer (commandBuffer, computeCommandEncoder, set*, dispatch*,
//     endEncoding, commit) on the Metal thread in one autorelease pool, so a
//     decode step costs one thread hand-off, not one per call.
//   - Libraries are compiled from source with MTLCompileOptions.languageVersion
//     set explicitly (a cgo-less binary otherwise gets MSL 2.4, without
//     bfloat). Each .metal file is its own compilation unit, as in the
//     emulator; its quoted #includes are inlined from the library's files, and
//     the compiler's program_source:LINE:COL positions are mapped back to
//     file:line:col.
//   - Pipelines are made with their reflection (MTLPipelineOptionBindingInfo):
//     its threadgroup bindings are the indices a dispatch of the kernel is
//     given threadgroup memory at, which the encoder checks against the
//     device's limit by bridge/mtl's rule (mtl.ThreadgroupLengths).
//   - Timed passes (TimedCommandBuffer) are sampled at stage boundaries
//     into a counter sample buffer, in the GPU's own ticks; the CPU and GPU
//     clocks read together (sampleTimestamps:gpuTimestamp:) at Commit and
//     after completion give the ticks' rate and place them on GPUTime's
//     clock, as Apple's "Converting GPU timestamps into CPU time" does.
//     Readings that give no rate fail PassTimes rather than guess one.
//
// The files without a build constraint (sources and includes, function
// constants, the recording and checking of encoder calls, the wording of a
// failed command buffer's error, the optional interfaces) are plain Go and are tested on every OS. Everything that calls
// into Apple's frameworks is built for darwin/arm64 only: Intel Macs pass
// MTLSize by value and return structs through objc_msgSend_stret, which this
// package does not do, so there New reports that Metal is unavailable.
package darwin
