//go:build darwin && arm64

package darwin

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The frameworks, by their install names (they live in the dyld shared
// cache; dlopen finds them there by these paths).
const (
	libObjC             = "/usr/lib/libobjc.A.dylib"
	libFoundation       = "/System/Library/Frameworks/Foundation.framework/Foundation"
	libCoreGraphics     = "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics"
	libMetal            = "/System/Library/Frameworks/Metal.framework/Metal"
	nsUTF8Encoding      = 4 // NSUTF8StringEncoding
	storageShared       = 0 // MTLResourceStorageModeShared (MTLStorageModeShared << 4), default cache, tracked hazards
	barrierBuffers      = 1 // MTLBarrierScopeBuffers
	samplingStage       = 0 // MTLCounterSamplingPointAtStageBoundary
	pipelineBindingInfo = 1 // MTLPipelineOptionBindingInfo: the pipeline's reflection lists its bindings
)

// rt is the Objective-C runtime and the few C functions this package calls.
var rt struct {
	once sync.Once
	err  error

	msgSend  uintptr // objc_msgSend: called through purego.SyscallN for integer and pointer arguments
	poolPush uintptr // objc_autoreleasePoolPush
	poolPop  uintptr // objc_autoreleasePoolPop

	createSystemDefaultDevice uintptr // MTLCreateSystemDefaultDevice
	copyAllDevices            uintptr // MTLCopyAllDevices
	timestampCounterSet       uintptr // the NSString MTLCommonCounterSetTimestamp, or 0

	// objc_msgSend typed for the calls SyscallN cannot make: a double
	// returned in d0, and a struct returned through x8. Registered once.
	sendDouble func(obj, sel uintptr) float64
	sendSize   func(obj, sel uintptr) mtlSize
}

// cls holds the classes this package instantiates.
var cls struct {
	NSString, NSDictionary, MTLCompileOptions, MTLFunctionConstantValues,
	MTLComputePassDescriptor, MTLCounterSampleBufferDescriptor uintptr
}

// sel holds every selector this package sends, registered once.
var sel struct {
	alloc, init, new, retain, release                                       uintptr
	initWithBytesLengthEncoding, utf8String, isEqualToString, length, bytes uintptr
	count, objectAtIndex, allValues, dictionaryWithObjectsForKeysCount      uintptr
	localizedDescription, code                                              uintptr

	name, hasUnifiedMemory, recommendedMaxWorkingSetSize, maxBufferLength     uintptr
	maxThreadgroupMemoryLength, maxThreadsPerThreadgroup, supportsFamily      uintptr
	supportsCounterSampling, counterSets, sampleTimestamps                    uintptr
	newBufferWithLength, newBufferWithBytesNoCopy, contents                   uintptr
	newLibraryWithSource, newCommandQueue, newComputePipelineStateReflection  uintptr
	bindings                                                                  uintptr
	newCounterSampleBuffer                                                    uintptr
	setLanguageVersion, setFastMathEnabled, setPreprocessorMacros             uintptr
	functionNames, newFunctionWithName, newFunctionWithNameConstantValues     uintptr
	functionConstantsDictionary, type_, index, required, setConstantValue     uintptr
	maxTotalThreadsPerThreadgroup, threadExecutionWidth, staticThreadgroupMem uintptr

	commandBuffer, computeCommandEncoder, computeCommandEncoderWithDescriptor  uintptr
	computeCommandEncoderWithDispatchType                                      uintptr
	commit, waitUntilCompleted, status, error_, gpuStartTime, gpuEndTime       uintptr
	setComputePipelineState, setBuffer, setBytes, setThreadgroupMemoryLength   uintptr
	dispatchThreadgroups, dispatchThreads, memoryBarrierWithScope, endEncoding uintptr

	computePassDescriptor, sampleBufferAttachments, objectAtIndexedSubscript  uintptr
	setSampleBuffer, setStartOfEncoderSampleIndex, setEndOfEncoderSampleIndex uintptr
	setCounterSet, setStorageMode, setSampleCount, resolveCounterRange        uintptr
}

// load opens the frameworks and registers classes and selectors, once.
func load() error {
	rt.once.Do(func() { rt.err = loadRuntime() })
	return rt.err
}

func loadRuntime() (err error) {
	defer func() {
		// RegisterFunc panics on a type it cannot call; report, do not crash.
		if r := recover(); r != nil {
			err = fmt.Errorf("metal: loading the Objective-C runtime: %v", r)
		}
	}()
	open := func(path string) (uintptr, error) {
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			return 0, fmt.Errorf("metal: dlopen %s: %w", path, err)
		}
		return h, nil
	}
	objc, err := open(libObjC)
	if err != nil {
		return err
	}
	// Foundation brings NSString, NSArray and NSDictionary; CoreGraphics is
	// what MTLCreateSystemDefaultDevice needs to find a device in a process
	// that is not an app (Apple's documentation says to link it).
	if _, err := open(libFoundation); err != nil {
		return err
	}
	_, _ = open(libCoreGraphics) // best effort: MTLCopyAllDevices is the fallback
	metal, err := open(libMetal)
	if err != nil {
		return fmt.Errorf("%w (Metal needs macOS on a Mac with a Metal GPU)", err)
	}
	sym := func(h uintptr, name string) (uintptr, error) {
		p, err := purego.Dlsym(h, name)
		if err != nil || p == 0 {
			return 0, fmt.Errorf("metal: symbol %s not found: %v", name, err)
		}
		return p, nil
	}
	for _, s := range []struct {
		dst  *uintptr
		h    uintptr
		name string
	}{
		{&rt.msgSend, objc, "objc_msgSend"},
		{&rt.poolPush, objc, "objc_autoreleasePoolPush"},
		{&rt.poolPop, objc, "objc_autoreleasePoolPop"},
		{&rt.createSystemDefaultDevice, metal, "MTLCreateSystemDefaultDevice"},
	} {
		if *s.dst, err = sym(s.h, s.name); err != nil {
			return err
		}
	}
	rt.copyAllDevices, _ = sym(metal, "MTLCopyAllDevices")
	if p, err := sym(metal, "MTLCommonCounterSetTimestamp"); err == nil {
		rt.timestampCounterSet = *(*uintptr)(ptr(p)) // an NSString *const
	}
	purego.RegisterFunc(&rt.sendDouble, rt.msgSend)
	purego.RegisterFunc(&rt.sendSize, rt.msgSend)

	var getClass func(name string) uintptr
	var registerName func(name string) uintptr
	purego.RegisterLibFunc(&getClass, objc, "objc_getClass")
	purego.RegisterLibFunc(&registerName, objc, "sel_registerName")
	for _, c := range []struct {
		dst  *uintptr
		name string
	}{
		{&cls.NSString, "NSString"},
		{&cls.NSDictionary, "NSDictionary"},
		{&cls.MTLCompileOptions, "MTLCompileOptions"},
		{&cls.MTLFunctionConstantValues, "MTLFunctionConstantValues"},
		{&cls.MTLComputePassDescriptor, "MTLComputePassDescriptor"},
		{&cls.MTLCounterSampleBufferDescriptor, "MTLCounterSampleBufferDescriptor"},
	} {
		if *c.dst = getClass(c.name); *c.dst == 0 {
			return fmt.Errorf("metal: Objective-C class %s not found", c.name)
		}
	}
	for _, s := range []struct {
		dst  *uintptr
		name string
	}{
		{&sel.alloc, "alloc"}, {&sel.init, "init"}, {&sel.new, "new"},
		{&sel.retain, "retain"}, {&sel.release, "release"},
		{&sel.initWithBytesLengthEncoding, "initWithBytes:length:encoding:"},
		{&sel.utf8String, "UTF8String"}, {&sel.isEqualToString, "isEqualToString:"},
		{&sel.length, "length"}, {&sel.bytes, "bytes"},
		{&sel.count, "count"}, {&sel.objectAtIndex, "objectAtIndex:"}, {&sel.allValues, "allValues"},
		{&sel.dictionaryWithObjectsForKeysCount, "dictionaryWithObjects:forKeys:count:"},
		{&sel.localizedDescription, "localizedDescription"}, {&sel.code, "code"},

		{&sel.name, "name"}, {&sel.hasUnifiedMemory, "hasUnifiedMemory"},
		{&sel.recommendedMaxWorkingSetSize, "recommendedMaxWorkingSetSize"},
		{&sel.maxBufferLength, "maxBufferLength"},
		{&sel.maxThreadgroupMemoryLength, "maxThreadgroupMemoryLength"},
		{&sel.maxThreadsPerThreadgroup, "maxThreadsPerThreadgroup"},
		{&sel.supportsFamily, "supportsFamily:"},
		{&sel.supportsCounterSampling, "supportsCounterSampling:"},
		{&sel.counterSets, "counterSets"},
		{&sel.sampleTimestamps, "sampleTimestamps:gpuTimestamp:"},
		{&sel.newBufferWithLength, "newBufferWithLength:options:"},
		{&sel.newBufferWithBytesNoCopy, "newBufferWithBytesNoCopy:length:options:deallocator:"},
		{&sel.contents, "contents"},
		{&sel.newLibraryWithSource, "newLibraryWithSource:options:error:"},
		{&sel.newCommandQueue, "newCommandQueue"},
		{&sel.newComputePipelineStateReflection, "newComputePipelineStateWithFunction:options:reflection:error:"},
		{&sel.bindings, "bindings"},
		{&sel.newCounterSampleBuffer, "newCounterSampleBufferWithDescriptor:error:"},
		{&sel.setLanguageVersion, "setLanguageVersion:"},
		{&sel.setFastMathEnabled, "setFastMathEnabled:"},
		{&sel.setPreprocessorMacros, "setPreprocessorMacros:"},
		{&sel.functionNames, "functionNames"},
		{&sel.newFunctionWithName, "newFunctionWithName:"},
		{&sel.newFunctionWithNameConstantValues, "newFunctionWithName:constantValues:error:"},
		{&sel.functionConstantsDictionary, "functionConstantsDictionary"},
		{&sel.type_, "type"}, {&sel.index, "index"}, {&sel.required, "required"},
		{&sel.setConstantValue, "setConstantValue:type:atIndex:"},
		{&sel.maxTotalThreadsPerThreadgroup, "maxTotalThreadsPerThreadgroup"},
		{&sel.threadExecutionWidth, "threadExecutionWidth"},
		{&sel.staticThreadgroupMem, "staticThreadgroupMemoryLength"},

		{&sel.commandBuffer, "commandBuffer"},
		{&sel.computeCommandEncoder, "computeCommandEncoder"},
		{&sel.computeCommandEncoderWithDescriptor, "computeCommandEncoderWithDescriptor:"},
		{&sel.computeCommandEncoderWithDispatchType, "computeCommandEncoderWithDispatchType:"},
		{&sel.commit, "commit"}, {&sel.waitUntilCompleted, "waitUntilCompleted"},
		{&sel.status, "status"}, {&sel.error_, "error"},
		{&sel.gpuStartTime, "GPUStartTime"}, {&sel.gpuEndTime, "GPUEndTime"},
		{&sel.setComputePipelineState, "setComputePipelineState:"},
		{&sel.setBuffer, "setBuffer:offset:atIndex:"},
		{&sel.setBytes, "setBytes:length:atIndex:"},
		{&sel.setThreadgroupMemoryLength, "setThreadgroupMemoryLength:atIndex:"},
		{&sel.dispatchThreadgroups, "dispatchThreadgroups:threadsPerThreadgroup:"},
		{&sel.dispatchThreads, "dispatchThreads:threadsPerThreadgroup:"},
		{&sel.memoryBarrierWithScope, "memoryBarrierWithScope:"},
		{&sel.endEncoding, "endEncoding"},

		{&sel.computePassDescriptor, "computePassDescriptor"},
		{&sel.sampleBufferAttachments, "sampleBufferAttachments"},
		{&sel.objectAtIndexedSubscript, "objectAtIndexedSubscript:"},
		{&sel.setSampleBuffer, "setSampleBuffer:"},
		{&sel.setStartOfEncoderSampleIndex, "setStartOfEncoderSampleIndex:"},
		{&sel.setEndOfEncoderSampleIndex, "setEndOfEncoderSampleIndex:"},
		{&sel.setCounterSet, "setCounterSet:"},
		{&sel.setStorageMode, "setStorageMode:"},
		{&sel.setSampleCount, "setSampleCount:"},
		{&sel.resolveCounterRange, "resolveCounterRange:"},
	} {
		if *s.dst = registerName(s.name); *s.dst == 0 {
			return fmt.Errorf("metal: selector %s not registered", s.name)
		}
	}
	return nil
}

