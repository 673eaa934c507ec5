// Package cuda is the CUDA backend: the op contract of package bridge on one
// NVIDIA GPU, in pure Go (no cgo). It dlopens libcuda.so.1 (the driver
// API), NVRTC and cuBLAS with purego, compiles kernels/cuda/*.cu at run time
// with NVRTC for the device's compute capability (caching the cubin on disk
// by source, GPU and NVRTC version), and runs every CUDA call on one locked
// OS thread with the device's primary context current.
//
// Activations and the KV cache are f32; weights stay f32, f16 or bf16 as
// given; every kernel accumulates in f32. Decode steps are captured into
// CUDA graphs and replayed; see Backend. docs/cuda.md covers setup,
// library lookup and the environment variables.
//
// On a machine without the driver, New returns an error that says where it
// looked ("no CUDA driver: libcuda.so.1 not found (searched ...)"), and the
// package's tests skip with that reason.
package cuda
