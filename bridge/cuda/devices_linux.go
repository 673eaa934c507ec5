//go:build linux

package cuda

import (
	"fmt"
	"io"
	"unsafe"
)

// Devices writes the GPUs the driver sees and the libraries the backend
// would use, for `mtlbench devices`.
func Devices(w io.Writer) error {
	a, err := loadAPI(true)
	if err != nil {
		return err
	}
	th := newThread()
	defer th.close()
	return th.do(func() error {
		if r := call(a.cuInit, 0); r != 0 {
			return a.cuErr("cuInit", r)
		}
		var v, n int32
		call(a.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))
		if r := call(a.cuDeviceGetCount, uintptr(unsafe.Pointer(&n))); r != 0 {
			return a.cuErr("cuDeviceGetCount", r)
		}
		fmt.Fprintf(w, "CUDA driver %d.%d (%s), %d device(s)\n", v/1000, v%1000/10, a.driverPath, n)
		for i := int32(0); i < n; i++ {
			var dev int32
			call(a.cuDeviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(i))
			d := deviceInfo(a, dev)
			fmt.Fprintf(w, "  %d: %s, sm_%d, %d SMs, %s\n", i, d.name, d.cc, d.sms, human(d.mem))
		}
		fmt.Fprintf(w, "NVRTC %s (%s)\n", a.nvrtcVersionString(), a.nvrtcPath)
		if a.cublasPath != "" {
			fmt.Fprintf(w, "cuBLAS %s\n", a.cublasPath)
		} else {
			fmt.Fprintln(w, "cuBLAS not found: matmuls run on the backend's own kernels")
		}
		return nil
	})
}

// Selftest opens the default GPU and checks every op against the reference
// (SelftestCases), writing a table to w; the error says which cases failed.
func Selftest(w io.Writer) error {
	b, err := New(Options{})
	if err != nil {
		return err
	}
	defer b.Close()
	return Failed(RunSelftest(b, w, SelftestCases))
}
