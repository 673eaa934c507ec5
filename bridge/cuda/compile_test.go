//go:build linux

package cuda

import (
	"strings"
	"testing"
)

// TestCompileKernels compiles kernels/cuda for sm_90 with NVRTC alone: it
// needs no GPU, only libnvrtc (LD_LIBRARY_PATH can point at one).
func TestCompileKernels(t *testing.T) {
	a := &api{}
	dirs := searchDirs(nil)
	if err := a.loadNVRTC(dirs, strings.Join(dirs, ", ")); err != nil {
		t.Skip(err)
	}
	src, files, err := source()
	if err != nil {
		t.Fatal(err)
	}
	if files[0] != "common.cu" {
		t.Fatalf("common.cu must come first, got %v", files)
	}
	cubin, err := a.compile(src, compileOptions(90, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NVRTC %s (%s): %d files, cubin of %d bytes", a.nvrtcVersionString(), a.nvrtcPath, len(files), len(cubin))
	for _, n := range kernelNames() {
		if !strings.Contains(string(cubin), n) {
			t.Errorf("kernel %s missing from the cubin", n)
		}
	}
}

// Without a driver the constructor says so and where it looked.
func TestNoDriverError(t *testing.T) {
	_, err := loadAPI(false, nil)
	if err == nil {
		t.Skip("a CUDA driver is installed here")
	}
	if !strings.HasPrefix(err.Error(), "no CUDA driver: libcuda.so.1 not found (searched") {
		t.Fatalf("error %q does not say what was missing and where it looked", err)
	}
	if _, err := New(Options{}); err == nil || !strings.HasPrefix(err.Error(), "no CUDA driver") {
		t.Fatalf("New: %v", err)
	}
}