// ptr turns an address C gave us (memory outside Go's heap) into a pointer.
// Going through memory rather than converting the uintptr keeps go vet's
// unsafeptr check quiet about a conversion that is sound here.
func ptr(a uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&a)) }

// msg sends sel to obj with integer or pointer arguments (all of Metal's
// hot calls) through purego.SyscallN: no reflection, no allocation beyond the
// argument slice. go:uintptrescapes keeps Go memory passed as
// uintptr(unsafe.Pointer(&x)) alive and in place for the call, as for
// SyscallN itself.
//
//go:uintptrescapes
func msg(obj, sel uintptr, args ...uintptr) uintptr {
	switch len(args) {
	case 0:
		r, _, _ := purego.SyscallN(rt.msgSend, obj, sel)
		return r
	case 1:
		r, _, _ := purego.SyscallN(rt.msgSend, obj, sel, args[0])
		return r
	case 2:
		r, _, _ := purego.SyscallN(rt.msgSend, obj, sel, args[0], args[1])
		return r
	case 3:
		r, _, _ := purego.SyscallN(rt.msgSend, obj, sel, args[0], args[1], args[2])
		return r
	case 4:
		r, _, _ := purego.SyscallN(rt.msgSend, obj, sel, args[0], args[1], args[2], args[3])
		return r
	}
	panic("metal: msg takes at most 4 arguments")
}

