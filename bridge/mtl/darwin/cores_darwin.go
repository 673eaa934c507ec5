//go:build darwin && arm64

package darwin

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// Metal has no API for a GPU's core count; macOS publishes it in the
// IORegistry as the AGXAccelerator service's gpu-core-count (what
// system_profiler shows as "Total Number of Cores").
const (
	libIOKit          = "/System/Library/Frameworks/IOKit.framework/IOKit"
	libCoreFoundation = "/System/Library/Frameworks/CoreFoundation.framework/CoreFoundation"
	cfStringUTF8      = 0x08000100 // kCFStringEncodingUTF8
	cfNumberSInt64    = 4          // kCFNumberSInt64Type
	ioMainPort        = 0          // kIOMainPortDefault
)

// gpuCores reads gpu-core-count, 0 where anything is missing or
// unreadable: the core count is a fact to report, never a reason to fail.
func gpuCores() (n int) {
	defer func() {
		if recover() != nil {
			n = 0
		}
	}()
	iokit, err := purego.Dlopen(libIOKit, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return 0
	}
	cf, err := purego.Dlopen(libCoreFoundation, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return 0
	}
	var f struct {
		matching, matchingService, createProperty, objectRelease      uintptr
		createString, numberTypeID, getTypeID, numberValue, cfRelease uintptr
	}
	for _, s := range []struct {
		dst  *uintptr
		h    uintptr
		name string
	}{
		{&f.matching, iokit, "IOServiceMatching"}, {&f.matchingService, iokit, "IOServiceGetMatchingService"},
		{&f.createProperty, iokit, "IORegistryEntryCreateCFProperty"}, {&f.objectRelease, iokit, "IOObjectRelease"},
		{&f.createString, cf, "CFStringCreateWithCString"}, {&f.numberTypeID, cf, "CFNumberGetTypeID"},
		{&f.getTypeID, cf, "CFGetTypeID"}, {&f.numberValue, cf, "CFNumberGetValue"}, {&f.cfRelease, cf, "CFRelease"},
	} {
		p, err := purego.Dlsym(s.h, s.name)
		if err != nil || p == 0 {
			return 0
		}
		*s.dst = p
	}
	// Pointers to Go memory are converted in SyscallN's call expression,
	// which keeps that memory alive and in place for the call.
	class := []byte("AGXAccelerator\x00")
	matching, _, _ := purego.SyscallN(f.matching, uintptr(unsafe.Pointer(&class[0])))
	if matching == 0 {
		return 0
	}
	// IOServiceGetMatchingService consumes the matching dictionary.
	r, _, _ := purego.SyscallN(f.matchingService, ioMainPort, matching)
	service := uintptr(uint32(r)) // an io_service_t, a mach port
	if service == 0 {
		return 0
	}
	defer purego.SyscallN(f.objectRelease, service)
	key := []byte("gpu-core-count\x00")
	str, _, _ := purego.SyscallN(f.createString, 0, uintptr(unsafe.Pointer(&key[0])), cfStringUTF8)
	if str == 0 {
		return 0
	}
	defer purego.SyscallN(f.cfRelease, str)
	prop, _, _ := purego.SyscallN(f.createProperty, service, str, 0, 0)
	if prop == 0 {
		return 0
	}
	defer purego.SyscallN(f.cfRelease, prop)
	t, _, _ := purego.SyscallN(f.getTypeID, prop)
	num, _, _ := purego.SyscallN(f.numberTypeID)
	if t != num {
		return 0
	}
	var v int64
	ok, _, _ := purego.SyscallN(f.numberValue, prop, cfNumberSInt64, uintptr(unsafe.Pointer(&v)))
	if ok&0xff == 0 || v <= 0 || v > 1<<16 {
		return 0
	}
	return int(v)
}
