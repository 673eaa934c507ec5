//go:build linux

package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	kcuda "github.com/mtlbench/mtlbench/kernels/cuda"
)

// source is the kernels as one translation unit (kernels/cuda.Source).
func source() (string, []string, error) { return kcuda.Source() }

func compileOptions(cc int, o Options) []string {
	opts := []string{
		fmt.Sprintf("--gpu-architecture=sm_%d", cc),
		"--std=c++17",
		"-default-device",
		"--extra-device-vectorization",
	}
	if !o.NoPDLEarly {
		opts = append(opts, "-DMTLB_PDL_EARLY")
	}
	if o.Timeline {
		opts = append(opts, "-DMTLB_TIMELINE")
	}
	return opts
}

// nvrtcVersionString is NVRTC's version, e.g. "13.0".
func (a *api) nvrtcVersionString() string {
	maj, min, ok := a.nvrtcVersionNumbers()
	if !ok {
		return "?"
	}
	return fmt.Sprintf("%d.%d", maj, min)
}

func (a *api) nvrtcVersionNumbers() (maj, min int32, ok bool) {
	if call(a.nvrtcVersion, uintptr(unsafe.Pointer(&maj)), uintptr(unsafe.Pointer(&min))) != 0 {
		return 0, 0, false
	}
	return maj, min, true
}

// minNVRTC is the oldest NVRTC that compiles the kernels: they use PTX ISA
// 8.1 (vector reductions, bulk L2 prefetch), which came with CUDA 12.1.
var minNVRTC = [2]int32{12, 1}

// checkNVRTC says, before any compile, when the NVRTC found is too old,
// rather than leave it to a page of ptxas errors.
func (a *api) checkNVRTC() error {
	maj, min, ok := a.nvrtcVersionNumbers()
	if !ok || nvrtcTooOld(maj, min) {
		return fmt.Errorf("cuda: NVRTC %s (%s) cannot compile the kernels: they need %d.%d or later; "+
			"point MTLBENCH_CUDA_LIBS at a newer libnvrtc", a.nvrtcVersionString(), a.nvrtcPath, minNVRTC[0], minNVRTC[1])
	}
	return nil
}

func nvrtcTooOld(maj, min int32) bool {
	return maj < minNVRTC[0] || maj == minNVRTC[0] && min < minNVRTC[1]
}

// cacheDir is where compiled cubins are kept.
func cacheDir(o Options) string {
	if o.CacheDir != "" {
		return o.CacheDir
	}
	return DefaultCacheDir()
}

// compileCached returns the cubins of the kernels for the device, one per
// unit (kernels/cuda.Units), each from the cache when the same unit was
// compiled for the same GPU and NVRTC before. The units missing from the
// cache compile side by side, as many at a time as there are CPUs: one
// program of every kernel took NVRTC about three minutes on an H100's host.
// compiled counts the units compiled rather than read from the cache.
func (a *api) compileCached(o Options, cc int, gpu string) (cubins [][]byte, compiled int, err error) {
	if err := a.checkNVRTC(); err != nil {
		return nil, 0, err
	}
	units, err := kcuda.Units()
	if err != nil {
		return nil, 0, err
	}
	opts := compileOptions(cc, o)
	dir := cacheDir(o)
	cubins = make([][]byte, len(units))
	var todo []int
	paths := make([]string, len(units))
	for i, u := range units {
		h := sha256.New()
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00%s\x00", gpu, cc, a.nvrtcVersionString(), strings.Join(opts, " "))
		h.Write([]byte(u.Source))
		key := hex.EncodeToString(h.Sum(nil))[:24]
		paths[i] = filepath.Join(dir, "kernels-sm"+strconv.Itoa(cc)+"-"+strings.TrimSuffix(u.Name, ".cu")+"-"+key+".cubin")
		if data, err := os.ReadFile(paths[i]); err == nil && len(data) > 0 {
			cubins[i] = data
		} else {
			todo = append(todo, i)
		}
	}
	threads := max(1, runtime.NumCPU())
	if len(todo) > 0 && o.Notice != nil {
		o.Notice(fmt.Sprintf("compiling %d of %d CUDA kernel programs for %s (sm_%d) with NVRTC %s, %d at a time; later runs read them from %s",
			len(todo), len(units), gpu, cc, a.nvrtcVersionString(), min(threads, len(todo)), dir))
	}
	errs := make([]error, len(units))
	times := make([]time.Duration, len(units))
	sem := make(chan struct{}, threads)
	var wg sync.WaitGroup
	for _, i := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			cubins[i], errs[i] = a.compile(units[i].Source, opts)
			times[i] = time.Since(start)
		}()
	}
	wg.Wait()
	if len(todo) > 0 {
		giveBackHeap()
	}
	a.compileTimes = map[string]time.Duration{}
	for _, i := range todo {
		a.compileTimes[units[i].Name] = times[i]
	}
	if err := distinct(errs); err != nil {
		return nil, 0, err
	}
	if len(todo) > 0 && os.MkdirAll(dir, 0o755) == nil {
		for _, i := range todo {
			tmp := paths[i] + ".tmp" + strconv.Itoa(os.Getpid())
			if os.WriteFile(tmp, cubins[i], 0o644) == nil {
				os.Rename(tmp, paths[i]) //nolint:errcheck // a cache miss next time at worst
			}
		}
	}
	return cubins, len(todo), nil
}