// msgBool sends a message returning BOOL; only the low byte is defined.
func msgBool(obj, sel uintptr, args ...uintptr) bool { return msg(obj, sel, args...)&0xff != 0 }

func boolArg(b bool) uintptr {
	if b {
		return 1
	}
	return 0
}

func retain(obj uintptr) {
	if obj != 0 {
		msg(obj, sel.retain)
	}
}

func release(obj uintptr) {
	if obj != 0 {
		msg(obj, sel.release)
	}
}

// newObject is [[class alloc] init], owned by the caller.
func newObject(class uintptr) uintptr { return msg(msg(class, sel.alloc), sel.init) }

// nsString makes an NSString from s, owned by the caller (release it).
func nsString(s string) uintptr {
	obj := msg(cls.NSString, sel.alloc)
	// The conversion is in the call expression, so msg's go:uintptrescapes
	// keeps the bytes alive and still; an empty string passes NULL, 0.
	return msg(obj, sel.initWithBytesLengthEncoding, uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(len(s)), nsUTF8Encoding)
}

// goString copies an NSString into Go; "" for nil. Call it inside an
// autorelease pool: UTF8String's bytes live as long as the pool.
func goString(ns uintptr) string {
	if ns == 0 {
		return ""
	}
	p := msg(ns, sel.utf8String)
	if p == 0 {
		return ""
	}
	base := ptr(p)
	n := 0
	for *(*byte)(unsafe.Add(base, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(base), n))
}

