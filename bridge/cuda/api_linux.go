//go:build linux

package cuda

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// api holds the entry points of the driver, NVRTC and cuBLAS, resolved once
// with dlopen/dlsym; every call goes through purego.SyscallN (integer and
// pointer arguments only, which all of these take).
type api struct {
	driverPath, nvrtcPath, cublasPath string
	searched                          []string
	// compileTimes is what each kernel program took NVRTC in the last
	// compile (by .cu file): the longest is the first run's wait.
	compileTimes map[string]time.Duration

	// driver
	cuInit, cuDriverGetVersion, cuDeviceGet, cuDeviceGetCount, cuDeviceGetName, cuDeviceGetAttribute,
	cuDeviceTotalMem, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease, cuCtxSetCurrent,
	cuMemAlloc, cuMemFree, cuMemGetInfo, cuMemcpyHtoD, cuMemcpyDtoH, cuMemcpyHtoDAsync, cuMemcpyDtoHAsync,
	cuMemsetD8, cuMemsetD32Async, cuModuleLoadData, cuModuleUnload, cuModuleGetFunction, cuLaunchKernel, cuFuncSetAttribute, cuFuncGetAttribute,
	cuStreamCreate, cuStreamSynchronize, cuStreamDestroy, cuEventCreate, cuEventRecord, cuEventElapsedTime,
	cuEventDestroy, cuLaunchKernelEx, cuStreamBeginCapture, cuStreamEndCapture, cuGraphInstantiate, cuGraphLaunch, cuGraphDestroy,
	cuGraphExecDestroy, cuGetErrorName, cuGetErrorString, cuCtxSynchronize, cuMemAllocHost, cuMemFreeHost,
	cuMemcpyDtoDAsync, cuEventSynchronize uintptr
	cuMemHostGetDevicePointer uintptr // optional: 0 keeps steps on copies
	cuModuleGetGlobal         uintptr // optional: only the in-place timeline reads a kernel's global

	// NVRTC
	nvrtcVersion, nvrtcCreateProgram, nvrtcCompileProgram, nvrtcGetProgramLogSize, nvrtcGetProgramLog,
	nvrtcGetCUBINSize, nvrtcGetCUBIN, nvrtcDestroyProgram, nvrtcGetErrorString uintptr

	// cuBLAS (zero when not found)
	cublasCreate, cublasDestroy, cublasSetStream, cublasSetWorkspace, cublasGemmEx, cublasGetVersion uintptr
}

// call invokes a C function that returns a status code.
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) int32 {
	r, _, _ := purego.SyscallN(fn, args...)
	return int32(uint32(r))
}