// distinct joins errs, each message once: an error in a helper every
// program includes fails them all with the same log.
func distinct(errs []error) error {
	var out []error
	seen := map[string]bool{}
	for _, e := range errs {
		if e != nil && !seen[e.Error()] {
			seen[e.Error()] = true
			out = append(out, e)
		}
	}
	return errors.Join(out...)
}

func (a *api) nvrtcErr(what string, r int32) error {
	if r == 0 {
		return nil
	}
	var s *byte
	if a.nvrtcGetErrorString != 0 {
		p, _, _ := puregoCall(a.nvrtcGetErrorString, uintptr(r))
		s = *(**byte)(unsafe.Pointer(&p))
	}
	return fmt.Errorf("%s: NVRTC error %d (%s)", what, r, goString(s))
}

// compile runs NVRTC on src and returns the cubin, or an error carrying
// the compiler's log (file:line messages, from the #line directives).
func (a *api) compile(src string, opts []string) ([]byte, error) {
	var prog uintptr
	csrc, cname := cstr(src), cstr("mtlbench_kernels.cu")
	if r := call(a.nvrtcCreateProgram, uintptr(unsafe.Pointer(&prog)), uintptr(unsafe.Pointer(csrc)),
		uintptr(unsafe.Pointer(cname)), 0, 0, 0); r != 0 {
		return nil, a.nvrtcErr("nvrtcCreateProgram", r)
	}
	defer call(a.nvrtcDestroyProgram, uintptr(unsafe.Pointer(&prog)))
	copts := make([]*byte, len(opts))
	for i, o := range opts {
		copts[i] = cstr(o)
	}
	r := call(a.nvrtcCompileProgram, prog, uintptr(len(copts)), uintptr(unsafe.Pointer(&copts[0])))
	var logSize uintptr
	call(a.nvrtcGetProgramLogSize, prog, uintptr(unsafe.Pointer(&logSize)))
	var log string
	if logSize > 1 {
		buf := make([]byte, logSize)
		call(a.nvrtcGetProgramLog, prog, uintptr(unsafe.Pointer(&buf[0])))
		log = strings.TrimRight(string(buf), "\x00\n ")
	}
	if r != 0 {
		return nil, fmt.Errorf("compiling kernels/cuda with NVRTC %s (%s): %w\n%s", a.nvrtcVersionString(),
			strings.Join(opts, " "), a.nvrtcErr("nvrtcCompileProgram", r), firstErrors(log, 30))
	}
	var size uintptr
	if r := call(a.nvrtcGetCUBINSize, prog, uintptr(unsafe.Pointer(&size))); r != 0 {
		return nil, a.nvrtcErr("nvrtcGetCUBINSize", r)
	}
	cubin := make([]byte, size)
	if r := call(a.nvrtcGetCUBIN, prog, uintptr(unsafe.Pointer(&cubin[0]))); r != 0 {
		return nil, a.nvrtcErr("nvrtcGetCUBIN", r)
	}
	return cubin, nil
}

// firstErrors keeps the log's first n non-empty lines: NVRTC prints each
// message as file(line): error: ..., then the offending source line.
func firstErrors(log string, n int) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if len(out) >= n {
			out = append(out, "...")
			break
		}
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