// stringArray copies an NSArray of NSStrings.
func stringArray(arr uintptr) []string {
	if arr == 0 {
		return nil
	}
	n := int(msg(arr, sel.count))
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, goString(msg(arr, sel.objectAtIndex, uintptr(i))))
	}
	return out
}

// errorText is an NSError's localizedDescription, or a placeholder for nil.
func errorText(nserr uintptr) string {
	if nserr == 0 {
		return "(no NSError)"
	}
	return goString(msg(nserr, sel.localizedDescription))
}

// nsDictionary makes an autoreleased NSDictionary of NSString keys and
// values.
func nsDictionary(keys, values []string) uintptr {
	if len(keys) == 0 {
		return 0
	}
	k := make([]uintptr, len(keys))
	v := make([]uintptr, len(values))
	for i := range keys {
		k[i] = nsString(keys[i])
		v[i] = nsString(values[i])
	}
	d := msg(cls.NSDictionary, sel.dictionaryWithObjectsForKeysCount,
		uintptr(unsafe.Pointer(&v[0])), uintptr(unsafe.Pointer(&k[0])), uintptr(len(k)))
	for i := range k { // the dictionary retains (copies) what it holds
		release(k[i])
		release(v[i])
	}
	return d
}

// The Metal thread: one goroutine, locked to its OS thread for the life of
// the process, runs every Objective-C call (but Wait's) inside an autorelease
// pool of its own. Objects autoreleased by Metal (command buffers, encoders,
// strings, errors) are drained there, on the thread whose pool holds them.
var metalThread struct {
	once  sync.Once
	calls chan metalCall
}

type metalCall struct {
	f    func()
	done chan any // receives the panic value, or nil
}

// onMetalThread runs f on the Metal thread and waits for it. f must not call
// onMetalThread itself.
func onMetalThread(f func()) {
	metalThread.once.Do(func() {
		metalThread.calls = make(chan metalCall)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread stays Metal's
			for c := range metalThread.calls {
				c.done <- inPool(c.f)
			}
		}()
	})
	done := make(chan any, 1)
	metalThread.calls <- metalCall{f, done}
	if p := <-done; p != nil {
		panic(p)
	}
}

// inPool runs f between objc_autoreleasePoolPush and Pop and returns what it
// panicked with. The caller's goroutine must be locked to its thread.
func inPool(f func()) (p any) {
	pool, _, _ := purego.SyscallN(rt.poolPush)
	defer func() {
		p = recover()
		purego.SyscallN(rt.poolPop, pool)
	}()
	f()
	return nil
}

// withPinnedPool runs f on the calling goroutine, locked to its OS thread,
// inside its own autorelease pool: for waitUntilCompleted, which blocks and
// must not hold up the Metal thread.
func withPinnedPool(f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if p := inPool(f); p != nil {
		panic(p)
	}
}