func dlopen(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

type symbols struct {
	h    uintptr
	lib  string
	errs []string
}

// get resolves the first of names that the library exports.
func (s *symbols) get(dst *uintptr, names ...string) {
	for _, n := range names {
		if p, err := purego.Dlsym(s.h, n); err == nil && p != 0 {
			*dst = p
			return
		}
	}
	s.errs = append(s.errs, names[0])
}

func (s *symbols) err() error {
	if len(s.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s lacks %s (too old?)", s.lib, strings.Join(s.errs, ", "))
}

// loadAPI opens the driver, NVRTC and (optionally) cuBLAS.
func loadAPI(wantCuBLAS bool, libs []string) (*api, error) {
	a := &api{}
	dirs := searchDirs(libs)
	a.searched = dirs
	where := strings.Join(dirs, ", ")
	if where == "" {
		where = "no directory"
	}

	// The driver: libs, then the loader (ld.so.cache, where
	// the driver installs itself), then the other directories.
	var h uintptr
	var lastErr error
	tryPath := func(p string) bool {
		if p == "" {
			return false
		}
		hh, err := dlopen(p)
		if err != nil {
			lastErr = err
			return false
		}
		h, a.driverPath = hh, p
		return true
	}
	envDirs := filterDirs(dirs, cleanDirs(libs))
	if !tryPath(findLib(driverNames, envDirs)) && !tryPath("libcuda.so.1") && !tryPath(findLib(driverNames, dirs)) {
		msg := fmt.Sprintf("no CUDA driver: libcuda.so.1 not found (searched the loader's path and %s", where)
		if lastErr != nil && !strings.Contains(lastErr.Error(), "No such file") && !strings.Contains(lastErr.Error(), "cannot open shared object file") {
			msg += "; last error: " + lastErr.Error()
		}
		return nil, fmt.Errorf("%s)", msg)
	}
	d := &symbols{h: h, lib: a.driverPath}
	d.get(&a.cuInit, "cuInit")
	d.get(&a.cuDriverGetVersion, "cuDriverGetVersion")
	d.get(&a.cuDeviceGet, "cuDeviceGet")
	d.get(&a.cuDeviceGetCount, "cuDeviceGetCount")
	d.get(&a.cuDeviceGetName, "cuDeviceGetName")
	d.get(&a.cuDeviceGetAttribute, "cuDeviceGetAttribute")
	d.get(&a.cuDeviceTotalMem, "cuDeviceTotalMem_v2")
	d.get(&a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
	d.get(&a.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease")
	d.get(&a.cuCtxSetCurrent, "cuCtxSetCurrent")
	d.get(&a.cuCtxSynchronize, "cuCtxSynchronize")
	d.get(&a.cuMemAlloc, "cuMemAlloc_v2")
	d.get(&a.cuMemFree, "cuMemFree_v2")
	d.get(&a.cuMemGetInfo, "cuMemGetInfo_v2")
	d.get(&a.cuMemcpyHtoD, "cuMemcpyHtoD_v2")
	d.get(&a.cuMemcpyDtoH, "cuMemcpyDtoH_v2")
	d.get(&a.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")
	d.get(&a.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")
	d.get(&a.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")
	d.get(&a.cuMemAllocHost, "cuMemAllocHost_v2")
	d.get(&a.cuMemFreeHost, "cuMemFreeHost")
	d.get(&a.cuMemsetD8, "cuMemsetD8_v2")
	d.get(&a.cuMemsetD32Async, "cuMemsetD32Async")
	d.get(&a.cuModuleLoadData, "cuModuleLoadData")
	d.get(&a.cuModuleUnload, "cuModuleUnload")
	d.get(&a.cuModuleGetFunction, "cuModuleGetFunction")
	d.get(&a.cuLaunchKernel, "cuLaunchKernel")
	d.get(&a.cuFuncSetAttribute, "cuFuncSetAttribute")
	d.get(&a.cuFuncGetAttribute, "cuFuncGetAttribute")
	if p, err := purego.Dlsym(h, "cuMemHostGetDevicePointer_v2"); err == nil {
		a.cuMemHostGetDevicePointer = p
	}
	if p, err := purego.Dlsym(h, "cuModuleGetGlobal_v2"); err == nil {
		a.cuModuleGetGlobal = p
	}
	if p, err := purego.Dlsym(h, "cuLaunchKernelEx"); err == nil {
		a.cuLaunchKernelEx = p // CUDA 11.8+: programmatic dependent launch
	}
	d.get(&a.cuStreamCreate, "cuStreamCreate")
	d.get(&a.cuStreamSynchronize, "cuStreamSynchronize")
	d.get(&a.cuStreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy")
	d.get(&a.cuEventCreate, "cuEventCreate")
	d.get(&a.cuEventRecord, "cuEventRecord")
	d.get(&a.cuEventSynchronize, "cuEventSynchronize")
	d.get(&a.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime")
	d.get(&a.cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy")
	d.get(&a.cuStreamBeginCapture, "cuStreamBeginCapture_v2", "cuStreamBeginCapture")
	d.get(&a.cuStreamEndCapture, "cuStreamEndCapture")
	d.get(&a.cuGraphInstantiate, "cuGraphInstantiateWithFlags")
	d.get(&a.cuGraphLaunch, "cuGraphLaunch")
	d.get(&a.cuGraphDestroy, "cuGraphDestroy")
	d.get(&a.cuGraphExecDestroy, "cuGraphExecDestroy")
	d.get(&a.cuGetErrorName, "cuGetErrorName")
	d.get(&a.cuGetErrorString, "cuGetErrorString")
	if err := d.err(); err != nil {
		return nil, err
	}
	if err := a.loadNVRTC(dirs, where); err != nil {
		return nil, err
	}
	if wantCuBLAS {
		a.loadCuBLAS(dirs) // optional: GEMV kernels cover every shape without it
	}
	return a, nil
}

func cleanDirs(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if d != "" {
			out = append(out, filepath.Clean(d))
		}
	}
	return out
}

// filterDirs keeps the entries of dirs that are in want.
func filterDirs(dirs, want []string) []string {
	var out []string
	for _, d := range dirs {
		for _, w := range want {
			if d == w {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

func (a *api) loadNVRTC(dirs []string, where string) error {
	p := findLib(nvrtcNames, dirs)
	if p == "" {
		return fmt.Errorf("no NVRTC: %s not found (searched %s); install the CUDA toolkit or the nvidia-cuda-nvrtc wheel, or name its folder in MTLBENCH_CUDA_LIBS", strings.Join(nvrtcNames, ", "), where)
	}
	// NVRTC dlopens its builtins library by soname: load it first from the
	// same directory so directories the loader does not know still work.
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(p), "libnvrtc-builtins.so*")); len(m) > 0 {
		for _, b := range m {
			dlopen(b) //nolint:errcheck // best effort
		}
	}
	h, err := dlopen(p)
	if err != nil {
		return fmt.Errorf("no NVRTC: %v", err)
	}
	a.nvrtcPath = p
	s := &symbols{h: h, lib: p}
	s.get(&a.nvrtcVersion, "nvrtcVersion")
	s.get(&a.nvrtcCreateProgram, "nvrtcCreateProgram")
	s.get(&a.nvrtcCompileProgram, "nvrtcCompileProgram")
	s.get(&a.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize")
	s.get(&a.nvrtcGetProgramLog, "nvrtcGetProgramLog")
	s.get(&a.nvrtcGetCUBINSize, "nvrtcGetCUBINSize")
	s.get(&a.nvrtcGetCUBIN, "nvrtcGetCUBIN")
	s.get(&a.nvrtcDestroyProgram, "nvrtcDestroyProgram")
	s.get(&a.nvrtcGetErrorString, "nvrtcGetErrorString")
	return s.err()
}

func (a *api) loadCuBLAS(dirs []string) {
	p := findLib(cublasNames, dirs)
	if p == "" {
		return
	}
	if lt := filepath.Join(filepath.Dir(p), cublasLtName[filepath.Base(p)]); lt != "" {
		dlopen(lt) //nolint:errcheck // libcublas finds it by soname if this fails
	}
	h, err := dlopen(p)
	if err != nil {
		return
	}
	s := &symbols{h: h, lib: p}
	s.get(&a.cublasCreate, "cublasCreate_v2")
	s.get(&a.cublasDestroy, "cublasDestroy_v2")
	s.get(&a.cublasSetStream, "cublasSetStream_v2")
	s.get(&a.cublasSetWorkspace, "cublasSetWorkspace_v2")
	s.get(&a.cublasGemmEx, "cublasGemmEx")
	s.get(&a.cublasGetVersion, "cublasGetVersion_v2")
	if s.err() != nil {
		a.cublasCreate = 0
		return
	}
	a.cublasPath = p
}

// goString reads a NUL-terminated C string.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	var b []byte
	for i := 0; i < 4096; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// cstr returns a NUL-terminated copy of s.
func cstr(s string) *byte {
	b := append([]byte(s), 0)
	return &b[0]
}

// cuErr turns a driver status into an error naming it.
func (a *api) cuErr(what string, r int32) error {
	if r == 0 {
		return nil
	}
	var name, desc *byte
	call(a.cuGetErrorName, uintptr(r), uintptr(unsafe.Pointer(&name)))
	call(a.cuGetErrorString, uintptr(r), uintptr(unsafe.Pointer(&desc)))
	n := goString(name)
	if n == "" {
		n = fmt.Sprintf("CUresult %d", r)
	}
	if d := goString(desc); d != "" {
		return fmt.Errorf("%s: %s (%s)", what, n, d)
	}
	return fmt.Errorf("%s: %s", what, n)
}

// CUDA driver result codes the backend reacts to.
const (
	cudaErrorOutOfMemory    = 2
	cudaErrorNoDevice       = 100
	cudaErrorNotFound       = 500
	cudaErrorIllegalAddress = 700
	cudaErrorLaunchFailure  = 719
)
